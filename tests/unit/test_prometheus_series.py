"""The pure parts of the Prometheus reader: the step grid, a run of empty steps drawn as one
gap, NaN (0/0 in PromQL) as no value, and the scrape interval as the targets API writes it."""

from __future__ import annotations

import math

import pytest

from geadmin.telemetry.history.prometheus import parse_duration
from geadmin.telemetry.history.promql import Grid, series_on_grid


def test_a_run_of_empty_steps_is_one_gap_and_leading_or_trailing_ones_are_none() -> None:
    grid = Grid(start=100.0, end=110.0, step=1.0, window="4s")
    rate = {101.0: 2.0, 102.0: 3.0, 106.0: 1.0, 107.0: math.nan, 108.0: 4.0}
    names = ("inferences_per_s", "avg_request_ms")
    s = series_on_grid("m", {"inferences_per_s": rate}, names, grid, {102.0: {"OTHER": 1}})
    column = s.column("inferences_per_s")
    assert column == (2.0, 3.0, None, 1.0, None, 4.0)  # 103-105: one gap; 107 (NaN): no value
    assert [t.timestamp() for t in s.times] == [101.0, 102.0, 103.0, 106.0, 107.0, 108.0]
    assert s.spans_s == (1.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    assert s.failures_by_reason[1] == {"OTHER": 1} and s.failures_by_reason[2] == {}
    assert s.column("avg_request_ms") == (None,) * 6
    assert s.points == 4


def test_the_grid_counts_its_steps_inclusively() -> None:
    assert Grid(0.0, 10.0, 5.0, "20s").steps() == [0.0, 5.0, 10.0]
    assert Grid(0.0, 9.9, 5.0, "20s").steps() == [0.0, 5.0]


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("1m", 60.0), ("1m30s", 90.0), ("500ms", 0.5),
                                               ("2h", 7200.0), ("", None), (None, None), ("15", None),
                                               ("1x", None), ("s", None)])
def test_scrape_intervals_parse_as_prometheus_writes_them(text: str | None, seconds: float | None) -> None:
    assert parse_duration(text) == seconds
