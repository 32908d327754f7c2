"""What a load test may ask for, and one load test per server at a time.

`parse_loads` is the one reader of the loads a user types (the Load test page's field and
`geadmin bench --concurrency/--request-rate`); `BenchSettings` checks every bound before
perf_analyzer starts; `server_lock` holds a per-server lock file in the workspace while a
run goes on, so two runs (two sessions of the dashboard, or the dashboard and the CLI) never
measure one server at the same time — each would measure the other's load.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from geadmin import disk, settings
from geadmin.domain import Endpoint
from geadmin.errors import BenchBusyError, BenchSettingsError, ConfigError, GeAdminError
from geadmin.ops.bench.results import CONCURRENCY, MODES
from geadmin.ops.infer.inputs import DEFAULT_SEED
from geadmin.repository.locks import holder, pid_lock

SHARED_MEMORY = ("none", "system")  # perf_analyzer's --shared-memory (cuda needs a GPU)
MAX_LOADS = 32  # points in one run
MAX_CONCURRENCY = 1024  # requests in flight: perf_analyzer holds a context (and buffers) for each
MAX_REQUEST_RATE = 100_000.0  # requests/s
MIN_WINDOW_MS, MAX_WINDOW_MS = 100, 60_000  # perf_analyzer's measurement interval
MAX_TRIALS = 100
MAX_REQUEST_COUNT = 100_000  # count_windows: requests per window
MAX_BATCH_SIZE = 4096
MAX_PLANNED_S = 3600.0  # loads x trials x window: the longest a run may be planned to take
MAX_OUTPUT_SHM_BYTES = 1 << 30
MAX_SENDER_THREADS = 256  # perf_analyzer's --max-threads
LOCK_DIR = "bench-locks"


def load_bound(mode: str) -> float:
    return float(MAX_CONCURRENCY) if mode == CONCURRENCY else MAX_REQUEST_RATE


def describe_mode(mode: str) -> str:
    return "concurrencies" if mode == CONCURRENCY else "request rates (requests/s)"


def parse_loads(text: str, mode: str = CONCURRENCY) -> tuple[float, ...]:
    """`"1, 4,16"` -> (1.0, 4.0, 16.0), checked for `mode`: whole numbers from 1 to
    MAX_CONCURRENCY for concurrencies, numbers above 0 up to MAX_REQUEST_RATE for rates."""
    if mode not in MODES:
        raise BenchSettingsError(f"load test mode must be one of {', '.join(MODES)}, got {mode!r}")
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise BenchSettingsError(f"give one or more loads ({describe_mode(mode)}) separated by commas "
                                 f"(e.g. 1,4,16), not {text!r}")
    loads = []
    for item in items:
        if not item:
            continue
        try:
            value = float(item)
        except ValueError as exc:
            raise BenchSettingsError(f"{describe_mode(mode)} are numbers separated by commas (e.g. 1,4,16); "
                                     f"{item!r} is not a number") from exc
        loads.append(value)
    check_loads(tuple(loads), mode)
    return tuple(loads)


def check_loads(loads: tuple[float, ...], mode: str) -> None:
    what = describe_mode(mode)
    if not loads:
        raise BenchSettingsError(f"give one or more loads ({what}, e.g. 1,4,16)")
    if len(loads) > MAX_LOADS:
        raise BenchSettingsError(f"{len(loads)} {what} in one run: the limit is {MAX_LOADS}")
    limit = load_bound(mode)
    for load in loads:
        if not math.isfinite(load) or not load > 0:
            raise BenchSettingsError(f"{what} must be above 0, got {load:g} (one or more loads above 0)")
        if mode == CONCURRENCY and load != int(load):
            raise BenchSettingsError(f"concurrencies are whole numbers, got {load:g}")
        if load > limit:
            raise BenchSettingsError(f"{what} go up to {limit:g}, got {load:g}")


def _in_range(name: str, value: float, low: float, high: float) -> None:
    if not (low <= value <= high):  # also refuses nan
        raise BenchSettingsError(f"{name} must be from {low:g} to {high:g}, got {value}")


# perf_analyzer calls three windows in a row stable when the max/min of their throughputs and of
# their latencies are both within 1 + percentage/100; this percentage passes any windows that
# carried traffic, so it takes the first three.
NO_STABILITY_GATE = 1e6
# A rate measurement that geadmin judges itself (the objective's p99, keeping up with the offered
# rate, the failed share: capacity sweeps, objective tuning, previews) asks perf_analyzer for no
# stability of its own: on a busy host even a 100 % gate failed when one stall doubled a window's
# p99 (20 requests: the p99 is the slowest), and called a change that held the objective
# "unmeasurable". A stall still counts: it is in the p99 that geadmin judges.
JUDGED_STABILITY_PERCENTAGE = NO_STABILITY_GATE
JUDGED_REQUESTS_PER_WINDOW = 20  # enough requests in a window for a p99 to mean something


def judged_window_ms(rate_rps: float, window_ms: int) -> int:
    """The window for a judged measurement at `rate_rps`: `window_ms`, longer when that would hold
    fewer than JUDGED_REQUESTS_PER_WINDOW requests, at most MAX_WINDOW_MS."""
    wanted = math.ceil(JUDGED_REQUESTS_PER_WINDOW / rate_rps * 1000) if rate_rps > 0 else MAX_WINDOW_MS
    return int(min(max(window_ms, wanted), MAX_WINDOW_MS))


UNJUDGED_LATENCY_MS = 1000.0  # a judged rate with no p99 objective: room for requests of up to 1 s
MIN_SENDER_THREADS = 4  # perf_analyzer's own default in request-rate mode


def judged_sender_threads(rate_rps: float, p99_ms: float | None) -> int:
    """perf_analyzer's --max-threads for a judged rate. At a request rate it sends synchronously
    from 4 threads by default, so a model answering in 200 ms was offered at most 20 req/s
    whatever the rate asked, and a candidate holding a 300 ms p99 at 30 req/s (9 requests in
    flight at the objective, by Little's law) was judged short for the client's cap. Threads for
    twice what the objective lets be in flight; the cap still bounds what a saturated trial
    queues on a shared server."""
    latency_s = (p99_ms or UNJUDGED_LATENCY_MS) / 1000.0
    wanted = math.ceil(2 * rate_rps * latency_s)
    return int(min(max(wanted, MIN_SENDER_THREADS), MAX_SENDER_THREADS))


@dataclass(frozen=True)
class BenchSettings:
    """One load test. `loads` are concurrencies, or request rates (requests/s)."""

    model: str
    url: str  # geadmin's form: http://host:8000 or grpc://host:8001 (the scheme is the protocol)
    mode: str = CONCURRENCY
    loads: tuple[float, ...] = (1.0,)
    measurement_interval_ms: int = 5000
    measurement_mode: str = "time_windows"  # or count_windows
    measurement_request_count: int = 50  # count_windows: requests per window
    stability_percentage: float = 10.0  # 0: no gate (NO_STABILITY_GATE)
    max_trials: int = 10
    batch_size: int = 1
    inputs: Mapping[str, str] = field(default_factory=dict)  # {input: source text}, for the record
    seed: int = DEFAULT_SEED
    timeout_s: float | None = None  # None: enough for every point to use all its trials
    # "system": tensors travel in POSIX shared memory (no payload on the wire, so a large
    # tensor measures the server rather than the client); outputs need a region this large.
    shared_memory: str = "none"
    output_shared_memory_bytes: int = 102400  # perf_analyzer's own default
    # A file of recorded inter-arrival intervals (geadmin.ops.bench.intervals): replayed with
    # --request-intervals instead of the rate range (mode request_rate, one load: its mean rate).
    request_intervals: Path | None = None
    # perf_analyzer's --max-threads: the requests it keeps in flight at a request rate (None: its
    # default, 4; judged rates size it from the objective: judged_sender_threads).
    max_threads: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BenchSettingsError(f"load test mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        check_loads(tuple(self.loads), self.mode)
        if self.measurement_mode not in ("time_windows", "count_windows"):
            raise BenchSettingsError("measurement mode is time_windows or count_windows, "
                                     f"got {self.measurement_mode!r}")
        if self.max_trials < 1 or self.batch_size < 1:
            raise BenchSettingsError("measurement interval, trials and batch size must be at least 1")
        _in_range("the measurement window (ms)", self.measurement_interval_ms, MIN_WINDOW_MS, MAX_WINDOW_MS)
        _in_range("trials", self.max_trials, 1, MAX_TRIALS)
        _in_range("requests per window", self.measurement_request_count, 1, MAX_REQUEST_COUNT)
        _in_range("the stability percentage", self.stability_percentage, 0, NO_STABILITY_GATE)
        _in_range("the batch size", self.batch_size, 1, MAX_BATCH_SIZE)
        if self.max_threads is not None:
            _in_range("perf_analyzer's threads", self.max_threads, 1, MAX_SENDER_THREADS)
        if self.timeout_s is not None:
            _in_range("the run timeout (s)", self.timeout_s, 1, 4 * MAX_PLANNED_S)
        planned_s = len(self.loads) * self.max_trials * self.measurement_interval_ms / 1000.0
        if planned_s > MAX_PLANNED_S:
            raise BenchSettingsError(
                f"{len(self.loads)} loads x {self.max_trials} trials x {self.measurement_interval_ms} ms "
                f"windows could take {planned_s / 60:.0f} min; the limit is {MAX_PLANNED_S / 60:.0f} min: "
                "use fewer loads, fewer trials or a shorter window")
        if self.request_intervals is not None and (self.mode == CONCURRENCY or len(self.loads) != 1):
            raise BenchSettingsError("recorded intervals replay one request-rate load, not a range")
        if self.shared_memory not in SHARED_MEMORY:
            raise BenchSettingsError(f"shared memory is one of {', '.join(SHARED_MEMORY)}, "
                                     f"got {self.shared_memory!r}")
        if self.output_shared_memory_bytes < 1:
            raise BenchSettingsError("the output shared-memory size must be at least 1 byte, "
                                     f"got {self.output_shared_memory_bytes}")
        _in_range("the output shared-memory size (bytes)", self.output_shared_memory_bytes, 1,
                  MAX_OUTPUT_SHM_BYTES)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint.parse(self.url)

    @property
    def deadline_s(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        window_s = self.measurement_interval_ms / 1000.0
        return 30.0 + len(self.loads) * (self.max_trials + 2) * max(window_s, 1.0) * 2

    def record(self) -> dict[str, Any]:
        return asdict(self) | {"inputs": dict(self.inputs), "loads": list(self.loads)}


# -- one run per server --------------------------------------------------------------------
def lock_path(home: Path, server_url: str) -> Path:
    """The lock file of the server `server_url` names (host and port, whatever the scheme)."""
    try:
        endpoint = Endpoint.parse(server_url)
        key = f"{endpoint.host.lower()}:{endpoint.port}"
    except (ConfigError, ValueError):
        key = server_url
    return home / LOCK_DIR / (hashlib.sha256(key.encode()).hexdigest()[:16] + ".lock")


TUNING = " (tuning run)"  # how a tuning run marks the holder it writes after its model's name


@contextmanager
def server_lock(home: Path, server_url: str, model: str = "", *, tuning: bool = False) -> Iterator[None]:
    """Held while a load test (or, `tuning`, a tuning run: `geadmin.ops.tune.search`) runs
    against `server_url`; BenchBusyError when another holds it (any process, any thread: the
    lock belongs to the open file, released when it closes)."""
    path = lock_path(home, server_url)

    def refused(holder: str) -> GeAdminError:
        other = "a tuning run measures" if f"{TUNING}, pid" in holder else "another load test runs against"
        return BenchBusyError(f"{other} {server_url} now ({holder}): two at once "
                              "would measure each other's load; wait for it to finish, or cancel it")

    try:
        held = pid_lock(path, refused, what=(model or "a model") + (TUNING if tuning else ""))
    except OSError as exc:
        fix = disk.next_step(exc, path.parent, "check that the workspace is writable (GEADMIN_HOME)")
        raise BenchSettingsError(f"cannot create the load-test lock {path}: {exc.strerror or exc}; "
                                 f"{fix}") from exc
    with held:
        yield


@dataclass(frozen=True)
class RunningLoadTest:
    model: str  # '' when the holder did not say
    holder: str  # as the holder wrote it: "resnet50, pid 1234"


def load_test_running(home: Path | None, server_url: str) -> RunningLoadTest | None:
    """The load test `server_lock` holds for `server_url` now, or None (probes skip its model).
    Read without locking, so asking never makes a starting load test think it is not alone."""
    held_by = holder(lock_path(home or settings.home(), server_url))
    if not held_by:
        return None
    model = held_by.rpartition(", pid ")[0].removesuffix(TUNING)
    return RunningLoadTest("" if model == "a model" else model, held_by)
