"""`capacity_report`: the one core function behind `geadmin capacity` and the Capacity page.

Per model: the saturation rate (a sweep measured now with `measure`, else the newer of the last
saved sweep and the objective tuner's curve, younger than `max_age_s`), the recorded load over
the window (geadmin.telemetry.history.traffic, SQLite or Prometheus), its least-squares trend,
and the figures geadmin.diagnose.capacity assembles. Per NPU: the HBM used and free, from the
first NPU source that answers. Reading is unguarded; measuring is the guarded sweep
(geadmin.ops.capacity.sweep).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from geadmin import settings
from geadmin.diagnose.capacity import (
    CapacityReport,
    DeviceMemory,
    ModelCapacity,
    Saturation,
    assess,
    npu_headroom,
)
from geadmin.diagnose.forecast import fit_trend, why_no_trend
from geadmin.domain import ModelState
from geadmin.errors import GeAdminError, InvalidArgumentError, ModelNotFoundError
from geadmin.ops.bench.params import MAX_WINDOW_MS, MIN_WINDOW_MS
from geadmin.ops.capacity import saved
from geadmin.ops.capacity.sweep import run_saturation_sweep
from geadmin.ops.capacity.tuned import from_tuner
from geadmin.repository import trials
from geadmin.telemetry.alerting.objectives import objectives
from geadmin.telemetry.history import traffic
from geadmin.telemetry.history.reader import HistoryReader, open_history
from geadmin.telemetry.history.traffic import RecordedLoad
from geadmin.telemetry.npu_map import ModelMap, loaded_npu_ge_configs, model_map
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.npu import NpuDevice, NpuReport
from geadmin.triton.client import TritonClient

Progress = Callable[[str], None]
MAX_AGE_S = 7 * 86400.0  # a saved sweep older than a week is measured again


@dataclass(frozen=True)
class CapacityOptions:
    window_h: float = 24.0  # the history window the load and the trend are read over
    horizon_days: float = 30.0  # how far the trend is carried
    min_headroom: float = 1.2  # below it a model needs attention
    measure: bool = False  # sweep now (guarded) instead of reading the last saved sweep
    max_age_s: float = MAX_AGE_S
    start_rps: float = 1.0
    window_ms: int = 1000

    def __post_init__(self) -> None:
        if not 0 < self.window_h <= 24 * 90:
            raise InvalidArgumentError(f"the history window is above 0 and up to 90 days, got "
                                       f"{self.window_h:g} h")
        if not 0 < self.horizon_days <= 3650:
            raise InvalidArgumentError(f"the forecast horizon is above 0 and up to 3650 days, got "
                                       f"{self.horizon_days:g}")
        if not MIN_WINDOW_MS <= self.window_ms <= MAX_WINDOW_MS:
            raise InvalidArgumentError(f"the sweep's window per step is {MIN_WINDOW_MS} to {MAX_WINDOW_MS} "
                                       "ms, "
                                       f"got {self.window_ms}")
        if not 1.0 <= self.min_headroom <= 100:
            raise InvalidArgumentError(f"the minimum headroom is 1 to 100 (x the recorded peak), got "
                                       f"{self.min_headroom:g}")


def read_load(history: HistoryReader, source: str, model: str, since: datetime,
              until: datetime) -> RecordedLoad:
    """The one place capacity reads recorded traffic (tune-objective's `recorded_load`)."""
    return traffic.recorded_load(model, history=history, source=source, since=since, until=until)


def _models(client: TritonClient, wanted: str | None, repository: Path | None) -> list[str]:
    index = client.repository_index()
    names = sorted({m.name for m in index if not trials.is_trial(repository, m.name)})
    if wanted:
        if wanted not in names:
            raise ModelNotFoundError(f"{wanted!r} is not in {client.url}'s model repository "
                                     f"(models: {', '.join(names) or 'none'})")
        return [wanted]
    return sorted({m.name for m in index
                   if m.state is ModelState.READY and not trials.is_trial(repository, m.name)})


def memory_of(model: str, devices: Sequence[NpuDevice], found: ModelMap) -> DeviceMemory | None:
    """HBM per instance, from a device that holds this model alone (never split between models)."""
    for device in devices:
        rows = [r for r in found.rows if r.device == device.id]
        used, total = device.device_memory
        if rows and {r.model for r in rows} == {model} and used and total:
            instances = sum(r.instances for r in rows)
            return DeviceMemory(device.id, used // max(instances, 1), total)
    return None


def _npus(npu_sources: NpuSources | None, notes: list[str]) -> NpuReport:
    if npu_sources is None:
        return NpuReport((), "", "NPUs not read")
    try:
        report = detect(npu_sources)
    except GeAdminError as exc:
        notes.append(f"no NPU memory: {str(exc).splitlines()[0]}")
        return NpuReport((), "", "NPUs not read")
    notes.extend(report.notes)
    return report


def capacity_report(client: TritonClient, *, model: str | None = None, repository: Path | None = None,
                    options: CapacityOptions | None = None, history: HistoryReader | None = None,
                    source: str | None = None, npu_sources: NpuSources | None = None, auth: object = None,
                    home: Path | None = None, now: datetime | None = None, progress: Progress | None = None,
                    cancel: threading.Event | None = None, binary: str | None = None,
                    admin_key: str | None = None) -> CapacityReport:
    """Capacity of `model` (or every READY model) on `client`'s server: `source` is the metrics
    URL its history is recorded under (the sampler's and Prometheus's name for it)."""
    options = options or CapacityOptions()
    workspace = home or settings.home()
    history = history or open_history(workspace)
    until = now or datetime.now(timezone.utc)
    since = until - timedelta(hours=options.window_h)
    notes: list[str] = []
    if options.measure and repository is None:
        raise InvalidArgumentError("measuring needs the model repository (the sweep serves a trial copy "
                                   "there): pass --repository")
    goals = objectives(home=workspace)
    npus = _npus(npu_sources, notes)
    configs = {}
    if npus.devices:
        try:
            configs = loaded_npu_ge_configs(client)
        except GeAdminError as exc:
            notes.append(f"the NPU map has no configs: {str(exc).splitlines()[0]}")
    found_map = model_map(npus.devices, configs)
    rows: list[ModelCapacity] = []
    for name in _models(client, model, repository):
        goal = goals.get(name)
        load = traffic_of(history, source, name, since, until, notes)
        saturation: Saturation | None = None
        if options.measure and goal is not None and goal.p99_ms is not None:
            assert repository is not None
            saturation = run_saturation_sweep(client, repository, name, goal, auth=auth, home=workspace,
                                            start_rps=_start(options, load), window_ms=options.window_ms,
                                            binary=binary, progress=progress, cancel=cancel,
                                            admin_key=admin_key)
        elif goal is not None:
            saturation = _known(client, name, workspace, options, until, notes)
        times, rates = ([p.at.timestamp() for p in load.points], [p.rate_rps for p in load.points]) \
            if load is not None else ([], [])
        rows.append(assess(name, goal, load, saturation, trend=fit_trend(times, rates),
                           horizon_days=options.horizon_days, min_headroom=options.min_headroom,
                           memory=memory_of(name, npus.devices, found_map), npus_here=len(npus.devices),
                           no_trend=why_no_trend(times, rates)))
    if source is None:
        notes.append("no recorded load: the server's metrics URL is not known")
    bars = [(d.id, *d.device_memory, ", ".join(found_map.models_on(d.id)) or "-") for d in npus.devices]
    return CapacityReport(client.url, options.horizon_days, options.min_headroom, tuple(rows),
                          npu_headroom(bars, npus.source), npus.summary, tuple(notes))


def traffic_of(history: HistoryReader, source: str | None, model: str, since: datetime, until: datetime,
          notes: list[str]) -> RecordedLoad | None:
    """The recorded load, or None with a note: a history that cannot be read (Prometheus down, a
    source it does not scrape) leaves the measured figures standing."""
    if not source:
        return None
    try:
        return read_load(history, source, model, since, until)
    except GeAdminError as exc:
        notes.append(f"{model}: the recorded load was not read from {history.label}: "
                     f"{str(exc).splitlines()[0]}")
        return None


def _live_instances(client: TritonClient, model: str) -> int | None:
    try:
        config = client.model_config(model)
    except GeAdminError:
        return None
    return sum(max(group.count, 1) for group in config.instance_group) or 1


def _known(client: TritonClient, model: str, home: Path, options: CapacityOptions,
           now: datetime, notes: list[str]) -> Saturation | None:
    """The newer of the last capacity sweep and the objective tuner's curve (both measured on
    trial copies), within `options.max_age_s`, measured with the live instance count: a rate of
    1 instance says nothing of 4 (saturation overstated 4x when cut from 4 to 1)."""
    live = _live_instances(client, model)
    sweep = saved.latest(model, client.url, home=home, max_age_s=options.max_age_s, now=now)
    if sweep is not None and live is not None and sweep.instances != live:
        notes.append(f"{model}: the saved capacity sweep measured {sweep.instances} instance(s) and the live "
                     f"config has {live}: not used — measure again (`geadmin capacity {model} --measure`)")
        sweep = None
    found = [s for s in (sweep, from_tuner(model, client.url, live_instances=live, home=home,
                                           max_age_s=options.max_age_s, now=now)) if s is not None]
    return max(found, key=lambda s: datetime.fromisoformat(s.measured_at), default=None)


def _start(options: CapacityOptions, load: RecordedLoad | None) -> float:
    """Start the sweep at half the recorded peak (fewer doublings), or at the options' rate."""
    if load is not None and load.peak_rate_rps:
        return max(options.start_rps, load.peak_rate_rps / 2)
    return options.start_rps
