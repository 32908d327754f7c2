"""Capacity from objectives: per model, how far the recorded load is from the rate at which
the model stops meeting its objective, how fast the load grows, and what the forecast peak
needs; per NPU, the memory left. Reads only: the figures are assembled here from what was
measured (geadmin.ops.capacity) and recorded (geadmin.telemetry.history.traffic).

Every figure carries where it came from (`Figure.source`):
- "measured now (...)"          a sweep of this run, on a trial copy;
- "measured at T (...)"         a saved sweep, or the tuner's curve, and when;
- "recorded (window, source)"   the history's request rate (SQLite or Prometheus);
- "forecast (...)"              the least-squares trend (geadmin.diagnose.forecast) carried on.

Definitions:
- saturation rate: the highest request rate a measured step held with p99 <= the objective's
  p99, the errors within the objective's error budget and the throughput keeping up with the
  offered rate (geadmin.ops.capacity.sweep);
- headroom: saturation rate / recorded peak rate (2.0: the peak can double);
- needs at the forecast peak: instances at the measured rate per instance (saturation /
  the instances measured), NPUs from the HBM one instance holds on a device that holds only
  this model, replicas of today's server at today's saturation rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from geadmin.diagnose.forecast import SaturationForecast, Trend, forecast_peak, saturation_forecast
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad

MEASURED_NOW = "measured now"
RECORDED = "recorded"
FORECAST = "forecast"
SET_OBJECTIVE = "geadmin objectives set {model} --p99-ms 50 --error-budget 0.1%"
NO_OBJECTIVE = "no objective"  # the source of every figure of a model without a p99 objective


@dataclass(frozen=True)
class Figure:
    """One number and where it came from."""

    value: float | None
    unit: str
    source: str

    def text(self, digits: int = 3) -> str:
        if self.value is None:
            return f"unknown ({self.source})"
        return f"{self.value:.{digits}g} {self.unit} ({self.source})".replace(" ()", "")


@dataclass(frozen=True)
class SweepStep:
    """One measured step of a sweep: the offered rate and what the model did under it."""

    rate_rps: float
    throughput_rps: float | None
    p99_ms: float | None
    error_ratio: float | None
    ok: bool  # held the objective at this rate
    why: str = ""  # why not, when not ok


@dataclass(frozen=True)
class Saturation:
    """The measured saturation rate of one config, and how it was measured."""

    model: str
    rate_rps: float | None  # None: not even the lowest rate held the objective
    instances: int
    p99_objective_ms: float
    source: str  # "measured now (...)" or "measured at T (...)"
    measured_at: str  # UTC, ISO
    curve: tuple[SweepStep, ...] = ()
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Saturation:
        curve = tuple(SweepStep(**p) for p in data.get("curve", ()))
        return cls(**{**data, "curve": curve})


@dataclass(frozen=True)
class DeviceMemory:
    """What one NPU's HBM tells about the model: bytes held per instance, on a device that
    holds only this model."""

    device: int
    per_instance_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class Needs:
    instances: Figure
    npus: Figure
    replicas: Figure


@dataclass(frozen=True)
class ModelCapacity:
    model: str
    objective: str  # the objective in words, or how to set one
    saturation: Figure
    peak: Figure
    mean: Figure
    headroom: Figure
    trend: Figure  # slope, requests/s per day
    trend_stderr: float | None
    saturates: str  # the forecast in words
    forecast_peak: Figure
    needs: Needs | None
    short: str = ""  # why this model needs attention ("" when it does not)
    notes: tuple[str, ...] = ()

    @property
    def without_objective(self) -> bool:
        """No p99 objective: no figure can be judged, only the way to set one is said."""
        return self.saturation.source == NO_OBJECTIVE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NpuHeadroom:
    device: int
    used_bytes: int | None
    total_bytes: int | None
    models: str
    source: str

    @property
    def free_ratio(self) -> float | None:
        if self.used_bytes is None or not self.total_bytes:
            return None
        return max(0.0, 1.0 - self.used_bytes / self.total_bytes)


@dataclass(frozen=True)
class CapacityReport:
    server: str
    horizon_days: float
    min_headroom: float
    models: tuple[ModelCapacity, ...]
    npus: tuple[NpuHeadroom, ...] = ()
    npu_source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def short(self) -> tuple[ModelCapacity, ...]:
        return tuple(m for m in self.models if m.short)

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "horizon_days": self.horizon_days, "min_headroom": self.min_headroom,
                "models": [m.to_json() for m in self.models],
                "npus": [asdict(n) | {"free_ratio": n.free_ratio} for n in self.npus],
                "npu_source": self.npu_source, "notes": list(self.notes)}


def recorded_source(load: RecordedLoad) -> str:
    coverage = load.coverage_text()
    return f"{RECORDED}, {load.window_text()}" + (f" ({coverage})" if coverage else "") + f", {load.source}"


def assess(model: str, objective: Objective | None, load: RecordedLoad | None, saturation: Saturation | None,
           *, trend: Trend | None, horizon_days: float, min_headroom: float,
           memory: DeviceMemory | None = None, npus_here: int = 0,
           no_trend: str = "fewer than 3 recorded points") -> ModelCapacity:
    """One model's capacity from what was measured and recorded (module docstring); `no_trend`
    says why there is no `trend` (`geadmin.diagnose.forecast.why_no_trend`)."""
    if objective is None or objective.p99_ms is None:
        unknown = Figure(None, "", NO_OBJECTIVE)
        return ModelCapacity(model, f"no p99 objective: set one with `{SET_OBJECTIVE.format(model=model)}`",
                             unknown, unknown, unknown, unknown, unknown, None, "", unknown, None)
    notes: list[str] = []
    sat = _saturation_figure(saturation, notes)
    peak, mean = _recorded(load)
    headroom = Figure(None, "x", "needs a saturation rate and a recorded peak")
    if sat.value is not None and peak.value:
        headroom = Figure(sat.value / peak.value, "x", "saturation rate / recorded peak")
    trend_figure = Figure(trend.slope_per_day if trend else None, "req/s per day",
                          f"{FORECAST}: {trend.describe()}" if trend
                          else f"no trend: {no_trend}")
    saturates = ""
    forecast: SaturationForecast | None = None
    central, upper = forecast_peak(trend, peak.value or 0.0, horizon_days)
    if trend is None:
        ahead = f"{RECORDED}: the recorded peak, no trend to carry over {horizon_days:g} days"
    elif trend.flat:  # as saturation_forecast reads it: no growth shown, the upper bound said
        ahead = f"{RECORDED}: the recorded peak, the trend shows no growth (upper {upper:.3g} req/s)"
    else:
        ahead = f"{FORECAST}: recorded peak + trend over {horizon_days:g} days (upper {upper:.3g} req/s)"
    peak_ahead = Figure(central if peak.value is not None else None, "req/s", ahead)
    if sat.value is not None and peak.value is not None:
        forecast = saturation_forecast(trend, peak.value, sat.value, horizon_days)
        saturates = forecast.describe()
    needs = _needs(saturation, central, memory, npus_here) if peak.value is not None else None
    short = _short(headroom.value, forecast, min_headroom, sat, peak)
    return ModelCapacity(model, objective.describe(), sat, peak, mean, headroom, trend_figure,
                         trend.stderr_per_day if trend else None, saturates, peak_ahead, needs, short,
                         tuple(notes))


def _saturation_figure(saturation: Saturation | None, notes: list[str]) -> Figure:
    if saturation is None:
        return Figure(None, "req/s", "not measured: `geadmin capacity MODEL --measure` runs a short sweep "
                      "on a trial copy")
    if saturation.rate_rps is None:
        lowest = saturation.curve[0] if saturation.curve else None
        notes.append(f"the lowest rate measured ({lowest.rate_rps:g} req/s) did not hold the objective: "
                     f"{lowest.why}" if lowest else "the sweep measured no step")
        return Figure(0.0, "req/s", saturation.source)
    return Figure(saturation.rate_rps, "req/s", saturation.source)


def _recorded(load: RecordedLoad | None) -> tuple[Figure, Figure]:
    if load is None:
        none = Figure(None, "req/s", "no recorded history read")
        return none, none
    where = recorded_source(load)
    if not load.samples or load.peak_rate_rps is None:
        none = Figure(None, "req/s", f"no requests {where}")
        return none, none
    return Figure(load.peak_rate_rps, "req/s", where), Figure(load.mean_rate_rps, "req/s", where)


def _needs(saturation: Saturation | None, peak_rps: float, memory: DeviceMemory | None,
           npus_here: int) -> Needs | None:
    if saturation is None or not saturation.rate_rps or saturation.instances < 1:
        return None
    per_instance = saturation.rate_rps / saturation.instances
    instances = max(1, math.ceil(peak_rps / per_instance))
    how = f"{FORECAST}: forecast peak / {per_instance:.3g} req/s per instance ({saturation.source})"
    npus = Figure(None, "", "no NPU memory per instance known (a device holding only this model)")
    if memory is not None and memory.per_instance_bytes > 0:
        fit = memory.total_bytes // memory.per_instance_bytes
        if fit >= 1:
            npus = Figure(float(math.ceil(instances / fit)), "NPUs",
                          f"{FORECAST}: {fit} instances fit one NPU "
                          f"({memory.per_instance_bytes / 2**30:.2f} GiB "
                          f"each, {MEASURED_NOW} on NPU {memory.device})")
        else:
            npus = Figure(None, "", f"one instance needs more HBM than NPU {memory.device} has")
    if npus.value is not None and npus_here:
        replicas = Figure(float(math.ceil(npus.value / npus_here)), "replicas",
                          f"{FORECAST}: NPUs needed / {npus_here} NPUs per server")
    else:
        replicas = Figure(float(max(1, math.ceil(peak_rps / saturation.rate_rps))), "replicas",
                          f"{FORECAST}: forecast peak / today's saturation rate per server")
    return Needs(Figure(float(instances), "instances", how), npus, replicas)


def _short(headroom: float | None, forecast: SaturationForecast | None, min_headroom: float, sat: Figure,
           peak: Figure) -> str:
    if sat.value is not None and peak.value is not None and sat.value <= peak.value:
        return "saturated: the recorded peak is at or above the rate that holds the objective"
    if sat.value == 0.0:  # measured, and no rate held: short with no load recorded too
        return "holds its objective at no rate measured (the notes say why the lowest failed)"
    if headroom is not None and headroom < min_headroom:
        return f"headroom {headroom:.2f}x is under {min_headroom:g}x"
    if forecast is not None and forecast.within_horizon:
        return f"forecast to saturate {forecast.describe()}"
    return ""


def npu_headroom(rows: Sequence[tuple[int, int | None, int | None, str]],
                 source: str) -> tuple[NpuHeadroom, ...]:
    """(device, used, total, models) rows -> NpuHeadroom, each with `source`."""
    return tuple(NpuHeadroom(d, used, total, models, f"{MEASURED_NOW} ({source})")
                 for d, used, total, models in rows)
