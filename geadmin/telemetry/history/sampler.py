"""The telemetry sampler: scrape Triton's /metrics every interval, derive, store in history.

One per workspace: it holds `$GEADMIN_HOME/.geadmin-sampler.lock` (an flock, released when
the process ends, however it ends), so two samplers never write the same history. It runs
outside Streamlit — `geadmin sampler`, or a thread of `geadmin up` — so history has no gaps
when nobody has the dashboard open.

Each tick: scrape, derive against the previous scrape, write the window (and the NPU
devices, when a source has any) to geadmin.telemetry.history.record. When Triton does not answer,
the tick records a gap and forgets the previous scrape, so the first window after Triton is
back starts from a fresh baseline — a restart is a gap, never a spike. Nothing a tick meets
stops the loop: a failing database or an unexpected error is reported (once per kind of
trouble) and the next tick runs as planned. After the metrics, each tick runs the sampler's
watchers (`geadmin.ops.probe.Prober`: model states and synthetic probes), whose trouble is
reported the same way. Every `PRUNE_EVERY_S` the history is
downsampled and pruned to the retention. `stop` (SIGTERM in the CLI) ends the loop at once,
or after the scrape in flight (bounded by its timeout).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from geadmin import disk
from geadmin.errors import GeAdminError, SamplerLockedError, TelemetryError, WorkspaceDatabaseError
from geadmin.repository.locks import PidLock, pid_lock
from geadmin.telemetry.derive import derive
from geadmin.telemetry.history import record
from geadmin.telemetry.sources import npu_smi
from geadmin.telemetry.sources.npu import NpuDevice, devices_from_exporter, devices_from_triton, with_models
from geadmin.telemetry.sources.scrape import Scrape, scrape

LOCK_FILE = ".geadmin-sampler.lock"
PRUNE_EVERY_S = 60.0
NPU_SMI_EVERY_S = 10.0  # npu-smi is a subprocess: not on every tick
Printer = Callable[[str], None]
Watcher = Callable[[], object]  # run once per tick after the metrics; raises GeAdminError on trouble


@dataclass(frozen=True)
class SamplerOptions:
    metrics_url: str
    home: Path
    interval_s: float = 2.0
    retention_h: float = record.DEFAULT_RETENTION_H
    exporter_url: str | None = None  # npu-exporter's /metrics, when configured
    npu_smi: str | None = None  # the npu-smi binary, when on PATH

    @property
    def timeout_s(self) -> float:
        """A scrape may take at most this long: an interval, between 1 and 5 s."""
        return max(1.0, min(5.0, self.interval_s))


@dataclass(frozen=True)
class Tick:
    """What one tick did: `models` rows written (0 for the baseline tick), or the gap's reason."""

    at_s: float
    models: int = 0
    gap: str = ""
    problem: str = ""  # something that went wrong besides Triton (the database, a bug)


def lock(home: Path) -> PidLock:
    """Claim the workspace's history for this sampler; released when closed (or at exit)."""

    def refused(holder: str) -> GeAdminError:
        return SamplerLockedError(
            f"another sampler ({holder}) already records the telemetry of the workspace {home} "
            "(`geadmin up` runs one): nothing to do, its history is the one the Metrics page reads")

    try:
        return pid_lock(home / LOCK_FILE, refused)
    except OSError as exc:
        fix = disk.next_step(exc, home, "set GEADMIN_HOME to a writable directory")
        raise SamplerLockedError(f"cannot use the workspace {home} for the sampler: "
                                 f"{exc.strerror or exc}; {fix}") from exc


class Sampler:
    """Scrape → derive → history, every `interval_s`. Call `run(stop)` on a thread or main."""

    def __init__(self, options: SamplerOptions, *, say: Printer = print,
                 clock: Callable[[], float] = time.time, watchers: Sequence[Watcher] = ()) -> None:
        self.options = options
        self.watchers = tuple(watchers)
        self.say = say
        self.clock = clock
        self.previous: Scrape | None = None
        self.ticks = 0
        self._last_prune = 0.0
        self._last_trouble = ""
        self._npu_smi_at = 0.0
        self._npu_smi_devices: list[NpuDevice] = []
        self._npu_trouble = False

    def tick(self) -> Tick:
        """One sample. Never raises a GeAdminError: a failure is the returned Tick's gap or problem."""
        self.ticks += 1
        opts = self.options
        try:
            page = scrape(opts.metrics_url, timeout_s=opts.timeout_s)
        except TelemetryError as exc:
            return self._gap(str(exc).splitlines()[0])
        try:
            written = self._store(page)
            self._maybe_prune(page.timestamp_s)
        except WorkspaceDatabaseError as exc:
            return self._trouble(Tick(page.timestamp_s, problem=str(exc)))
        finally:
            self.previous = page
        return self._trouble(Tick(page.timestamp_s, models=written, problem=self._watch()))

    def _watch(self) -> str:
        problems = []
        for watcher in self.watchers:
            try:
                watcher()
            except GeAdminError as exc:
                # a watcher's owner may name itself (`what = "NPU faults"`); probes are the default
                what = getattr(getattr(watcher, "__self__", None), "what", "probes")
                problems.append(f"{what}: {str(exc).splitlines()[0]}")
        return "; ".join(problems)

    def run(self, stop: threading.Event) -> None:
        """Tick every interval (measured from tick start) until `stop` is set."""
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # a bug must not end the history: report it, go on
                self._trouble(Tick(self.clock(), problem=f"internal error: {type(exc).__name__}: {exc}"))
            next_at += self.options.interval_s
            now = time.monotonic()
            if next_at < now:  # a slow tick: skip the missed slots instead of bursting
                next_at = now + self.options.interval_s
            stop.wait(next_at - now)

    # -- internals --------------------------------------------------------------------
    def _store(self, page: Scrape) -> int:
        before, opts = self.previous, self.options
        if before is None or page.timestamp_s <= before.timestamp_s:
            return 0  # the baseline: a window needs two scrapes
        window = derive(before, page)
        return record.record_window(window, opts.metrics_url, self._devices(page), home=opts.home)

    def _devices(self, page: Scrape) -> list[NpuDevice]:
        """NPU devices, from the first source this host has: npu-exporter when configured, else
        npu-smi when on PATH (every NPU_SMI_EVERY_S), else npu_ge's metrics on the page itself."""
        opts = self.options
        try:
            if opts.exporter_url:
                found = devices_from_exporter(scrape(opts.exporter_url, timeout_s=opts.timeout_s))
            elif opts.npu_smi:
                if time.monotonic() - self._npu_smi_at >= NPU_SMI_EVERY_S:
                    self._npu_smi_at = time.monotonic()
                    self._npu_smi_devices = npu_smi.read_devices(opts.npu_smi, timeout_s=opts.timeout_s)
                found = self._npu_smi_devices
            else:
                return devices_from_triton(page)
        except TelemetryError as exc:
            if not self._npu_trouble:  # once, until the source answers again
                self.say(f"sampler: no NPU figures from the configured source: {str(exc).splitlines()[0]}")
            self._npu_trouble = True
            return devices_from_triton(page)
        self._npu_trouble = False
        return with_models(found, page)

    def _gap(self, reason: str) -> Tick:
        self.previous = None  # the next answer is a new baseline: nothing spans the outage
        at = self.clock()
        problem = ""
        try:
            record.record_gap(self.options.metrics_url, at, reason, home=self.options.home)
        except WorkspaceDatabaseError as exc:
            problem = str(exc)
        self._report(f"no metrics: {reason}; recording a gap and trying again every "
                     f"{self.options.interval_s:g}s")
        return Tick(at, gap=reason, problem=problem)

    def _trouble(self, tick: Tick) -> Tick:
        if tick.problem:
            self._report(tick.problem)
        elif self._last_trouble:
            self._last_trouble = ""
            self.say(f"sampler: recording again ({self.options.metrics_url})")
        return tick

    def _report(self, message: str) -> None:
        kind = message.split(":")[0]
        if kind != self._last_trouble:  # once per kind of trouble, not on every tick
            self._last_trouble = kind
            self.say(f"sampler: {message}")

    def _maybe_prune(self, now_s: float) -> None:
        if now_s - self._last_prune >= PRUNE_EVERY_S:
            self._last_prune = now_s
            record.prune(retention_h=self.options.retention_h, now_s=now_s, home=self.options.home)


class SamplerThread:
    """The sampler of `geadmin up`: a daemon thread holding the workspace's sampler lock."""

    def __init__(self, options: SamplerOptions, *, say: Printer = print,
                 watchers: Sequence[Watcher] = ()) -> None:
        self.sampler = Sampler(options, say=say, watchers=watchers)
        self._stop = threading.Event()
        self._lock = lock(options.home)  # raises SamplerLockedError before any thread starts
        self._thread = threading.Thread(target=self._run, name="geadmin-sampler", daemon=True)

    def start(self) -> SamplerThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.sampler.run(self._stop)
        finally:
            with contextlib.suppress(OSError):
                self._lock.close()

    def begin_stop(self) -> None:
        """Ask the loop to end (it does after the scrape in flight), without waiting."""
        self._stop.set()

    def stop(self, timeout_s: float = 6.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        else:
            with contextlib.suppress(OSError):
                self._lock.close()

    def alive(self) -> bool:
        return self._thread.is_alive()


def default_npu_smi() -> str | None:
    return shutil.which("npu-smi")
