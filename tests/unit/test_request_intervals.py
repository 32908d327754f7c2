"""perf_analyzer replays recorded inter-arrival intervals (--request-intervals) instead of a
rate range when the load test names a file of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.errors import BenchSettingsError
from geadmin.ops.bench.intervals import replay_rate_rps, scaled_intervals, write_request_intervals
from geadmin.ops.bench.load_test import BenchSettings, perf_argv


def test_the_file_holds_one_interval_in_microseconds_per_line(tmp_path: Path) -> None:
    path = write_request_intervals(tmp_path / "intervals.txt", [2000, 3500, 1])
    assert path.read_text() == "2000\n3500\n1\n"
    assert not list(tmp_path.glob("*.partial"))


def test_a_curve_step_divides_every_interval(tmp_path: Path) -> None:
    assert scaled_intervals([3000, 1500, 2], 3.0) == [1000, 500, 1]
    assert replay_rate_rps([2000, 2000]) == pytest.approx(500.0)


@pytest.mark.parametrize(("intervals", "speedup"), [([], 1.0), ([10, 0], 1.0), ([10], 0.0), ([10], 1000.0)])
def test_bad_replays_are_refused_and_no_file_written(tmp_path: Path, intervals: list[int],
                                                      speedup: float) -> None:
    with pytest.raises(BenchSettingsError):
        write_request_intervals(tmp_path / "intervals.txt", intervals, speedup)
    assert not list(tmp_path.iterdir())


def test_perf_analyzer_replays_the_file_instead_of_the_rate_range(tmp_path: Path) -> None:
    intervals = write_request_intervals(tmp_path / "intervals.txt", [2000, 3000])
    settings = BenchSettings("m", "http://127.0.0.1:8000", mode="request_rate", loads=(400.0,),
                             request_intervals=intervals)
    argv = perf_argv(settings, Path("pa"), (400.0,), input_path=None, csv_path=tmp_path / "r.csv",
                     batch_size=1)
    assert argv[argv.index("--request-intervals") + 1] == str(intervals)
    assert "--request-rate-range" not in argv and "--concurrency-range" not in argv
    plain = perf_argv(BenchSettings("m", "http://127.0.0.1:8000", mode="request_rate", loads=(400.0,)),
                      Path("pa"), (400.0,), input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)
    assert "--request-intervals" not in plain and "--request-rate-range" in plain


def test_intervals_replay_one_request_rate_load_only(tmp_path: Path) -> None:
    with pytest.raises(BenchSettingsError, match="one request-rate load"):
        BenchSettings("m", "http://127.0.0.1:8000", mode="concurrency", request_intervals=tmp_path / "i")
    with pytest.raises(BenchSettingsError, match="one request-rate load"):
        BenchSettings("m", "http://127.0.0.1:8000", mode="request_rate", loads=(1.0, 2.0),
                      request_intervals=tmp_path / "i")
