"""One perf_analyzer process, from start to the points it measured.

It runs as an argument list (never a shell), in its own process group, bounded by a deadline,
and is stopped TERM -> KILL on cancel or timeout, or when the model finishes no request for
`stall_s` (Triton's statistics, when a reader is given): a hung model would keep perf_analyzer
waiting until the deadline, minutes later, with nothing to show. Its stdout says which point it measures
("Request concurrency: 4", "Request Rate: 50 ..."): each becomes a progress call, made on the
caller's thread (a Streamlit page draws only from its own). Its CSV report holds the points;
a run that ends without every point it was asked for is an `InvocationResult` whose
`stopped` is the error its output names (`geadmin.ops.bench.failures`), never a silently
shorter result.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from geadmin.binaries import dies_with_parent, terminate_group
from geadmin.errors import GeAdminError
from geadmin.interrupts import raise_pending
from geadmin.ops.bench.failures import BenchFailure, bench_error, classify, error_line
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.bench.results import REQUEST_RATE, BenchPoint, describe_load, parse_csv

STOP_GRACE_S = 5.0  # after SIGTERM, before SIGKILL
POLL_S = 0.1
STALL_POLL_S = 2.0  # how often the model's finished requests are read
STALL_MIN_S = 30.0  # no finished request for this long (at least 3 windows) stops the run

# "Request Rate: 50 inference requests per seconds" starts a point; the summary at the end
# ("Request Rate: 50, throughput: ...") does not.
_POINT = re.compile(r"^\s*Request (?:concurrency|Rate):\s*([0-9.]+)(?:\s|$)")


# Under a point, at a request rate: "[WARNING] Perf Analyzer was not able to keep up with the
# desired request rate. 29.59% of the requests were delayed." (only above 1 %)
_SENT_LATE = re.compile(r"([0-9.]+)% of the requests were delayed")


def point_started(line: str) -> float | None:
    """The load a stdout line announces ("Request concurrency: 4", "Request Rate: 50 ...")."""
    match = _POINT.match(line)
    return float(match[1]) if match else None


@dataclass(frozen=True)
class InvocationResult:
    """The points perf_analyzer measured, and why it stopped before the last load, if it did."""

    points: tuple[BenchPoint, ...]
    stopped: GeAdminError | None = None


@dataclass
class Invocation:
    """One perf_analyzer process over `argv`; `on_point(load)` as each point starts."""

    settings: BenchSettings
    argv: list[str]
    env: dict[str, str]
    deadline: float
    cancel: threading.Event | None
    on_point: Callable[[float], None]
    stdout: list[str] = field(default_factory=list)
    stderr: list[bytes] = field(default_factory=list)
    announced: queue.SimpleQueue[float] = field(default_factory=queue.SimpleQueue)
    finished: Callable[[], int | None] | None = None  # the model's finished requests; None: unknown

    @property
    def stall_s(self) -> float:
        """At least 3 windows, and at a request rate 3 requests' gaps: a model sent nothing
        finishes nothing."""
        gaps_s = 3.0 / min(self.settings.loads) if self.settings.mode == REQUEST_RATE else 0.0
        return max(STALL_MIN_S, 3 * self.settings.measurement_interval_ms / 1000.0, gaps_s)

    def measure(self, csv_path: Path, loads: Sequence[float]) -> InvocationResult:
        """The points of `loads` from the report at `csv_path` (the argv's -f)."""
        return read_report(self.settings, csv_path, loads, self.run())

    def run(self) -> str:
        """perf_analyzer's output (stderr, then stdout); a failure or a stop raises."""
        binary = self.argv[0]
        try:
            # this thread waits for it below: a killed geadmin takes perf_analyzer with it
            process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=self.env, start_new_session=True,
                                       preexec_fn=dies_with_parent())
        except (OSError, subprocess.SubprocessError) as exc:
            raise bench_error(classify(exc), self.settings, binary=binary, detail=str(exc)) from exc
        readers = [threading.Thread(target=self._read_stdout, args=(process,), daemon=True),
                   threading.Thread(target=self._read_stderr, args=(process,), daemon=True)]
        for reader in readers:
            reader.start()
        stopped: BenchFailure | None = None
        stall = _StallWatch(self.finished, self.stall_s)
        try:
            while process.poll() is None:
                raise_pending()  # a SIGTERM or Ctrl-C whose own raise was dropped (geadmin.interrupts)
                self._deliver()
                if self.cancel is not None and self.cancel.is_set():
                    stopped = BenchFailure.CANCELLED
                elif time.monotonic() > self.deadline:
                    stopped = BenchFailure.TIMEOUT
                elif stall.stalled():
                    stopped = BenchFailure.STALLED
                if stopped is not None:
                    break
                time.sleep(POLL_S)
        finally:  # cancelled, over time, or interrupted (Ctrl-C): the group goes too
            if stopped is not None or process.poll() is None:
                terminate_group(process, STOP_GRACE_S)
        for reader in readers:
            reader.join(timeout=5)
        self._deliver()
        if stopped is not None:
            raise bench_error(stopped, self.settings, binary=binary, stalled_s=self.stall_s)
        output = b"".join(self.stderr).decode(errors="replace") + "\n" + "".join(self.stdout)
        if process.returncode != 0:
            raise bench_error(classify(output=output), self.settings, binary=binary,
                              detail=error_line(output) or f"exit code {process.returncode}",
                              library_path=self.env.get("LD_LIBRARY_PATH", ""))
        return output

    def _read_stdout(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace")
            self.stdout.append(line)
            load = point_started(line)
            if load is not None:
                self.announced.put(load)

    def _deliver(self) -> None:
        """Progress on the caller's thread (a Streamlit page can draw only from its own)."""
        while not self.announced.empty():
            self.on_point(self.announced.get())

    def _read_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        self.stderr.extend(process.stderr)


class _StallWatch:
    """Has the model finished no request for `stall_s`? Read every STALL_POLL_S; a reading
    that fails (None) counts as movement: only a model seen standing still is stalled."""

    def __init__(self, finished: Callable[[], int | None] | None, stall_s: float) -> None:
        self.finished, self.stall_s = finished, stall_s
        self.last: int | None = None
        self.moved_at = self.read_at = time.monotonic()

    def stalled(self) -> bool:
        now = time.monotonic()
        if self.finished is None or now - self.read_at < STALL_POLL_S:
            return False
        self.read_at = now
        count = self.finished()
        if count is None or count != self.last:
            self.last, self.moved_at = count, now
            return False
        return now - self.moved_at >= self.stall_s


def read_report(settings: BenchSettings, csv_path: Path, loads: Sequence[float],
                output: str) -> InvocationResult:
    """The points of a run that exited 0. perf_analyzer exits 0 without a report (raised), or with
    the points before a load it could not measure (e.g. no window was stable there): its output
    says why, so the error is that, not a missing file or a shorter sweep."""
    try:
        text = csv_path.read_text()
    except OSError as exc:
        failure = classify(output=output)
        said = error_line(output)
        detail = said if failure is not BenchFailure.OTHER else \
            f"it exited 0 but wrote no report ({exc.strerror})" + (f"; it said: {said}" if said else "")
        raise bench_error(failure, settings, detail=detail) from exc
    points = with_sent_late(parse_csv(text)[1], output)
    if len(points) < len(loads):  # a sweep stops at its first failed load
        said = error_line(output)
        missed = describe_load(settings.mode, loads[len(points)])
        detail = f"{missed} not measured, {len(points)} of {len(loads)} loads were"
        detail += f": {said}" if said else ""
        return InvocationResult(points, bench_error(classify(output=output), settings, detail=detail))
    return InvocationResult(points)


def with_sent_late(points: tuple[BenchPoint, ...], output: str) -> tuple[BenchPoint, ...]:
    """`points` with the share of requests perf_analyzer's stdout says it sent late at each."""
    late: dict[float, float] = {}
    load = points[0].load if points else None  # a replay prints no "Request Rate: N" before its point
    for line in output.splitlines():
        started = point_started(line)
        if started is not None:
            load = started
        said = _SENT_LATE.search(line)
        if said and load is not None:
            late[load] = float(said[1])
    return tuple(replace(p, sent_late_pct=late.get(p.load, 0.0)) for p in points)
