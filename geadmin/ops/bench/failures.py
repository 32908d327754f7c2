"""How a load test fails: one table from what perf_analyzer (or starting it) says to a
geadmin error whose message names the cause and the next step.

`OUTPUT_FAILURES` matches perf_analyzer 2.51's own words (recorded in
tests/unit/assets/perf_analyzer/errors/), `EXCEPTION_FAILURES` what `subprocess` raises,
and `FAILURES` holds, for every `BenchFailure`, the error class and its message (a test fails
when one is missing); `TABLE` reads them like every boundary's (`geadmin.failure_table`).
"""

from __future__ import annotations

import enum
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from geadmin.binaries import wheel_layout
from geadmin.errors import (
    BenchCancelledError,
    BenchInputError,
    ForbiddenError,
    GeAdminError,
    ModelNotFoundError,
    PerfAnalyzerError,
    PerfAnalyzerMissingError,
    PerfAnalyzerTimeoutError,
    SharedMemoryUnreachableError,
    TritonUnreachableError,
    UnstableMeasurementError,
    WrongProtocolError,
)
from geadmin.failure_table import FailureTable

if TYPE_CHECKING:
    from geadmin.ops.bench.params import BenchSettings

BINARY = "perf_analyzer"


class BenchFailure(enum.Enum):
    BINARY_MISSING = "no perf_analyzer binary"
    NOT_EXECUTABLE = "perf_analyzer cannot be run"
    LIBRARIES_MISSING = "perf_analyzer's shared libraries are missing"
    UNREACHABLE = "the server does not answer"
    WRONG_PROTOCOL = "the port speaks the other protocol"
    MODEL_NOT_FOUND = "the model is not on the server"
    BAD_INPUT_DATA = "the input data is rejected"
    UNSTABLE = "no stable measurement"
    SHARED_MEMORY = "Triton cannot open the shared memory"
    RESTRICTED = "the model-config API needs the admin key"
    SHM_RESTRICTED = "the shared-memory API needs the admin key"
    TIMEOUT = "over the deadline"
    STALLED = "the model finished no request"
    CANCELLED = "cancelled"
    OTHER = "any other failure"


# Lower-cased output substrings (stderr, then stdout), first match wins; recorded from
# perf_analyzer 2.51 in tests/unit/assets/perf_analyzer/errors/<failure>.<case>.txt.
OUTPUT_FAILURES: tuple[tuple[str, BenchFailure], ...] = (
    ("error while loading shared libraries", BenchFailure.LIBRARIES_MISSING),
    ("failed to obtain stable measurement", BenchFailure.UNSTABLE),
    ("unable to open shared memory region", BenchFailure.SHARED_MEMORY),
    # registering (or first clearing) the regions of --shared-memory: HTTP "API", gRPC "protocol"
    ("unable to init infer data manager: this api is restricted", BenchFailure.SHM_RESTRICTED),
    ("unable to init infer data manager: this protocol is restricted", BenchFailure.SHM_RESTRICTED),
    ("is restricted, expecting header", BenchFailure.RESTRICTED),  # HTTP "API", gRPC "protocol"
    ("request for unknown model", BenchFailure.MODEL_NOT_FOUND),
    ("failed to init manager inputs", BenchFailure.BAD_INPUT_DATA),
    ("failed to parse --input-data", BenchFailure.BAD_INPUT_DATA),
    ("unsupported protocol", BenchFailure.WRONG_PROTOCOL),  # HTTP to a gRPC port
    ("socket closed", BenchFailure.WRONG_PROTOCOL),  # gRPC to an HTTP port
    ("couldn't connect to server", BenchFailure.UNREACHABLE),
    ("couldn't resolve host", BenchFailure.UNREACHABLE),
    ("failed to connect to all addresses", BenchFailure.UNREACHABLE),
    ("connection refused", BenchFailure.UNREACHABLE),
)
# What starting the binary can raise; first isinstance match wins, so subclasses come first.
EXCEPTION_FAILURES: tuple[tuple[type[BaseException], BenchFailure], ...] = (
    (FileNotFoundError, BenchFailure.BINARY_MISSING),
    (PermissionError, BenchFailure.NOT_EXECUTABLE),
    (subprocess.SubprocessError, BenchFailure.OTHER),
    (OSError, BenchFailure.NOT_EXECUTABLE),  # e.g. ENOEXEC: not a program for this machine
)
# {model} {binary} {address} {protocol} {other} (the other protocol) {detail} {timeout_s} {interval_ms}
# {libraries} (describe_library_search)
FAILURES: dict[BenchFailure, tuple[type[GeAdminError], str]] = {
    BenchFailure.BINARY_MISSING: (PerfAnalyzerMissingError, "load test of {model}: no perf_analyzer at "
                             "{binary} — install `tritonclient[all]==2.51.0` (its wheel ships the "
                             "binary), or name one with --perf-analyzer PATH"),
    BenchFailure.NOT_EXECUTABLE: (PerfAnalyzerMissingError, "load test of {model}: cannot run {binary} "
                             "({detail}) — make it executable (`chmod +x`) or name another with "
                             "--perf-analyzer PATH"),
    BenchFailure.LIBRARIES_MISSING: (PerfAnalyzerMissingError, "load test of {model}: perf_analyzer cannot "
                                "start ({detail}); {libraries} — if the wheel's directory holds the "
                                "library, run the test again and report this message; else reinstall "
                                "nvidia-pytriton==0.7.0, or add a directory holding it to "
                                "LD_LIBRARY_PATH"),
    BenchFailure.UNREACHABLE: (TritonUnreachableError, "load test of {model}: no Triton answers at "
                          "{address} over {protocol} ({detail}) — start it (`geadmin up`) or "
                          "check the URL"),
    BenchFailure.WRONG_PROTOCOL: (WrongProtocolError, "load test of {model}: {address} does not speak "
                             "{protocol} ({detail}) — give the {protocol} port, or use --protocol "
                             "{other} with this one"),
    BenchFailure.MODEL_NOT_FOUND: (ModelNotFoundError, "load test of {model}: Triton at {address} has no "
                              "model {model} loaded ({detail}) — load it first (`geadmin models "
                              "load {model}`)"),
    BenchFailure.BAD_INPUT_DATA: (BenchInputError, "load test of {model}: perf_analyzer rejected the input "
                             "data ({detail}) — check the inputs against the model's metadata "
                             "(`geadmin infer {model}` sends the same request)"),
    BenchFailure.UNSTABLE: (UnstableMeasurementError, "load test of {model}: no stable measurement "
                       "({detail}) — raise the measurement interval (now {interval_ms} ms), the "
                       "trials or the stability percentage (0: no gate), or run on a quieter machine"),
    BenchFailure.SHARED_MEMORY: (SharedMemoryUnreachableError, "load test of {model}: Triton at {address} "
                            "cannot open perf_analyzer's shared memory ({detail}) — system shared "
                            "memory needs both on one host sharing /dev/shm (not in containers of "
                            "their own): turn shared memory off (`--shared-memory none`; on the "
                            "Load test page, Tensors: on the wire)"),
    BenchFailure.RESTRICTED: (ForbiddenError, "load test of {model}: Triton at {address} gives its model "
                         "config only with the admin key ({detail}) — give this server's key "
                         "(--admin-key, or admin_key in the servers file) and use --protocol http "
                         "(on the Load test page, Protocol: HTTP): perf_analyzer 2.51 sends headers "
                         "over HTTP only"),
    BenchFailure.SHM_RESTRICTED: (ForbiddenError, "load test of {model}: Triton at {address} lets only "
                             "holders of the admin key register shared memory ({detail}) — give this "
                             "server's key (--admin-key, or admin_key in the servers file) and use "
                             "--protocol http (on the Load test page, Protocol: HTTP): perf_analyzer "
                             "2.51 sends headers over HTTP only; or send the tensors on the wire "
                             "(`--shared-memory none`; Tensors: on the wire)"),
    BenchFailure.TIMEOUT: (PerfAnalyzerTimeoutError, "load test of {model}: perf_analyzer ran over "
                      "{timeout_s:g}s and was stopped — test fewer points, a shorter measurement "
                      "interval, or give a longer timeout"),
    BenchFailure.STALLED: (PerfAnalyzerTimeoutError, "load test of {model}: the model finished none of "
                      "perf_analyzer's requests in {stalled_s:g}s, so perf_analyzer was stopped — it is "
                      "hung in its execute, or slower than that per request: reload it (`geadmin models "
                      "reload {model}`) and test again; `geadmin status` says what its probe found"),
    BenchFailure.CANCELLED: (BenchCancelledError, "load test of {model}: cancelled; perf_analyzer was "
                        "stopped and nothing was saved"),
    BenchFailure.OTHER: (PerfAnalyzerError, "load test of {model}: perf_analyzer failed: {detail}"),
}


TABLE = FailureTable(OUTPUT_FAILURES, EXCEPTION_FAILURES, FAILURES, BenchFailure.OTHER)
classify = TABLE.classify


def describe_library_search(library_path: str, detail: str) -> str:
    """Where perf_analyzer looked for the library `detail` names (each LD_LIBRARY_PATH
    directory and what it holds under that name) and where the wheel keeps its copy."""
    named = re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open", detail)
    soname = named[1] if named else "its libraries"
    seen = []
    for directory in (Path(d) for d in library_path.split(os.pathsep) if d):
        entry = directory / soname
        if entry.is_symlink() and not entry.exists():
            seen.append(f"{directory}: {soname} is a broken link to {os.readlink(entry)}")
        elif entry.exists():
            seen.append(f"{directory}: has {soname}")
        else:
            seen.append(f"{directory}: {'no ' + soname if directory.is_dir() else 'no such directory'}")
    searched = "searched " + "; ".join(seen) if seen else "it ran with no LD_LIBRARY_PATH"
    layout = wheel_layout()
    if layout is None or not layout.libs_dir.is_dir():
        return f"{searched}; geadmin found no nvidia_pytriton.libs on sys.path"
    copies = sorted(p.name for p in layout.libs_dir.glob(soname.split(".so")[0] + "-*"))
    return f"{searched}; the wheel's {layout.libs_dir} holds {', '.join(copies) or 'no copy of it'}"


def bench_error(failure: BenchFailure, settings: BenchSettings, *, binary: str | Path = BINARY,
                detail: str = "", library_path: str = "", stalled_s: float = 0.0) -> GeAdminError:
    """`library_path`: the LD_LIBRARY_PATH perf_analyzer ran with (said when libraries fail);
    `stalled_s`: how long the model finished no request (said when it stalled)."""
    missing = failure is BenchFailure.LIBRARIES_MISSING
    libraries = describe_library_search(library_path, detail) if missing else ""
    endpoint = settings.endpoint
    protocol = endpoint.transport.value
    error_type, message = TABLE.render(
        failure, model=settings.model, binary=binary, address=endpoint.address, protocol=protocol,
        other="http" if protocol == "grpc" else "grpc", detail=detail or "no message",
        timeout_s=settings.deadline_s, interval_ms=settings.measurement_interval_ms, libraries=libraries,
        stalled_s=stalled_s)
    if issubclass(error_type, (TritonUnreachableError, ModelNotFoundError, ForbiddenError)):
        return error_type(message, url=settings.url)
    return error_type(message)


def error_line(output: str) -> str:
    """The line that says what went wrong: a worker's own error (perf_analyzer's "Thread [N] had
    error: X" under its generic "Failed to maintain requested inference load"), else the first
    `error:` line, else the first line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        worker = re.match(r"Thread \[\d+\] had error: (.+)", line)
        if worker:
            return f"its requests failed: {worker[1]}"
    for line in lines:
        if line.lower().startswith("error") or "failed" in line.lower():
            return line
    return lines[0] if lines else ""
