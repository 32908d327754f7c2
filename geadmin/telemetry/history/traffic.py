"""The load a model really gets, from recorded history (workspace SQLite or Prometheus).

`recorded_load(model, history=..., source=..., since=..., until=...)` reads the model's series
through the HistoryReader protocol (geadmin.telemetry.history.reader), so the sampler's rows in
geadmin.db and a Prometheus server give the same figures:

- the request rate of a point is `requests_per_s` (successes + failures), summed over the
  model's versions at the same instant; a gap point (None) carries no weight;
- the mean rate is the window-weighted mean of those points (each weighted by the span it
  covers), so a long window counts for what it covered, not once; where the points cover
  less than MOSTLY_COVERED of the window (the sampler ran for part of it), the words say how
  much was recorded, as the mean is over that;
- the peak is the highest one point's rate: one sample interval (the sampler's interval, or
  Prometheus's step), never a single request burst inside it;
- the mean batch size is the recorded inferences divided by the recorded executions.

The batch-size MIX (share of executions per batch size) is not in either history: Triton
publishes it only in its statistics API (`batch_stats`, counted since the model loaded), not
on /metrics. `recorded_load` leaves `batch_mix` empty and `describe()` says so;
`with_live_batch_mix` adds the mix read from a live server's statistics, named as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from geadmin.errors import NoRecordedLoadError
from geadmin.telemetry.history.reader import HistoryReader
from geadmin.telemetry.history.store import Series

MOSTLY_COVERED = 0.9  # of the window: below this, a mean names the time it was recorded over


@dataclass(frozen=True)
class RatePoint:
    """One recorded point: the request rate over the window `[at - span_s, at]`."""

    at: datetime
    span_s: float
    rate_rps: float


@dataclass(frozen=True)
class RecordedLoad:
    """A model's recorded traffic over a window, and where it was read."""

    model: str
    since: datetime
    until: datetime
    mean_rate_rps: float | None  # None: no traffic recorded in the window
    peak_rate_rps: float | None  # the highest rate over one sample interval
    batch_mix: dict[int, float] = field(default_factory=dict)  # batch size -> share of executions
    source: str = ""  # "workspace history (geadmin.db)" or "Prometheus at URL"
    samples: int = 0  # how many rate points the figures rest on
    # Added by tune-objective (defaults keep the contract's constructor working):
    mean_batch_size: float | None = None  # recorded inferences / executions over the window
    batch_mix_source: str = ""  # where batch_mix was read ("" while it is empty)
    points: tuple[RatePoint, ...] = ()  # the rate points, oldest first (trend, replay)

    @property
    def has_traffic(self) -> bool:
        return self.samples > 0 and self.mean_rate_rps is not None

    @property
    def window_s(self) -> float:
        return max(0.0, (self.until - self.since).total_seconds())

    @property
    def recorded_s(self) -> float:
        """How much of the window the rate points cover: the mean is over this, not the window."""
        return sum(p.span_s for p in self.points)

    def coverage_text(self) -> str:
        """"" when the points cover most of the window, else "the 50 min recorded of it"."""
        recorded = self.recorded_s
        if not self.points or recorded >= MOSTLY_COVERED * self.window_s:
            return ""
        return f"the {_duration(recorded)} recorded of it"

    def window_text(self) -> str:
        """"2026-12-06 10:00–11:00 UTC (60 min)"."""
        start, end = self.since.astimezone(timezone.utc), self.until.astimezone(timezone.utc)
        end_text = end.strftime("%H:%M") if end.date() == start.date() else end.strftime("%Y-%m-%d %H:%M")
        return f"{start:%Y-%m-%d %H:%M}–{end_text} UTC ({_duration(self.window_s)})"

    def batch_text(self) -> str:
        if self.batch_mix:
            mix = ", ".join(f"{size}: {share:.0%}" for size, share in sorted(self.batch_mix.items()))
            return f"batch-size mix {mix} ({self.batch_mix_source or 'source not given'})"
        mean = f" (mean batch size {self.mean_batch_size:.2f})" if self.mean_batch_size is not None else ""
        return f"batch-size mix not recorded{mean}"

    def describe(self) -> str:
        """One line: which load, from which window and source."""
        where = f"{self.window_text()} in {self.source or 'an unnamed source'}"
        if not self.has_traffic:
            return f"{self.model}: no requests recorded over {where}"
        assert self.mean_rate_rps is not None and self.peak_rate_rps is not None
        coverage = self.coverage_text()
        covered = f" ({coverage})" if coverage else ""
        return (f"{self.model}: mean {self.mean_rate_rps:.3g} req/s, peak {self.peak_rate_rps:.3g} req/s "
                f"over {where}{covered}, {self.samples} points; {self.batch_text()}")

    def require_traffic(self) -> RecordedLoad:
        """This load, or NoRecordedLoadError naming how to get one."""
        if not self.has_traffic:
            raise NoRecordedLoadError(
                f"no requests recorded for {self.model} over {self.window_text()} in "
                f"{self.source or 'the history'}: run the sampler (`geadmin up` starts it; "
                "`geadmin sampler` alone) while the model serves, give a longer --since, "
                "or read a Prometheus that scrapes this Triton (--prometheus-url / GEADMIN_PROMETHEUS_URL)")
        return self


def recorded_load(model: str, *, history: HistoryReader, source: str, since: datetime,
                  until: datetime | None = None) -> RecordedLoad:
    """The model's recorded request rate (mean, peak) and mean batch size over [since, until]
    (until None: now) of `source`, read through `history` (WorkspaceHistory or
    PrometheusHistory). No traffic in the window gives mean and peak None (see require_traffic);
    a history that cannot be read raises its own error (PrometheusError, WorkspaceDatabaseError)."""
    if until is None:
        until = datetime.now(timezone.utc)
    series = [s for s in history.model_series(source, since, until, models=[model])
              if _series_model(s.name) == model]
    by_time: dict[datetime, list[float]] = {}  # at -> [rate sum, span, inferences, executions]
    for s in series:
        for i, at in enumerate(s.times):
            rate = _value(s, "requests_per_s", i)
            span = s.spans_s[i] if i < len(s.spans_s) else 0.0
            if rate is None or span <= 0:
                continue
            slot = by_time.setdefault(at, [0.0, 0.0, 0.0, 0.0])
            slot[0] += rate
            slot[1] = max(slot[1], span)
            slot[2] += (_value(s, "inferences_per_s", i) or 0.0) * span
            slot[3] += (_value(s, "executions_per_s", i) or 0.0) * span
    points = tuple(RatePoint(at, slot[1], slot[0]) for at, slot in sorted(by_time.items()))
    label = f"{history.label}, source {source}"
    if not points:
        return RecordedLoad(model, since, until, None, None, source=label, samples=0)
    covered = sum(p.span_s for p in points)
    mean = sum(p.rate_rps * p.span_s for p in points) / covered
    inferences = sum(slot[2] for slot in by_time.values())
    executions = sum(slot[3] for slot in by_time.values())
    mean_batch = inferences / executions if executions > 0 else None
    return RecordedLoad(model, since, until, mean, max(p.rate_rps for p in points), source=label,
                        samples=len(points), mean_batch_size=mean_batch, points=points)


def pick_source(model: str, *, history: HistoryReader) -> str:
    """The most recently sampled source whose history holds `model` (the sampler's sources, or
    Prometheus's targets; a fleet's `fleet:JOB` only when no single server has it)."""
    overviews = history.sources()
    holding = [o.source for o in overviews if model in o.models]
    single = [s for s in holding if not s.startswith("fleet:")]
    if single or holding:
        return (single or holding)[0]
    names = ", ".join(o.source for o in overviews) or "none"
    raise NoRecordedLoadError(
        f"{history.label} holds no history of {model} (sources: {names}): run the sampler "
        "(`geadmin up` starts it) while the model serves, or read a Prometheus that scrapes this "
        "Triton (--prometheus-url / GEADMIN_PROMETHEUS_URL)")


def batch_mix_from_statistics(model_stats: Mapping[str, Any]) -> dict[int, float]:
    """Share of executions per batch size from one model's entry of Triton's statistics API
    (`batch_stats`: `batch_size` and `compute_infer.count`, counted since the model loaded)."""
    counts: dict[int, float] = {}
    for entry in model_stats.get("batch_stats") or ():
        try:
            size = int(entry.get("batch_size", 0))
            count = float((entry.get("compute_infer") or {}).get("count", 0))
        except (TypeError, ValueError, AttributeError):
            continue
        if size > 0 and count > 0:
            counts[size] = counts.get(size, 0.0) + count
    total = sum(counts.values())
    return {size: count / total for size, count in sorted(counts.items())} if total else {}


def with_live_batch_mix(load: RecordedLoad, model_stats: Mapping[str, Any], server: str) -> RecordedLoad:
    """`load` with the batch-size mix Triton's statistics give for the model on `server`
    (counted since the model loaded, not over the load's window: the source says so)."""
    mix = batch_mix_from_statistics(model_stats)
    if not mix:
        return load
    return replace(load, batch_mix=mix,
                   batch_mix_source=f"Triton's statistics on {server}, since the model loaded")


def _series_model(name: str) -> str:
    """Series are named "model" or "model vN" (geadmin.telemetry.history.store)."""
    head, _, tail = name.rpartition(" v")
    return head if head and tail.isdigit() else name


def _value(series: Series, column: str, i: int) -> float | None:
    values = series.values.get(column, ())
    return values[i] if i < len(values) else None


def _duration(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
