"""Load tests: `perf_analyzer` (shipped in the tritonclient 2.51 wheel) against one model.

`load_test` is the one loop the Load test page and `geadmin bench` share: build the
playground's request for the model (`geadmin.ops.infer.request`), write it as perf_analyzer's
`--input-data` JSON, run perf_analyzer at every chosen concurrency or request rate, read
its verbose CSV report (`geadmin.ops.bench.results`) and keep the run in the workspace
database.

Each perf_analyzer process (its argument list, deadline, cancel, progress and report) is one
`geadmin.ops.bench.invocation.Invocation`. Loads that step evenly (1,2,3) are one invocation;
others (1,4,16) one each. The wheel's binary needs `libb64.so.0d` and `libcudart.so.12`,
which `nvidia_pytriton.libs` holds under hashed names: a per-run directory of links to them
goes first on its LD_LIBRARY_PATH.
Every failure leaves through one table (`geadmin.ops.bench.failures.FAILURES`). What a run
may ask for (loads, window, trials), the one parser of typed loads, and the per-server lock
that keeps two runs from measuring one server at once: `geadmin.ops.bench.params`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from geadmin import db
from geadmin import settings as geadmin_settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.binaries import wheel_layout
from geadmin.diagnose.stuck import finished_requests
from geadmin.domain import Transport
from geadmin.errors import InferInputError, PerfAnalyzerError
from geadmin.ops.bench.failures import BINARY
from geadmin.ops.bench.intervals import load_flag
from geadmin.ops.bench.invocation import Invocation
from geadmin.ops.bench.params import NO_STABILITY_GATE, server_lock
from geadmin.ops.bench.params import SHARED_MEMORY as SHARED_MEMORY  # re-exported: callers' one import
from geadmin.ops.bench.params import BenchSettings as BenchSettings
from geadmin.ops.bench.params import parse_loads as parse_loads
from geadmin.ops.bench.results import BenchPoint, BenchRun, audit_run, describe_load, save_run
from geadmin.ops.infer.inputs import DEFAULT_SEED, RANDOM, InputSource
from geadmin.ops.infer.request import InferRequest, build_request, prepare
from geadmin.ops.infer.snippets import wire_bytes
from geadmin.ops.infer.spec import ModelSpec
from geadmin.triton.client import Tensor, TritonClient
from geadmin.triton.connection import HTTP_ADMIN_KEY_HEADER

LIBRARIES = {"libb64.so.0d": "libb64-*.so.0d", "libcudart.so.12": "libcudart-*.so.12*"}
RAW_DTYPES = ("FP16", "BF16")  # sent as raw bytes (b64), not as JSON numbers
Progress = Callable[[int, int, str], None]  # (points done, points in all, what runs now)


# -- finding and preparing the binary ------------------------------------------------------
def find_perf_analyzer(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`explicit`, else the one beside the running Python (the venv's), else one on PATH.
    Not checked here: running it says what is wrong, through the failure table."""
    if explicit:
        return Path(explicit).expanduser()
    beside = Path(sys.executable).parent / BINARY
    if beside.exists():
        return beside
    found = shutil.which(BINARY)
    return Path(found) if found else beside


def library_dir(scratch: Path) -> Path | None:
    """Links with the sonames perf_analyzer asks for, to nvidia_pytriton.libs' copies. Called
    from a load test's own thread: `wheel_layout` searches a copy of sys.path (see there)."""
    layout = wheel_layout()
    if layout is None or not layout.libs_dir.is_dir():
        return None
    target = scratch / "lib"
    target.mkdir(exist_ok=True)
    for soname, pattern in LIBRARIES.items():
        matches = sorted(layout.libs_dir.glob(pattern))
        if matches and not (target / soname).exists():
            (target / soname).symlink_to(matches[0])
    return target


# -- input data ----------------------------------------------------------------------------
def perf_input_data(spec: ModelSpec, request: InferRequest) -> tuple[dict[str, Any], int]:
    """The request's tensors as perf_analyzer's `--input-data` JSON, and the batch size to
    give it (`-b`). A batched model gets one step per batch item (shapes without the batch
    dimension, as perf_analyzer wants); FP16/BF16 and non-finite floats go as raw bytes."""
    batch = 1
    batched = {s.name for s in spec.inputs if s.batched}
    for tensor in request.inputs:
        if tensor.name in batched:
            batch = int(tensor.data.shape[0])
    steps: list[dict[str, Any]] = []
    for index in range(batch if batched else 1):
        step = {}
        for tensor in request.inputs:
            data = tensor.data[index] if tensor.name in batched else tensor.data
            step[tensor.name] = _tensor_entry(tensor.name, tensor.datatype, np.asarray(data))
        steps.append(step)
    return {"data": steps}, batch


def _tensor_entry(name: str, datatype: str, data: np.ndarray) -> dict[str, Any]:
    shape = [int(d) for d in data.shape]
    if datatype == "BYTES":
        try:
            return {"content": [v.decode() for v in data.flat], "shape": shape}
        except UnicodeDecodeError as exc:
            raise InferInputError(f"input {name}: perf_analyzer's JSON input data holds BYTES only "
                                  "as UTF-8 text; this tensor is not") from exc
    if datatype in RAW_DTYPES or (data.dtype.kind == "f" and not np.all(np.isfinite(data))):
        raw = wire_bytes(Tensor(name, datatype, np.ascontiguousarray(data)))
        return {"b64": base64.b64encode(raw).decode(), "shape": shape}
    return {"content": [v.item() for v in data.flat], "shape": shape}


def bench_input(client: TritonClient, model: str, sources: Mapping[str, InputSource] | None = None,
                *, batch_size: int = 1, seed: int = DEFAULT_SEED,
                default: InputSource = RANDOM) -> tuple[dict[str, Any], int]:
    """The playground's request for `model` (same sources, same seed; `default` for inputs
    no source names) as `--input-data` JSON, and its batch size."""
    spec = prepare(client, model)
    request = build_request(spec, sources, batch_size=batch_size, seed=seed, default=default)
    return perf_input_data(spec, request)


# -- running -------------------------------------------------------------------------------
def plan_invocations(loads: Sequence[float]) -> list[tuple[float, ...]]:
    """Consecutive loads that step evenly share one perf_analyzer invocation (start:end:step)."""
    groups: list[list[float]] = []
    for load in loads:
        group = groups[-1] if groups else None
        whole = group is not None and load == int(load) and group[-1] == int(group[-1])
        if group and whole and ((len(group) == 1 and load > group[0])
                                or (len(group) > 1 and load - group[-1] == group[1] - group[0])):
            group.append(load)
        else:
            groups.append([load])
    return [tuple(g) for g in groups]


def perf_argv(settings: BenchSettings, binary: Path, loads: Sequence[float], *,
              input_path: Path | None, csv_path: Path, batch_size: int,
              admin_key: str | None = None) -> list[str]:
    """`admin_key`: the configured server's key, for its model config and, with shared memory,
    the registration of its regions (restricted APIs in every stack geadmin starts). It rides
    every request (perf_analyzer cannot scope a header), and over HTTP only (2.51 ignores -H on
    gRPC): only ever the server `settings` names, which is where the key belongs. It is on
    perf_analyzer's command line while it runs (docs/security.md, the key on a command line)."""
    endpoint = settings.endpoint
    if endpoint.ssl:
        raise PerfAnalyzerError(f"load test of {settings.model}: geadmin does not pass TLS settings to "
                                "perf_analyzer yet — run it against the plain http:// or grpc:// port")
    step = loads[1] - loads[0] if len(loads) > 1 else 1
    span = f"{loads[0]:g}:{loads[-1]:g}:{step:g}"
    argv = [str(binary), "-m", settings.model, "-u", endpoint.address, "-i", endpoint.transport.value,
            *load_flag(settings, span),
            "--measurement-interval", str(settings.measurement_interval_ms),
            "--measurement-mode", settings.measurement_mode,
            "--stability-percentage", f"{settings.stability_percentage or NO_STABILITY_GATE:g}",
            "--max-trials", str(settings.max_trials),
            "-b", str(batch_size), "-f", str(csv_path), "--verbose-csv"]
    if settings.measurement_mode == "count_windows":
        argv += ["--measurement-request-count", str(settings.measurement_request_count)]
    if settings.max_threads is not None:
        argv += ["--max-threads", str(settings.max_threads)]
    if admin_key and endpoint.transport is Transport.HTTP:
        argv += ["-H", f"{HTTP_ADMIN_KEY_HEADER}:{admin_key}"]
    if input_path is not None:
        argv += ["--input-data", str(input_path)]
    if settings.shared_memory != "none":
        argv += ["--shared-memory", settings.shared_memory,
                 "--output-shared-memory-size", str(settings.output_shared_memory_bytes)]
    return argv


def run_perf_analyzer(
    settings: BenchSettings,
    *,
    input_data: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    binary: str | os.PathLike[str] | None = None,
    auth: Authorization | None = None,
    label: str = "",
    admin_key: str | None = None,
    finished: Callable[[], int | None] | None = None,
) -> BenchRun:
    """Run every load of `settings`; the measured run (not saved), with `cut_short` saying why
    when perf_analyzer stopped before the last load (the points before it are kept; none
    measured raises that error). `input_data` is the
    `--input-data` document (None: perf_analyzer's own random data); `admin_key`: see perf_argv;
    `finished`: reads the model's finished requests, to stop a run the model does not answer.
    `auth` must cover `bench` (NotAuthorizedError before perf_analyzer is looked for)."""
    who = require(auth, GuardedAction.BENCH).name
    executable = find_perf_analyzer(binary)
    total = len(settings.loads)
    report = progress or (lambda done, total, text: None)
    started_at = db.utc_now()
    deadline = time.monotonic() + settings.deadline_s
    points: list[BenchPoint] = []
    with tempfile.TemporaryDirectory(prefix="geadmin-bench-") as scratch_name:
        scratch = Path(scratch_name)
        env = dict(os.environ)
        libs = library_dir(scratch)
        if libs is not None:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(libs), env.get("LD_LIBRARY_PATH")) if p)
        input_path = None
        if input_data is not None:
            input_path = scratch / "input_data.json"
            input_path.write_text(json.dumps(input_data))
        report(0, total, f"starting perf_analyzer for {settings.model}")
        for number, loads in enumerate(plan_invocations(settings.loads)):
            csv_path = scratch / f"report{number}.csv"
            base = len(points)

            def on_point(load: float, base: int = base, loads: tuple[float, ...] = loads) -> None:
                done = base + (loads.index(load) if load in loads else 0)
                report(done, total, f"measuring at {describe_load(settings.mode, load)}")

            argv = perf_argv(settings, executable, loads, input_path=input_path, csv_path=csv_path,
                             batch_size=batch_size or settings.batch_size, admin_key=admin_key)
            measured = Invocation(settings, argv, env, deadline, cancel, on_point,
                                  finished=finished).measure(csv_path, loads)
            points.extend(measured.points)
            report(len(points), total, f"measured {len(points)} of {total} points")
            if measured.stopped is not None:  # no later load is tried
                if not points:
                    raise measured.stopped
                cut_short = str(measured.stopped)
                break
        else:
            cut_short = ""
    return BenchRun(settings.model, settings.url, settings.mode, tuple(points), started_at, who, label,
                    settings.record(), cut_short=cut_short)


def load_test(
    client: TritonClient,
    settings: BenchSettings,
    sources: Mapping[str, InputSource] | None = None,
    *,
    default: InputSource = RANDOM,
    request: InferRequest | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    binary: str | os.PathLike[str] | None = None,
    auth: Authorization | None = None,
    label: str = "",
    home: Path | None = None,
    save: bool = True,
) -> BenchRun:
    """The page's and the CLI's load test: the playground's input for `settings.model`
    (from `sources`, seeded — or exactly `request`, one the Playground sent), perf_analyzer at
    every load, the run saved (with its id) and audited (`bench_results.audit_run`, also when
    it fails, is refused or is cut short). One run per server at a time
    (`geadmin.ops.bench.params.server_lock`): BenchBusyError while another runs. `auth`
    must cover `bench` (NotAuthorizedError before anything starts); the run is saved and
    audited under its name."""
    who = require(auth, GuardedAction.BENCH).name
    lock_home = home or geadmin_settings.home()
    # The server's address the client talks to and the one perf_analyzer measures (its HTTP
    # and gRPC ports, when they differ): a run over either blocks a run over the other.
    run: BenchRun | None = None
    error: BaseException | None = None
    try:
        with ExitStack() as held:
            for url in dict.fromkeys((client.url, settings.url)):
                held.enter_context(server_lock(lock_home, url, settings.model))
            run = _load_test(client, settings, sources, default=default, request=request, progress=progress,
                             cancel=cancel, binary=binary, auth=auth, label=label, home=home, save=save)
        return run
    except BaseException as exc:  # audited, refusals and interruptions (a Streamlit rerun) included
        error = exc
        raise
    finally:
        audit_run(settings.record(), settings.model, settings.url, who, run, error, home)


def _load_test(
    client: TritonClient,
    settings: BenchSettings,
    sources: Mapping[str, InputSource] | None,
    *,
    default: InputSource,
    request: InferRequest | None,
    progress: Progress | None,
    cancel: threading.Event | None,
    binary: str | os.PathLike[str] | None,
    auth: Authorization | None,
    label: str,
    home: Path | None,
    save: bool,
) -> BenchRun:
    if request is not None:  # its batch is the request's, whatever the settings said
        data, batch = perf_input_data(prepare(client, settings.model), request)
        settings = replace(settings, batch_size=batch)
    else:
        data, batch = bench_input(client, settings.model, sources, batch_size=settings.batch_size,
                                  seed=settings.seed, default=default)
    run = run_perf_analyzer(settings, input_data=data, batch_size=batch, progress=progress,
                            cancel=cancel, binary=binary, auth=auth, label=label, admin_key=client.admin_key,
                            finished=lambda: finished_requests(client).get(settings.model))
    return save_run(run, home) if save else run

