"""geadmin.telemetry.history.traffic over a real workspace database: windows derived from
Triton-format pages and written through the store (what the sampler does) give the model's
mean and peak request rate (window-weighted, versions summed, gaps carrying no weight), its mean
batch size, and a description naming the window and the source; the batch-size mix is said to be
unrecorded, never made up; no traffic is a specific error naming the fix."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone
from pathlib import Path

import pytest

from geadmin.errors import NoRecordedLoadError
from geadmin.telemetry.derive import derive
from geadmin.telemetry.history import record as history_record
from geadmin.telemetry.history.reader import WorkspaceHistory
from geadmin.telemetry.history.traffic import (
    RecordedLoad,
    batch_mix_from_statistics,
    pick_source,
    recorded_load,
    with_live_batch_mix,
)
from geadmin.telemetry.sources.scrape import Scrape, parse

SOURCE = "http://127.0.0.1:8002/metrics"
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def triton_page(ts: float, requests: dict[tuple[str, str], int], *, batch: int = 1) -> Scrape:
    """A Triton 2.51 page: `requests[(model, version)]` requests served so far, `batch` per execution."""
    lines = []
    for family, per_request in (("nv_inference_request_success", 1.0), ("nv_inference_count", 1.0),
                                ("nv_inference_exec_count", 1.0 / batch),
                                ("nv_inference_request_duration_us", 2000.0)):
        lines.append(f"# TYPE {family} counter")
        lines += [f'{family}{{model="{m}",version="{v}"}} {n * per_request:g}'
                  for (m, v), n in requests.items()]
    lines.append("# TYPE nv_inference_request_failure counter")
    lines += [f'nv_inference_request_failure{{model="{m}",reason="BACKEND",version="{v}"}} 0'
              for m, v in requests]
    lines += ["# TYPE nv_cpu_utilization gauge", "nv_cpu_utilization 0.5"]
    return parse("\n".join(lines) + "\n", timestamp_s=ts)


def record(home: Path, pages: list[Scrape]) -> None:
    for before, after in itertools.pairwise(pages):
        history_record.record_window(derive(before, after), SOURCE, home=home)


def at(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, timezone.utc)


def test_mean_and_peak_rate_are_window_weighted_over_the_recorded_windows(tmp_path: Path) -> None:
    # 10 s at 5 req/s (two 5 s windows), then one 10 s window at 20 req/s, batches of 4
    counts = [0, 25, 50, 250]
    times = [T0, T0 + 5, T0 + 10, T0 + 20]
    record(tmp_path, [triton_page(t, {("m", "1"): n, ("other", "1"): 1000 * i}, batch=4)
                      for i, (t, n) in enumerate(zip(times, counts, strict=True))])
    load = recorded_load("m", history=WorkspaceHistory(tmp_path), source=SOURCE, since=at(T0 - 1),
                         until=at(T0 + 30))
    assert load.samples == 3
    assert load.mean_rate_rps == pytest.approx(250 / 20)  # not the plain mean of 5, 5, 20
    assert load.peak_rate_rps == pytest.approx(20.0)
    assert load.mean_batch_size == pytest.approx(4.0)
    assert load.batch_mix == {}
    assert [p.rate_rps for p in load.points] == pytest.approx([5.0, 5.0, 20.0])
    text = load.describe()
    assert "mean 12.5 req/s, peak 20 req/s" in text
    assert "2023-11-14 22:13–22:13 UTC (31 s)" in text
    assert str(tmp_path / "geadmin.db") in text and SOURCE in text
    assert "batch-size mix not recorded (mean batch size 4.00)" in text


def test_versions_of_one_model_are_summed_and_the_window_bounds_hold(tmp_path: Path) -> None:
    pages = [triton_page(T0 + 2 * i, {("m", "1"): 6 * i, ("m", "2"): 4 * i}) for i in range(6)]
    record(tmp_path, pages)
    history = WorkspaceHistory(tmp_path)
    load = recorded_load("m", history=history, source=SOURCE, since=at(T0), until=at(T0 + 10))
    assert load.peak_rate_rps == pytest.approx(5.0)  # 3 + 2 req/s at every point
    assert load.mean_rate_rps == pytest.approx(5.0)
    later = recorded_load("m", history=history, source=SOURCE, since=at(T0 + 7), until=at(T0 + 10))
    assert later.samples == 2  # the windows ending at +8 and +10


def test_a_restart_gap_carries_no_weight(tmp_path: Path) -> None:
    pages = [triton_page(T0, {("m", "1"): 0}), triton_page(T0 + 2, {("m", "1"): 20}),
             triton_page(T0 + 4, {("m", "1"): 2}),  # counters reset: Triton restarted
             triton_page(T0 + 6, {("m", "1"): 22})]
    record(tmp_path, pages)
    load = recorded_load("m", history=WorkspaceHistory(tmp_path), source=SOURCE, since=at(T0),
                         until=at(T0 + 7))
    assert load.samples == 2
    assert load.mean_rate_rps == pytest.approx(10.0)
    assert load.peak_rate_rps == pytest.approx(10.0)


def test_no_traffic_in_the_window_is_no_figure_and_a_specific_error(tmp_path: Path) -> None:
    record(tmp_path, [triton_page(T0 + 2 * i, {("m", "1"): 10 * i}) for i in range(3)])
    load = recorded_load("m", history=WorkspaceHistory(tmp_path), source=SOURCE, since=at(T0 + 100),
                         until=at(T0 + 200))
    assert (load.mean_rate_rps, load.peak_rate_rps, load.samples) == (None, None, 0)
    assert "no requests recorded" in load.describe()
    with pytest.raises(NoRecordedLoadError, match=r"run the sampler.*--prometheus-url"):
        load.require_traffic()


def test_pick_source_finds_the_source_holding_the_model_or_names_the_fix(tmp_path: Path) -> None:
    record(tmp_path, [triton_page(T0 + 2 * i, {("m", "1"): 10 * i}) for i in range(3)])
    history = WorkspaceHistory(tmp_path)
    assert pick_source("m", history=history) == SOURCE
    with pytest.raises(NoRecordedLoadError, match=rf"no history of absent .*{SOURCE}.*run the sampler"):
        pick_source("absent", history=history)


def test_the_batch_mix_comes_only_from_triton_statistics_and_says_so() -> None:
    stats = {"name": "m", "batch_stats": [
        {"batch_size": 1, "compute_infer": {"count": 30, "ns": 1}},
        {"batch_size": 4, "compute_infer": {"count": 10, "ns": 1}},
        {"batch_size": "bad", "compute_infer": {"count": 5}}]}
    assert batch_mix_from_statistics(stats) == {1: 0.75, 4: 0.25}
    assert batch_mix_from_statistics({"batch_stats": []}) == {}
    load = RecordedLoad("m", at(T0), at(T0 + 60), 2.0, 3.0, source="s", samples=4)
    mixed = with_live_batch_mix(load, stats, "http://127.0.0.1:8000")
    assert "batch-size mix 1: 75%, 4: 25% (Triton's statistics on http://127.0.0.1:8000, since the model " \
           "loaded)" in mixed.describe()
    assert with_live_batch_mix(load, {}, "x") is load


def test_a_mean_over_part_of_the_window_names_the_time_it_was_recorded_over(tmp_path: Path) -> None:
    """The sampler ran 20 s of an hour: the mean is over those 20 s, and the words say so."""
    record(tmp_path, [triton_page(T0 + 10 * i, {("m", "1"): 100 * i}) for i in range(3)])
    history = WorkspaceHistory(tmp_path)
    hour = recorded_load("m", history=history, source=SOURCE, since=at(T0 - 3580), until=at(T0 + 20))
    assert hour.mean_rate_rps == pytest.approx(10.0) and hour.recorded_s == pytest.approx(20.0)
    assert "mean 10 req/s, peak 10 req/s over 2023-11-14 21:13–22:13 UTC (60 min) in " in hour.describe()
    assert "(the 20 s recorded of it), 2 points" in hour.describe()
    covered = recorded_load("m", history=history, source=SOURCE, since=at(T0), until=at(T0 + 21))
    assert covered.coverage_text() == "" and "recorded of it" not in covered.describe()
