"""The objective search's rules on values (geadmin.ops.tune.objective): what meets an objective
at a rate, the winner (fewest instances, then least NPU memory; refused when it would not fit
beside the other models), the nearest candidate and what limits it, the plan's refusals (no
objective, no recorded traffic) and the CLI's, and the saturation rate capacity reads back
from a saved run."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import db
from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.errors import NoRecordedLoadError, TuneRefusedError
from geadmin.ops.tune.memory import MemoryGuard
from geadmin.ops.tune.objective import (
    MIN_RATE_RPS,
    ObjectivePlan,
    ObjectiveSearch,
    candidates_for,
    nearest,
    objective_plan,
    pick_winner,
    replay_note,
    shortfall,
)
from geadmin.ops.tune.outcome import Trial
from geadmin.ops.tune.results import saturation_from_tune, save_document
from geadmin.ops.tune.space import Candidate
from geadmin.telemetry.alerting.objectives import Objective, store
from geadmin.telemetry.derive import derive
from geadmin.telemetry.history import record as history_record
from geadmin.telemetry.history.arrivals import record_capture
from geadmin.telemetry.history.reader import WorkspaceHistory
from geadmin.telemetry.history.traffic import RecordedLoad
from geadmin.telemetry.sources.scrape import parse

OBJECTIVE = Objective("m", p99_ms=50.0, error_budget=0.01)
RATE = 20.0
SOURCE = "http://127.0.0.1:8002/metrics"


def trial(instances: int, p99_ms: float, *, served: float = RATE, failed: int = 0, memory: int | None = None,
          batch: int = 0, rate: float = RATE, ok: bool = True, error: str = "") -> Trial:
    return Trial(Candidate(batch, 0, instances), "objective", ok, served if ok else None, p99_ms / 2,
                 p99_ms if ok else None, error=error, rate_rps=rate, requests=200 if ok else 0, failed=failed,
                 memory_bytes=memory)


def test_a_trial_meets_the_objective_only_within_p99_budget_and_rate() -> None:
    assert shortfall(trial(1, 49.0), OBJECTIVE, RATE) == ""
    assert shortfall(trial(1, 51.0), OBJECTIVE, RATE) == "p99 51.0 ms is over the 50 ms objective"
    assert shortfall(trial(1, 10.0, failed=3), OBJECTIVE, RATE) == \
        "3 of 200 requests failed (1.50%), over the error budget of 1.00%"
    assert shortfall(trial(1, 10.0, failed=2), OBJECTIVE, RATE) == ""  # 1 % exactly: within
    no_budget = Objective("m", p99_ms=50.0)
    assert "over the error budget of 0.00%" in shortfall(trial(1, 10.0, failed=1), no_budget, RATE)
    assert shortfall(trial(1, 10.0, served=15.0), OBJECTIVE, RATE) == "it served 15 of the 20 req/s offered"
    late = replace(trial(1, 10.0, served=15.0), sent_late="perf_analyzer sent 30 % of the requests late")
    assert shortfall(late, OBJECTIVE, RATE) == \
        "it served 15 of the 20 req/s offered — perf_analyzer sent 30 % of the requests late"
    assert shortfall(trial(1, 0.0, ok=False, error="no stable measurement"), OBJECTIVE, RATE) == \
        "no stable measurement"


def test_the_winner_has_the_fewest_instances_then_the_least_memory() -> None:
    trials = [trial(1, 80.0), trial(2, 30.0, memory=2000, batch=8), trial(2, 40.0, memory=1000, batch=1),
              trial(3, 5.0, memory=1500)]
    best, notes = pick_winner(trials, OBJECTIVE, RATE)
    assert best is trials[2] and notes == []  # 2 instances, the smaller memory, though its p99 is higher
    at_other_rate = [trial(1, 10.0, rate=RATE * 2)]
    assert pick_winner(at_other_rate, OBJECTIVE, RATE) == (None, [])  # the curve's points never win


def test_a_winner_that_would_not_fit_beside_the_other_models_is_refused_and_said() -> None:
    trials = [trial(1, 20.0, memory=4000), trial(2, 10.0, memory=8000)]
    best, notes = pick_winner(trials, OBJECTIVE, RATE,
                              lambda c: "does not fit on device 0" if c.instances == 1 else "")
    assert best is trials[1]
    assert notes == ["max_batch_size 0, no dynamic batching, 1 instance(s) meets the objective but is "
                     "refused: does not fit on device 0"]


def test_without_a_winner_the_closest_trial_and_its_limit_are_named() -> None:
    trials = [trial(1, 500.0, served=12.0), trial(2, 60.0),
              trial(3, 0.0, ok=False, error="not loaded: memory")]
    near = nearest(trials, OBJECTIVE, RATE)
    assert near is not None and near[0] is trials[1]
    assert near[1] == "p99 60.0 ms is over the 50 ms objective"


def test_the_candidates_at_one_instance_count_keep_an_ensemble_s_floor() -> None:
    assert candidates_for(Candidate(0, 0, 1), 0, 0, 2) == [Candidate(0, 0, 2)]
    assert candidates_for(Candidate(4, 100, 1), 8, 0, 1) == [Candidate(4, 100, 1), Candidate(1, 0, 1),
                                                             Candidate(8, 2000, 1)]
    # an ensemble batching 4 keeps every variant at 4 or more: no batching becomes 4 without a delay
    assert candidates_for(Candidate(4, 100, 1), 8, 4, 2) == [Candidate(4, 100, 2), Candidate(4, 0, 2),
                                                             Candidate(8, 2000, 2)]


def load(peak: float | None) -> RecordedLoad:
    now = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    return RecordedLoad("m", now - timedelta(hours=1), now, peak and peak / 2, peak, source="s", samples=3)


def test_the_plan_measures_at_the_peak_with_windows_long_enough_for_a_p99() -> None:
    plan = ObjectivePlan(OBJECTIVE, load(40.0), window_ms=1000)
    assert plan.rate_rps == 40.0 and plan.window_for(40.0) == 1000
    assert plan.window_for(4.0) == 5000  # 20 requests a window
    assert ObjectivePlan(OBJECTIVE, load(0.2)).rate_rps == MIN_RATE_RPS


def test_the_winner_s_saturation_is_the_highest_rate_it_met_the_objective_at() -> None:
    search = ObjectiveSearch(ObjectivePlan(OBJECTIVE, load(RATE)))
    best = trial(2, 20.0)
    search.curve = [trial(2, 30.0, rate=30.0, served=30.0), trial(2, 90.0, rate=40.0, served=40.0)]
    assert search.saturation(best) == (30.0, False)
    search.curve = search.curve[:1]
    assert search.saturation(best) == (30.0, True)  # every rate measured met it: at least 30
    document = search.document(best, [best])
    assert document["curve"][0] == {"rate_rps": RATE, "p99_ms": 20.0, "throughput": RATE, "ok": True,
                                    "meets": True}
    assert "meets it up to at least 30 req/s" in search.summary(best, [best])


def test_saturation_from_tune_reads_the_latest_objective_run(tmp_path: Path) -> None:
    assert saturation_from_tune("m", home=tmp_path) is None
    save_document("m", "http://t", "me", {"model": "m", "kind": "objective", "saturation_rps": 35.0},
                  home=tmp_path)
    save_document("m", "http://t", "me", {"model": "m", "headline": "a throughput run"}, home=tmp_path)
    save_document("other", "http://t", "me", {"model": "other", "kind": "objective", "saturation_rps": 9.0},
                  home=tmp_path)
    found = saturation_from_tune("m", home=tmp_path)
    assert found is not None and found[0] == 35.0
    assert abs((found[1] - db.utc_now()).total_seconds()) < 60


def record_traffic(home: Path, model: str, start_s: float) -> None:
    pages = [parse(f'# TYPE nv_inference_request_success counter\n'
                   f'nv_inference_request_success{{model="{model}",version="1"}} {30 * i}\n'
                   f'# TYPE nv_inference_count counter\n'
                   f'nv_inference_count{{model="{model}",version="1"}} {30 * i}\n'
                   f'# TYPE nv_inference_exec_count counter\n'
                   f'nv_inference_exec_count{{model="{model}",version="1"}} {30 * i}\n',
                   timestamp_s=start_s + 2 * i) for i in range(4)]
    for before, after in itertools.pairwise(pages):
        history_record.record_window(derive(before, after), SOURCE, home=home)


def test_the_plan_refuses_without_an_objective_or_recorded_traffic(tmp_path: Path) -> None:
    reader = WorkspaceHistory(tmp_path)
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    with pytest.raises(TuneRefusedError, match=r"geadmin objectives set m --p99-ms"):
        objective_plan("m", history=reader, since=since, home=tmp_path)
    store(OBJECTIVE, "me", home=tmp_path)
    with pytest.raises(NoRecordedLoadError, match=r"no history of m .*run the sampler"):
        objective_plan("m", history=reader, since=since, home=tmp_path)
    record_traffic(tmp_path, "m", since.timestamp() - 600)  # recorded, but before the window
    with pytest.raises(NoRecordedLoadError, match=r"no requests recorded for m over .*--prometheus-url"):
        objective_plan("m", history=reader, since=since, home=tmp_path)
    record_traffic(tmp_path, "m", since.timestamp() + 60)
    plan = objective_plan("m", history=reader, since=since, home=tmp_path, source="http://elsewhere/metrics")
    assert plan.rate_rps == pytest.approx(15.0) and plan.load.samples == 3
    assert SOURCE in plan.load.source  # the source that holds the model, not the one asked for


def test_the_cli_names_the_fix_before_connecting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    monkeypatch.delenv("GEADMIN_PROMETHEUS_URL", raising=False)
    (tmp_path / "repo" / "m").mkdir(parents=True)
    argv = ["tune", "m", "--objective", "--url", "http://127.0.0.1:9", "--repository", str(tmp_path / "repo")]
    assert main(argv) == ExitCode.USAGE
    assert "geadmin objectives set m --p99-ms" in capsys.readouterr().err
    store(OBJECTIVE, "me", home=tmp_path)
    assert main(argv) == ExitCode.USAGE
    assert "run the sampler" in capsys.readouterr().err
    assert main([*argv, "--max-p99-ms", "5"]) == ExitCode.USAGE
    assert "drop --max-p99-ms" in capsys.readouterr().err
    assert main([*argv, "--prometheus-url", "ftp://x"]) == ExitCode.USAGE
    assert "--prometheus-url must be an http(s) URL" in capsys.readouterr().err


def test_the_memory_check_refuses_a_winner_that_would_not_fit_beside_the_other_models() -> None:
    guard = MemoryGuard(None)
    mib = 1 << 20
    guard.before = {0: (28_000 * mib, 32_000 * mib)}  # 4000 MiB free before the run
    guard.per_instance, guard.devices = 3000 * mib, (0,)
    assert guard.bytes_for(Candidate(0, 0, 2)) == 6000 * mib
    assert guard.replacing_refusal(Candidate(0, 0, 2), live_instances=1) == ""  # 4000 + 3000 freed
    assert guard.replacing_refusal(Candidate(0, 0, 3), live_instances=1) == (
        "does not fit beside the other models on device(s) 0: it needs about 9000 MiB, and 7000 MiB would be "
        "free (4000 MiB free now + 3000 MiB the live model's 1 instance(s) hold)")
    assert MemoryGuard(None).replacing_refusal(Candidate(0, 0, 3), 1) == ""  # nothing measured: not checked


def test_a_capture_of_the_model_in_the_window_is_replayed_with_request_intervals(tmp_path: Path) -> None:
    reader = WorkspaceHistory(tmp_path)
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    store(OBJECTIVE, "me", home=tmp_path)
    record_traffic(tmp_path, "m", since.timestamp() + 60)
    plain = objective_plan("m", history=reader, since=since, home=tmp_path)
    assert plain.capture is None and "--request-rate-range: no capture" in replay_note(plain)
    assert ObjectiveSearch(plain)._replay(1.0) is None
    start = since.timestamp()
    record_capture(home=tmp_path, server="http://127.0.0.1:8000", model="m", window_start_s=start - 99,
                   window_end_s=start - 90, intervals_us=[9, 9])  # before the window: not used
    record_capture(home=tmp_path, server="http://127.0.0.1:8000", model="m", window_start_s=start + 60,
                   window_end_s=start + 90, intervals_us=[40_000, 60_000, 50_000])
    plan = objective_plan("m", history=reader, since=since, home=tmp_path)
    assert plan.capture is not None and plan.capture.count == 4
    assert plan.rate_rps == pytest.approx(20.0)  # 3 intervals over 150 ms
    note = replay_note(plan)
    assert "load replayed: 4 recorded arrivals" in note and "--request-intervals" in note
    search = ObjectiveSearch(plan)
    doubled = search._replay(2.0)
    assert doubled is not None and doubled.read_text() == "20000\n30000\n25000\n"
    assert search.scratch is not None
    search.scratch.cleanup()
    # a capture slower than the recorded peak (15 req/s) is replayed faster, to reach it
    record_capture(home=tmp_path, server="http://127.0.0.1:8000", model="m", window_start_s=start + 100,
                   window_end_s=start + 120, intervals_us=[100_000, 100_000, 100_000])  # 10 req/s
    slow = objective_plan("m", history=reader, since=since, home=tmp_path)
    assert slow.replay_speedup == pytest.approx(1.5) and slow.rate_rps == pytest.approx(15.0)
    note = replay_note(slow)
    assert "their pattern at 15 req/s, 1.5x as fast as captured to reach the recorded peak" in note
    search = ObjectiveSearch(slow)
    at_peak = search._replay(1.0)
    assert at_peak is not None and at_peak.read_text() == "66667\n66667\n66667\n"
    assert search.scratch is not None
    search.scratch.cleanup()
