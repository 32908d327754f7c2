"""Capture a model's request arrivals from Triton's trace API (TIMESTAMPS level, never TENSORS).

1. Refuse when Triton was started without a trace file (GET /v2/trace/setting: trace_file "")
   or when its directory is not readable here (a remote Triton: the file is on that host).
2. Note the trace files present, then set TIMESTAMPS tracing on the model only, bounded by
   `trace_count` so a crashed capture cannot trace forever.
3. Wait `seconds` (a cancel event ends the wait early), then in `finally` put the model's
   settings back: cleared to the global ones (None values), or the model's own where it had
   some; turning tracing off also flushes the last traces. One capture of a model at a time
   (a second would count the same traces twice).
4. Read only the files that appeared during the capture, take the model's REQUEST_START times
   and record the intervals (geadmin.telemetry.history.arrivals), audited.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from geadmin import audit, settings
from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError, InvalidArgumentError, TraceFileError
from geadmin.repository.locks import pid_lock
from geadmin.telemetry.history.arrivals import ArrivalCapture, record_capture
from geadmin.telemetry.sources.triton_trace import read_arrivals, trace_files, trace_flags
from geadmin.triton.client import TritonClient

MAX_SECONDS = 600.0
MAX_REQUESTS = 20_000
TRIGGER_FLAG = " ".join(trace_flags(Path("DIR/trace.json")))
ON = {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1000"}
FLUSH_S = 2.0


def trace_file_of(client: TritonClient) -> Path:
    """Where Triton writes its traces; TraceFileError when it cannot be read here."""
    name = client.trace_settings().get("trace_file") or ""
    if isinstance(name, list):
        name = name[0] if name else ""
    if not name:
        raise TraceFileError(f"{client.url} was started without a trace file: start tritonserver with "
                             f"{TRIGGER_FLAG} (geadmin up does)")
    path = Path(str(name))
    if not path.parent.is_dir() or not os.access(path.parent, os.R_OK | os.X_OK):
        raise TraceFileError(f"{client.url} writes its traces to {path}, which is not readable here: "
                             "the file is on that server's host; run the capture there")
    return path


SETTINGS = ("trace_level", "trace_rate", "trace_count", "log_frequency")


def _restoring(client: TritonClient, model: str) -> dict[str, object]:
    """What puts the model's trace settings back after the capture: cleared to the global ones,
    or, where the model had its own (they differ from the global ones), those values."""
    own, shared = client.trace_settings(model), client.trace_settings()
    return {name: (own.get(name) if own.get(name) != shared.get(name) else None) for name in SETTINGS}


def _key(server: str, model: str) -> str:
    return hashlib.sha256(f"{server}\0{model}".encode()).hexdigest()[:16]


def _busy(model: str) -> Callable[[str], GeAdminError]:
    def refused(holder: str) -> GeAdminError:
        return TraceFileError(f"another capture of {model} is under way ({holder}): its traces would be "
                              "counted twice; wait for it to end")
    return refused


def capture_arrivals(client: TritonClient, model: str, *, auth: object, seconds: float = 30.0,
                     max_requests: int = MAX_REQUESTS, home: Path | None = None,
                     cancel: threading.Event | None = None) -> ArrivalCapture:
    """Capture (steps in the module docstring); the stored capture."""
    actor = require(auth, GuardedAction.MONITORING)
    if not 1.0 <= seconds <= MAX_SECONDS:
        raise InvalidArgumentError(f"a capture lasts 1 to {MAX_SECONDS:g} s, got {seconds:g}")
    if not 2 <= max_requests <= MAX_REQUESTS:
        raise InvalidArgumentError(f"a capture takes 2 to {MAX_REQUESTS} requests, got {max_requests}")
    trace_file = trace_file_of(client)
    workspace = home or settings.home()
    with pid_lock(workspace / "locks" / f"capture-{_key(client.url, model)}.lock", _busy(model),
                  what=f"capture of {model} on {client.url}"):
        restore = _restoring(client, model)
        before = set(trace_files(trace_file))
        start = time.time()
        try:
            client.update_trace_settings(model, {**ON, "trace_count": str(max_requests)})
            (cancel or threading.Event()).wait(seconds)
        finally:
            client.update_trace_settings(model, restore)
            end = time.time()
        deadline = time.monotonic() + FLUSH_S  # Triton writes the last file as tracing stops
        new = [p for p in trace_files(trace_file) if p not in before]
        while not new and time.monotonic() < deadline:
            time.sleep(0.1)
            new = [p for p in trace_files(trace_file) if p not in before]
    arrivals = read_arrivals(new, model, max_arrivals=max_requests)
    capture = record_capture(home=home, server=client.url, model=model, window_start_s=start,
                             window_end_s=end, intervals_us=arrivals.intervals_us())
    audit.record("capture-arrivals", model, audit.Result.OK, actor=actor, server=client.url,
                 message=f"captured {len(arrivals.starts_ns)} arrivals over {end - start:.0f} s", home=home)
    return capture
