"""The trend and forecast math of geadmin.diagnose.forecast on synthetic series with known
answers: a straight line is found exactly, noise gives the textbook standard error, a flat
series never saturates, and the saturation day and its range follow from the slope's bounds."""

from __future__ import annotations

import math
import random

import pytest

from geadmin.diagnose.forecast import DAY_S, Z, fit_trend, forecast_peak, saturation_forecast, why_no_trend


def days(n: int, step_days: float = 1.0) -> list[float]:
    return [1.7e9 + i * step_days * DAY_S for i in range(n)]


def test_a_straight_line_is_found_exactly_with_no_error() -> None:
    times = days(10)
    trend = fit_trend(times, [100.0 + 5.0 * i for i in range(10)])
    assert trend is not None
    assert trend.slope_per_day == pytest.approx(5.0)
    assert trend.stderr_per_day == pytest.approx(0.0, abs=1e-9)
    assert trend.points == 10 and trend.span_days == pytest.approx(9.0)
    assert not trend.flat


def test_the_standard_error_is_the_textbook_one() -> None:
    # residuals +1, -1, +1, -1 around y = 2x: SSR 4, n-2 = 2, Sxx = 5 -> se = sqrt(4/2/5)
    trend = fit_trend(days(4), [1.0, 1.0, 5.0, 5.0])
    assert trend is not None
    assert trend.slope_per_day == pytest.approx(1.6)
    ssr = sum((y - (0.6 + 1.6 * x)) ** 2 for x, y in zip(range(4), [1.0, 1.0, 5.0, 5.0], strict=True))
    assert trend.stderr_per_day == pytest.approx(math.sqrt(ssr / 2 / 5.0))


def test_noise_around_a_known_slope_keeps_the_slope_inside_its_range() -> None:
    rng = random.Random(7)
    times = days(200, 0.1)
    rates = [50.0 + 3.0 * i * 0.1 + rng.gauss(0, 2.0) for i in range(200)]
    trend = fit_trend(times, rates)
    assert trend is not None
    assert trend.low_per_day < 3.0 < trend.high_per_day
    assert trend.high_per_day - trend.low_per_day == pytest.approx(2 * Z * trend.stderr_per_day)


def test_too_few_points_or_one_instant_give_no_trend() -> None:
    assert fit_trend(days(2), [1.0, 2.0]) is None
    assert fit_trend([5.0, 5.0, 5.0], [1.0, 2.0, 3.0]) is None
    assert fit_trend(days(4), [1.0, float("nan"), 2.0, float("inf")]) is None


def test_a_flat_noisy_series_never_saturates_and_says_not_within_the_horizon() -> None:
    rng = random.Random(3)
    trend = fit_trend(days(50), [80.0 + rng.gauss(0, 5.0) for _ in range(50)])
    assert trend is not None and trend.flat
    forecast = saturation_forecast(trend, 90.0, 200.0, 30.0)
    assert forecast.days is None and not forecast.within_horizon
    assert forecast.describe().startswith("not within 30 days")


def test_the_saturation_day_and_its_range_come_from_the_slope_and_its_bounds() -> None:
    rng = random.Random(11)
    trend = fit_trend(days(60), [100.0 + 2.0 * i + rng.gauss(0, 1.0) for i in range(60)])
    assert trend is not None
    forecast = saturation_forecast(trend, 150.0, 170.0, 30.0)
    assert forecast.days == pytest.approx(20.0 / trend.slope_per_day)
    assert forecast.earliest_days == pytest.approx(20.0 / trend.high_per_day)
    assert forecast.latest_days == pytest.approx(20.0 / trend.low_per_day)
    assert forecast.earliest_days < forecast.days < forecast.latest_days
    assert forecast.within_horizon and forecast.describe().startswith("in 10.")


def test_beyond_the_horizon_is_not_within_it_and_a_peak_over_saturation_is_now() -> None:
    trend = fit_trend(days(10), [10.0 + 0.1 * i for i in range(10)])
    assert trend is not None
    assert saturation_forecast(trend, 10.0, 100.0, 30.0).days is None
    now = saturation_forecast(trend, 120.0, 100.0, 30.0)
    assert now.already and now.within_horizon and now.describe().startswith("saturated now")
    assert saturation_forecast(None, 50.0, 100.0, 30.0).describe() == "not within 30 days at the trend"


def test_the_forecast_peak_grows_with_the_trend_and_never_falls_below_the_recorded_one() -> None:
    up = fit_trend(days(5), [10.0, 12.0, 14.0, 16.0, 18.0])
    down = fit_trend(days(5), [18.0, 16.0, 14.0, 12.0, 10.0])
    assert forecast_peak(up, 20.0, 10.0) == pytest.approx((40.0, 40.0))
    assert forecast_peak(down, 20.0, 10.0) == (20.0, 20.0)
    assert forecast_peak(None, 20.0, 10.0) == (20.0, 20.0)


def test_minutes_of_traffic_give_no_trend_and_say_why() -> None:
    """A load test's ramp over 45 s is not growth per day: no trend, and the reason names the span."""
    times = [1_000_000.0 + i for i in range(45)]
    rates = [float(i) for i in range(45)]
    assert fit_trend(times, rates) is None
    assert why_no_trend(times, rates) == ("the recorded points span 44 s; a trend needs at least 12.0 h of "
                                          "history (a shorter window reads its ups and downs as growth)")
    assert why_no_trend(days(2), [1.0, 2.0]) == "2 recorded point(s); a trend needs at least 3"
    assert why_no_trend(days(4), [1.0, 2.0, 3.0, 4.0]) == ""


def test_a_report_without_a_trend_forecasts_the_recorded_peak_and_says_why() -> None:
    from datetime import datetime, timezone

    from geadmin.diagnose.capacity import assess
    from geadmin.telemetry.alerting.objectives import Objective
    from geadmin.telemetry.history.traffic import RecordedLoad

    now = datetime(2026, 12, 6, tzinfo=timezone.utc)
    load = RecordedLoad("m", now, now, 5.0, 40.0, {}, "the sampler's history", 45)
    found = assess("m", Objective("m", p99_ms=50.0, error_budget=0.001), load, None, trend=None,
                   horizon_days=30, min_headroom=1.2, no_trend="the recorded points span 44 s; …")
    assert found.trend.source == "no trend: the recorded points span 44 s; …"
    assert found.forecast_peak.value == 40.0
    assert found.forecast_peak.source == "recorded: the recorded peak, no trend to carry over 30 days"
