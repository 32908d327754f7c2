"""geadmin.ops.bench.compare: the comparison defaults to the two latest runs of one kind and
never pairs a run with itself (runs saved to and listed from a real workspace database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from geadmin.ops.bench.compare import chosen_pair, default_pair, partners
from geadmin.ops.bench.results import CONCURRENCY, REQUEST_RATE, BenchPoint, BenchRun, list_runs, save_run

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)


def point(load: float) -> BenchPoint:
    return BenchPoint(load=load, throughput_per_s=100.0 * load, p50_ms=1.0, p90_ms=2.0, p95_ms=2.5,
                      p99_ms=3.0, avg_ms=1.5, client_send_ms=0.1, client_recv_ms=0.1, network_ms=0.1,
                      queue_ms=0.2, compute_input_ms=0.1, compute_infer_ms=1.0, compute_output_ms=0.1)


def saved(home: Path, *kinds: str) -> list[BenchRun]:
    for minutes, kind in enumerate(kinds):
        save_run(BenchRun("digits_classifier", "http://127.0.0.1:8000", kind, (point(1), point(4)),
                          T0 + timedelta(minutes=minutes)), home)
    return list_runs(home)  # latest first


def test_the_default_is_the_two_latest_runs(tmp_path: Path) -> None:
    runs = saved(tmp_path, CONCURRENCY, CONCURRENCY, CONCURRENCY)
    pair = default_pair(runs)
    assert pair is not None and (pair.a.id, pair.b.id) == (runs[0].id, runs[1].id)
    assert pair.names == (f"A #{runs[0].id}", f"B #{runs[1].id}")


def test_the_default_skips_a_run_of_another_kind(tmp_path: Path) -> None:
    runs = saved(tmp_path, CONCURRENCY, CONCURRENCY, REQUEST_RATE)  # the latest is a request-rate run alone
    pair = default_pair(runs)
    assert pair is not None and pair.a.mode == pair.b.mode == CONCURRENCY
    assert (pair.a.id, pair.b.id) == (runs[1].id, runs[2].id)


def test_nothing_to_compare(tmp_path: Path) -> None:
    assert default_pair(saved(tmp_path, CONCURRENCY)) is None
    assert default_pair(saved(tmp_path / "other", CONCURRENCY, REQUEST_RATE)) is None
    assert chosen_pair([], 1, 2) is None


def test_a_run_is_never_compared_with_itself(tmp_path: Path) -> None:
    runs = saved(tmp_path, CONCURRENCY, CONCURRENCY, CONCURRENCY)
    oldest = runs[-1]
    assert oldest.id not in [r.id for r in partners(runs, oldest)]
    pair = chosen_pair(runs, oldest.id, oldest.id)  # both pickers on one run (e.g. kept from before)
    assert pair is not None and pair.a.id == oldest.id and pair.b.id == runs[0].id != pair.a.id


def test_a_choice_that_still_fits_is_kept_and_a_stale_one_falls_back(tmp_path: Path) -> None:
    runs = saved(tmp_path, CONCURRENCY, CONCURRENCY, CONCURRENCY)
    kept = chosen_pair(runs, runs[2].id, runs[1].id)
    assert kept is not None and (kept.a.id, kept.b.id) == (runs[2].id, runs[1].id)
    stale = chosen_pair(runs, 9999, 9998)  # ids of runs no longer listed
    assert stale is not None and (stale.a.id, stale.b.id) == (runs[0].id, runs[1].id)
