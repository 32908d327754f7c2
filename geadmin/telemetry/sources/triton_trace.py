"""Request arrivals of one model from Triton's trace files (TIMESTAMPS level only).

Triton started with `--trace-config=triton,file=DIR/trace.json` writes, every `log_frequency`
traces, a numbered file `trace.json.0`, `trace.json.1`, ... and the rest when tracing is set
OFF. Each file is a JSON array with one object per event, e.g.
`{"id": 1, "model_name": "m", "model_version": 1}` and
`{"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 37021661685911}]}`.

Several models (and several captures) share the file set, so the reader takes only the files
named in `paths` (the caller lists those that appeared during its capture) and only the trace
ids whose `model_name` is the model asked for. Every read is bounded: files over
MAX_FILE_BYTES and malformed JSON are a `TraceFileError`, never a traceback; at most
`max_arrivals` arrivals are kept (the earliest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin.errors import TraceFileError

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ARRIVALS = 100_000
REQUEST_START = "REQUEST_START"


@dataclass(frozen=True)
class Arrivals:
    """A model's request start times (ns, Triton's monotonic clock, sorted) from trace files."""

    model: str
    starts_ns: tuple[int, ...]
    truncated: bool = False  # more arrivals than the bound: the earliest were kept

    def intervals_us(self) -> list[int]:
        """The inter-arrival intervals in whole microseconds (at least 1 each: perf_analyzer
        replays them as waits), one fewer than the arrivals."""
        pairs = zip(self.starts_ns, self.starts_ns[1:], strict=False)
        return [max(1, round((later - earlier) / 1000)) for earlier, later in pairs]


def trace_flags(trace_file: Path) -> list[str]:
    """tritonserver's flags for a trace file with tracing OFF (Triton 2.51 takes the file only at
    start: the API answers 501 to a new `trace_file`)."""
    return [f"--trace-config=triton,file={trace_file}", "--trace-config=level=OFF"]


def trace_files(trace_file: Path) -> list[Path]:
    """The numbered files Triton wrote for `trace_file` (trace.json.N), in N order; the bare
    name too when present (a Triton that flushed without numbering)."""
    numbered: list[tuple[int, Path]] = []
    if not trace_file.parent.is_dir():
        return []
    for path in trace_file.parent.iterdir():
        suffix = path.name.removeprefix(trace_file.name + ".")
        if suffix != path.name and suffix.isdigit():
            numbered.append((int(suffix), path))
    found = [path for _, path in sorted(numbered)]
    return [trace_file, *found] if trace_file.is_file() else found


def read_arrivals(paths: Iterable[Path], model: str, *, max_arrivals: int = MAX_ARRIVALS,
                  max_file_bytes: int = MAX_FILE_BYTES) -> Arrivals:
    """The REQUEST_START times of `model`'s traces in `paths` (rules in the module docstring)."""
    names: dict[int, str] = {}
    starts: dict[int, int] = {}
    for path in paths:
        for event in _events(path, max_file_bytes):
            _take(event, names, starts, path)
    mine = sorted(ns for trace_id, ns in starts.items() if names.get(trace_id) == model)
    return Arrivals(model, tuple(mine[:max_arrivals]), truncated=len(mine) > max_arrivals)


def _events(path: Path, max_file_bytes: int) -> Sequence[Any]:
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            raise TraceFileError(f"trace file {path} holds {size} bytes, over the bound of "
                                 f"{max_file_bytes}: capture a shorter window")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFileError(f"trace file {path} cannot be read here: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TraceFileError(f"trace file {path} is not UTF-8 text") from exc
    if not text.strip():
        return []
    try:
        events = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFileError(f"trace file {path} is not complete JSON (line {exc.lineno}, "
                             f"column {exc.colno}: {exc.msg}); was it cut short?") from exc
    if not isinstance(events, list):
        raise TraceFileError(f"trace file {path} holds a JSON {type(events).__name__}, "
                             "not the array of events Triton writes")
    return events


def _take(event: Any, names: dict[int, str], starts: dict[int, int], path: Path) -> None:
    if not isinstance(event, dict):
        raise TraceFileError(f"trace file {path} holds an event that is not an object: {event!r:.80}")
    trace_id = event.get("id")
    if not isinstance(trace_id, int) or isinstance(trace_id, bool):
        return  # events without an id (none at TIMESTAMPS level) carry no arrival
    if isinstance(event.get("model_name"), str):
        names[trace_id] = event["model_name"]
    stamps = event.get("timestamps")
    if not isinstance(stamps, list):
        return
    for stamp in stamps:
        if isinstance(stamp, dict) and stamp.get("name") == REQUEST_START:
            ns = stamp.get("ns")
            if not isinstance(ns, int) or isinstance(ns, bool) or ns < 0:
                raise TraceFileError(f"trace file {path}: trace {trace_id}'s REQUEST_START has "
                                     f"no time in ns: {ns!r:.40}")
            starts.setdefault(trace_id, ns)
