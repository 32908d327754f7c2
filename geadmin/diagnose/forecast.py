"""The trend of a model's recorded request rate and when, at that trend, it would saturate.

Method (simple on purpose, so an operator can redo it by hand):

1. Trend: an ordinary least-squares line through the recorded rate points (time in days,
   rate in requests/s). The slope's standard error is `sqrt(SSR / (n - 2) / Sxx)` (the
   textbook formula for a straight-line fit); its range is slope +/- `Z` standard errors
   (`Z` = 2, about 95 % for errors that are roughly normal). Fewer than `MIN_POINTS` points,
   or points spanning less than `MIN_SPAN_DAYS`, give no trend: a line through an hour of
   traffic reads the hour's ups and downs (a load test, a morning ramp) as growth per day, and
   carried over a month it forecasts nonsense (`why_no_trend` says which).
2. Growth: the recorded PEAK is assumed to grow at the slope (the peak and the mean move
   together when the shape of a day does not change). The forecast peak after `d` days is
   `peak + slope x d`.
3. Saturation: the peak meets the measured saturation rate after `(saturation - peak) / slope`
   days. The earliest day uses the slope's upper bound, the latest its lower bound; a bound at
   or below zero never saturates ("not within N days"). A slope whose range contains zero is
   flat: growth is not shown by the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POINTS = 3
# Half a day: much of a daily cycle is inside the window, so its ups and downs are not read as
# growth; the sampler keeps 24 h, so a whole day could never be reached there.
MIN_SPAN_DAYS = 0.5
Z = 2.0
DAY_S = 86400.0


@dataclass(frozen=True)
class Trend:
    """A least-squares line through the rate points; rates in requests/s, slopes per day."""

    slope_per_day: float
    stderr_per_day: float
    points: int
    span_days: float  # first to last point

    @property
    def low_per_day(self) -> float:
        return self.slope_per_day - Z * self.stderr_per_day

    @property
    def high_per_day(self) -> float:
        return self.slope_per_day + Z * self.stderr_per_day

    @property
    def flat(self) -> bool:
        """The data do not show growth: the slope's range reaches zero or below."""
        return self.low_per_day <= 0.0 <= self.high_per_day or self.slope_per_day <= 0.0

    def describe(self) -> str:
        return (f"{self.slope_per_day:+.3g} req/s per day (+/- {Z * self.stderr_per_day:.2g}, least squares "
                f"over {self.points} points)")


def _finite(times_s: Sequence[float], rates: Sequence[float]) -> list[tuple[float, float]]:
    """(day, rate) of the points with a finite time and rate."""
    return [(t / DAY_S, r) for t, r in zip(times_s, rates, strict=True)
            if t is not None and r is not None and math.isfinite(t) and math.isfinite(r)]


def why_no_trend(times_s: Sequence[float], rates: Sequence[float]) -> str:
    """Why `fit_trend` gives no trend for these points ("" when it gives one)."""
    pairs = _finite(times_s, rates)
    if len(pairs) < MIN_POINTS:
        return f"{len(pairs)} recorded point(s); a trend needs at least {MIN_POINTS}"
    span_days = max(t for t, _ in pairs) - min(t for t, _ in pairs)
    if span_days < MIN_SPAN_DAYS:
        return (f"the recorded points span {_span_text(span_days)}; a trend needs at least "
                f"{_span_text(MIN_SPAN_DAYS)} of history (a shorter window reads its ups and downs as "
                "growth)")
    return ""


def _span_text(days: float) -> str:
    seconds = days * DAY_S
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fit_trend(times_s: Sequence[float], rates: Sequence[float]) -> Trend | None:
    """The least-squares trend of `rates` (requests/s) at `times_s` (epoch seconds); None with
    fewer than MIN_POINTS finite points or less than MIN_SPAN_DAYS between the first and last."""
    if why_no_trend(times_s, rates):
        return None
    pairs = _finite(times_s, rates)
    n = len(pairs)
    mean_t = sum(t for t, _ in pairs) / n
    mean_r = sum(r for _, r in pairs) / n
    sxx = sum((t - mean_t) ** 2 for t, _ in pairs)
    if sxx <= 0.0:
        return None
    slope = sum((t - mean_t) * (r - mean_r) for t, r in pairs) / sxx
    intercept = mean_r - slope * mean_t
    ssr = sum((r - (intercept + slope * t)) ** 2 for t, r in pairs)
    stderr = math.sqrt(ssr / (n - 2) / sxx)
    span = max(t for t, _ in pairs) - min(t for t, _ in pairs)
    return Trend(slope, stderr, n, span)


@dataclass(frozen=True)
class SaturationForecast:
    """When the peak meets the saturation rate at the trend; None days: not within the horizon."""

    days: float | None
    earliest_days: float | None
    latest_days: float | None
    horizon_days: float
    already: bool = False  # the recorded peak is at or above the saturation rate now

    @property
    def within_horizon(self) -> bool:
        return self.already or self.days is not None

    def describe(self) -> str:
        if self.already:
            return "saturated now: the recorded peak is at or above the saturation rate"
        if self.days is None:
            if self.earliest_days is not None:
                return (f"not within {self.horizon_days:g} days at the trend (at its upper bound: in "
                        f"{self.earliest_days:.1f} days)")
            return f"not within {self.horizon_days:g} days at the trend"
        latest = f"{self.latest_days:.1f}" if self.latest_days is not None \
            else f"beyond {self.horizon_days:g}"
        earliest = f"{self.earliest_days:.1f}" if self.earliest_days is not None else f"{self.days:.1f}"
        return f"in {self.days:.1f} days ({earliest} to {latest} days)"


def _days_to(gap: float, slope: float, horizon_days: float) -> float | None:
    if slope <= 0.0:
        return None
    days = gap / slope
    return days if days <= horizon_days else None


def saturation_forecast(trend: Trend | None, peak_rps: float, saturation_rps: float,
                        horizon_days: float) -> SaturationForecast:
    """When the recorded peak, growing at `trend`, meets `saturation_rps` (module docstring)."""
    if peak_rps >= saturation_rps:
        return SaturationForecast(0.0, 0.0, 0.0, horizon_days, already=True)
    if trend is None:
        return SaturationForecast(None, None, None, horizon_days)
    gap = saturation_rps - peak_rps
    central = None if trend.flat else _days_to(gap, trend.slope_per_day, horizon_days)
    earliest = _days_to(gap, trend.high_per_day, horizon_days)
    latest = _days_to(gap, trend.low_per_day, horizon_days) if central is not None else None
    return SaturationForecast(central, earliest, latest, horizon_days)


def forecast_peak(trend: Trend | None, peak_rps: float, horizon_days: float) -> tuple[float, float]:
    """(central, upper) forecast peak after `horizon_days`; a flat or falling trend keeps the
    recorded peak as the central figure (capacity is never planned below what was seen)."""
    if trend is None:
        return peak_rps, peak_rps
    central = peak_rps + (0.0 if trend.flat else trend.slope_per_day) * horizon_days
    upper = peak_rps + max(trend.high_per_day, 0.0) * horizon_days
    return central, upper
