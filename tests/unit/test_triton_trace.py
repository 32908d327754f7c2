"""Arrivals from Triton's trace files (tests/unit/assets/triton-trace, in Triton 2.51's
TIMESTAMPS format) and the captures stored in the workspace database."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.errors import InvalidArgumentError, TraceFileError
from geadmin.telemetry.history.arrivals import latest_capture, record_capture
from geadmin.telemetry.sources.triton_trace import read_arrivals, trace_files

TRACES = Path(__file__).parent / "assets" / "triton-trace"


def test_only_the_models_request_starts_are_taken_across_files() -> None:
    arrivals = read_arrivals([TRACES / "two_models.json", TRACES / "more.json"], "text_normalize")
    assert arrivals.starts_ns == (1_000_000_000, 1_002_000_000, 1_005_500_400)
    assert arrivals.intervals_us() == [2000, 3500]
    assert not arrivals.truncated


def test_the_other_model_is_read_alone() -> None:
    arrivals = read_arrivals([TRACES / "two_models.json"], "other_model")
    assert arrivals.starts_ns == (1_000_500_000,)
    assert arrivals.intervals_us() == []


def test_the_bound_keeps_the_earliest_arrivals() -> None:
    arrivals = read_arrivals([TRACES / "two_models.json", TRACES / "more.json"], "text_normalize",
                             max_arrivals=2)
    assert arrivals.starts_ns == (1_000_000_000, 1_002_000_000)
    assert arrivals.truncated


@pytest.mark.parametrize(("name", "says"), [("truncated.json", "cut short"),
                                            ("not_array.json", "not the array")])
def test_malformed_trace_files_are_a_clear_error(name: str, says: str) -> None:
    with pytest.raises(TraceFileError, match=says):
        read_arrivals([TRACES / name], "text_normalize")


def test_a_file_over_the_size_bound_is_refused() -> None:
    with pytest.raises(TraceFileError, match="over the bound"):
        read_arrivals([TRACES / "two_models.json"], "text_normalize", max_file_bytes=100)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="cannot be read here"):
        read_arrivals([tmp_path / "trace.json.0"], "text_normalize")


def test_numbered_files_are_listed_in_number_order(tmp_path: Path) -> None:
    for name in ("trace.json.10", "trace.json.2", "trace.json.x", "other.json.1"):
        (tmp_path / name).write_text("[]")
    assert [p.name for p in trace_files(tmp_path / "trace.json")] == ["trace.json.2", "trace.json.10"]
    assert trace_files(tmp_path / "absent" / "trace.json") == []


def test_captures_are_stored_and_the_newest_in_the_window_read_back(tmp_path: Path) -> None:
    record_capture(home=tmp_path, server="http://127.0.0.1:8000", model="m", window_start_s=100.0,
                   window_end_s=130.0, intervals_us=[1000, 2000])
    record_capture(home=tmp_path, server="http://127.0.0.1:8000", model="m", window_start_s=200.0,
                   window_end_s=230.0, intervals_us=[500, 700, 900])
    newest = latest_capture("m", home=tmp_path, since_s=150.0)
    assert newest is not None
    assert (newest.count, newest.intervals_us) == (4, (500, 700, 900))
    assert "4 recorded arrivals" in newest.describe() and "127.0.0.1:8000" in newest.describe()
    assert latest_capture("m", home=tmp_path, since_s=231.0) is None
    assert latest_capture("other", home=tmp_path) is None


def test_bad_intervals_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        record_capture(home=tmp_path, server="s", model="m", window_start_s=1.0, window_end_s=2.0,
                       intervals_us=[10, 0])
    assert latest_capture("m", home=tmp_path) is None
