"""geadmin.telemetry.history.record and .store over a real workspace database (SQLite in a
temporary home): windows derived from Triton-format pages are written and read back as series; gaps (Triton
down, counters reset by a restart, holes) are None points, never spikes; prune downsamples
beyond 1 h into 1-minute buckets and deletes beyond the retention; audit rows become change
markers."""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import audit, db
from geadmin.audit import Actor, Origin, Result
from geadmin.telemetry.derive import derive
from geadmin.telemetry.history import record
from geadmin.telemetry.history import store as history
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.scrape import Scrape, parse

SOURCE = "http://127.0.0.1:8002/metrics"
T0 = 1_700_000_000.0  # a fixed epoch second in the past: 2023-11-14


def page(ts: float, counts: dict[str, int], *, failures: int = 0, cpu: float = 0.5) -> Scrape:
    """A Triton 2.51 page: each model has served `counts[m]` requests of 2 ms (1 ms queued)."""
    lines = []
    families = (("nv_inference_request_success", 1), ("nv_inference_count", 1),
                ("nv_inference_exec_count", 1), ("nv_inference_request_duration_us", 2000),
                ("nv_inference_queue_duration_us", 1000), ("nv_inference_compute_infer_duration_us", 800))
    for family, per_request in families:
        lines.append(f"# TYPE {family} counter")
        lines += [f'{family}{{model="{m}",version="1"}} {n * per_request}' for m, n in counts.items()]
    lines.append("# TYPE nv_inference_request_failure counter")
    lines += [f'nv_inference_request_failure{{model="{m}",reason="BACKEND",version="1"}} {failures}'
              for m in counts]
    lines.append("# TYPE nv_inference_pending_request_count gauge")
    lines += [f'nv_inference_pending_request_count{{model="{m}",version="1"}} 3' for m in counts]
    lines.append("# TYPE nv_inference_request_summary_us summary")
    for m in counts:
        lines += [f'nv_inference_request_summary_us{{model="{m}",quantile="{q}",version="1"}} {v}'
                  for q, v in (("0.5", 1900), ("0.9", 2500), ("0.99", 4000))]
        lines += [f'nv_inference_request_summary_us_count{{model="{m}",version="1"}} {counts[m]}',
                  f'nv_inference_request_summary_us_sum{{model="{m}",version="1"}} {counts[m] * 2000}']
    lines += ["# TYPE nv_cpu_utilization gauge", f"nv_cpu_utilization {cpu}",
              "# TYPE nv_cpu_memory_total_bytes gauge", "nv_cpu_memory_total_bytes 8000000000",
              "# TYPE nv_cpu_memory_used_bytes gauge", "nv_cpu_memory_used_bytes 2000000000"]
    return parse("\n".join(lines) + "\n", timestamp_s=ts)


def record_run(home: Path, pages: list[Scrape], devices: tuple[NpuDevice, ...] = ()) -> None:
    """What the sampler does: one window per consecutive pair of pages."""
    for before, after in itertools.pairwise(pages):
        record.record_window(derive(before, after), SOURCE, devices, home=home)


def at(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, timezone.utc)


def one(series: list[history.Series]) -> history.Series:
    assert len(series) == 1, [s.name for s in series]
    return series[0]


def steady(start: float, steps: int, *, rate: int = 10, interval_s: float = 2.0,
           count0: int = 0) -> list[Scrape]:
    return [page(start + i * interval_s, {"m": count0 + int(rate * interval_s) * i}) for i in range(steps)]


def test_windows_are_written_and_read_back_per_model(tmp_path: Path) -> None:
    pages = [page(T0 + 2 * i, {"a": 20 * i, "b": 4 * i}, failures=i) for i in range(4)]
    record_run(tmp_path, pages, devices=(NpuDevice(id=3, source="triton", aicore_util_pct=42.0,
                                                   hbm_used_bytes=1 << 30, hbm_total_bytes=32 << 30),))

    a, b = history.model_series(SOURCE, at(T0 - 60), home=tmp_path)
    assert (a.name, b.name) == ("a", "b")
    assert a.column("inferences_per_s") == (10.0, 10.0, 10.0)  # 20 per 2 s window
    assert b.column("inferences_per_s") == (2.0, 2.0, 2.0)
    assert a.column("avg_request_ms") == (2.0, 2.0, 2.0)
    assert a.column("avg_queue_ms") == (1.0, 1.0, 1.0)
    assert a.column("avg_compute_infer_ms") == (0.8, 0.8, 0.8)
    assert a.column("p99_ms") == (4.0, 4.0, 4.0)
    assert a.column("pending_requests") == (3.0, 3.0, 3.0)
    assert a.column("failures_per_s") == (0.5, 0.5, 0.5)
    assert a.failures_by_reason == ({"BACKEND": 1.0},) * 3
    assert [t.timestamp() for t in a.times] == [T0 + 2, T0 + 4, T0 + 6]
    assert not a.has("avg_compute_input_ms")  # Triton published no such counter here: None, not 0

    server = history.server_series(SOURCE, at(T0 - 60), home=tmp_path)
    assert server.column("cpu_utilization_pct") == (50.0, 50.0, 50.0)
    (device,) = history.npu_series(SOURCE, at(T0 - 60), home=tmp_path)
    assert device.name == "NPU 3" and device.column("aicore_util_pct") == (42.0, 42.0, 42.0)
    assert device.column("hbm_total_bytes")[0] == 32 << 30

    assert history.model_series(SOURCE, at(T0 - 60), models=["b"], home=tmp_path)[0].name == "b"
    assert history.model_series(SOURCE, at(T0 + 5), home=tmp_path)[0].points == 1  # only t0+6 is in range
    assert history.model_series("http://elsewhere/metrics", at(T0 - 60), home=tmp_path) == []
    (overview,) = history.sources(home=tmp_path)
    assert overview.source == SOURCE and overview.models == ("a", "b")
    assert overview.last_at == at(T0 + 6)


def test_npu_sources_are_the_sources_with_device_rows_the_latest_first(tmp_path: Path) -> None:
    assert history.npu_sources(home=tmp_path) == []
    device = (NpuDevice(id=0, source="triton", aicore_util_pct=5.0),)
    older, newer, bare = "http://older/metrics", "http://newer/metrics", "http://no-npu/metrics"
    for source, start, devices in ((older, T0, device), (newer, T0 + 10, device), (bare, T0 + 20, ())):
        first, second = steady(start, 2)
        record.record_window(derive(first, second), source, devices, home=tmp_path)
    assert history.npu_sources(home=tmp_path) == [newer, older]  # `bare` has model rows only


def test_a_triton_restart_between_two_samples_is_a_gap_never_a_spike(tmp_path: Path) -> None:
    """Counters fall from 60 to 2 (Triton restarted and served 2 requests): derive flags the
    reset; the history stores a gap there, and the next window counts from the new baseline."""
    pages = [*steady(T0, 4), page(T0 + 8, {"m": 2}), page(T0 + 10, {"m": 22}), page(T0 + 12, {"m": 42})]
    record_run(tmp_path, pages)

    series = one(history.model_series(SOURCE, at(T0 - 60), home=tmp_path))
    rates = series.column("inferences_per_s")
    assert rates == (10.0, 10.0, 10.0, None, 10.0, 10.0)
    assert series.times[3] == at(T0 + 8)  # the gap sits where the restart was seen


def test_triton_down_is_a_gap_between_the_points_around_it(tmp_path: Path) -> None:
    record_run(tmp_path, steady(T0, 3))
    record.record_gap(SOURCE, T0 + 5, "nothing answers", home=tmp_path)
    record.record_gap(SOURCE, T0 + 7, "nothing answers", home=tmp_path)
    # back: the sampler's first answer is a new baseline, the next one a window
    record_run(tmp_path, [page(T0 + 9, {"m": 0}), page(T0 + 11, {"m": 20})])

    series = one(history.model_series(SOURCE, at(T0 - 60), home=tmp_path))
    assert series.column("inferences_per_s") == (10.0, 10.0, None, 10.0)
    assert series.times[2] == at(T0 + 5)  # one break, at the first gap
    server = history.server_series(SOURCE, at(T0 - 60), home=tmp_path)
    assert server.column("cpu_utilization_pct") == (50.0, 50.0, None, 50.0)


def test_a_hole_without_any_gap_row_still_breaks_the_line(tmp_path: Path) -> None:
    """The sampler was not running at all (nobody recorded a gap): the time between one
    window's end and the next one's start shows it."""
    record_run(tmp_path, steady(T0, 3))
    record_run(tmp_path, steady(T0 + 600, 3))
    series = one(history.model_series(SOURCE, at(T0 - 60), home=tmp_path))
    assert series.column("inferences_per_s") == (10.0, 10.0, None, 10.0, 10.0)
    assert T0 + 4 < series.times[2].timestamp() < T0 + 602


def test_prune_deletes_what_is_older_than_the_retention(tmp_path: Path) -> None:
    now = T0 + 30 * 3600
    record_run(tmp_path, steady(T0, 3))  # 30 h old
    record_run(tmp_path, steady(now - 10, 3))  # fresh
    record.prune(retention_h=24, now_s=now, home=tmp_path)
    series = one(history.model_series(SOURCE, at(T0 - 60), home=tmp_path))
    assert [t.timestamp() for t in series.times] == [now - 8, now - 6]
    record.prune(retention_h=0.001, now_s=now + 10, home=tmp_path)  # 3.6 s
    assert history.model_series(SOURCE, at(T0 - 60), home=tmp_path) == []
    assert history.server_series(SOURCE, at(T0 - 60), home=tmp_path).times == ()


def test_prune_downsamples_beyond_an_hour_into_minute_buckets(tmp_path: Path) -> None:
    now = T0 + 7200  # two hours of 2 s samples: 10/s for the first 30 min, then 30/s
    first = steady(T0, 901)
    second = steady(T0 + 1800, 2701, rate=30, count0=int(first[-1].value("nv_inference_count") or 0))
    record_run(tmp_path, first)
    record_run(tmp_path, second)
    record.record_gap(SOURCE, T0 + 3000.5, "nothing answers", home=tmp_path)  # an outage, 50 min in
    removed = record.prune(retention_h=24, now_s=now, home=tmp_path)
    assert removed > 0

    with sqlite3.connect(db.db_path(tmp_path)) as conn:
        old = conn.execute("SELECT COUNT(*), MAX(at) FROM telemetry_model WHERE resolution_s = 60").fetchone()
        raw = conn.execute("SELECT COUNT(*), MIN(at) FROM telemetry_model WHERE resolution_s = 0").fetchone()
    assert old[0] == 60  # T0 is 20 s into a minute: windows ending T0+2 ... T0+3578 fill 60 buckets
    assert raw[1] >= now - 3600 - 60 and raw[0] >= 1700  # the last hour stays at full resolution
    series = one(history.model_series(SOURCE, at(T0 - 60), home=tmp_path))
    rates = series.column("inferences_per_s")
    assert set(rates[:14]) == {10.0}  # 1-minute buckets of the first half hour
    assert 30.0 in rates[31:45]
    assert all(10.0 <= r <= 30.0 for r in rates if r is not None)  # a blend at the change, never a spike
    gap = series.times[rates.index(None)]
    assert T0 + 2940 <= gap.timestamp() <= T0 + 3060  # the outage survives downsampling as a gap
    again = record.prune(retention_h=24, now_s=now, home=tmp_path)
    assert again == 0  # idempotent: buckets are not downsampled twice
    assert history.model_series(SOURCE, at(T0 - 60), home=tmp_path) == [series]


def test_audit_rows_become_change_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    since = datetime.now(timezone.utc) - timedelta(minutes=5)
    audit.record_action("load", "digits", True, "loaded 'digits'", server="http://x", home=tmp_path,
                        actor=Actor("ann", Origin.DASHBOARD))
    audit.record("apply", "digits", Result.ROLLED_BACK, message="KIND_GPU\nrestored", home=tmp_path,
                 actor=Actor("bob", Origin.CLI))
    audit.record_action("restart", "tritonserver", False, "killed by SIGKILL", server="http://x",
                        home=tmp_path, actor=Actor("geadmin", Origin.LOCAL))
    audit.record("bundle", "", Result.OK, home=tmp_path)  # not a change to the serving
    markers = history.change_markers(since, home=tmp_path)
    assert [m.action for m in markers] == ["load", "apply", "restart"]  # oldest first
    assert markers[0].label == "load digits — ann: loaded 'digits'"
    assert markers[1].label == "apply digits (rolled_back) — bob: KIND_GPU"
    assert markers[2].label.startswith("restart Triton (failed) — geadmin: killed by SIGKILL")
    assert history.change_markers(datetime.now(timezone.utc) + timedelta(minutes=1), home=tmp_path) == []


def test_a_history_nobody_records_any_more_is_said_stale_after_five_missed_samples_or_a_minute() -> None:
    """The Metrics page kept drawing a stopped sampler's last hour as if live (only its latest
    sample time, in a caption, told)."""
    now = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
    seen = history.Overview("http://127.0.0.1:8002/metrics", now - timedelta(hours=1),
                            now - timedelta(seconds=50), ("m",))
    assert history.silence(seen, now, 2.0) == ""  # within a minute
    assert history.silence(seen, now, 30.0) == ""  # within 5 samples of 30 s
    gone = replace(seen, last_at=now - timedelta(minutes=7))
    assert history.silence(gone, now, 2.0) == (
        "no sample since 11:53:00 UTC (7 min ago): nothing records this history now (the sampler stops "
        "with `geadmin up`; for another Triton run `geadmin sampler`) — the charts end there, and are not "
        "live")
    assert history.silence(replace(seen, last_at=None), now, 2.0) == ""
