"""The preview's go / no-go (geadmin.ops.models.preview_report): each rule of its docstring on
figures made here, and the evidence naming where each figure came from."""

from __future__ import annotations

import pytest

from geadmin.diagnose.impact import Consequence, Effect, Impact
from geadmin.errors import InvalidArgumentError
from geadmin.ops.models.preview import PreviewLoad
from geadmin.ops.models.preview_report import ImpactPreview, PreviewSide, PreviewVerdict
from geadmin.repository.rules import Finding, Severity
from geadmin.telemetry.alerting.objectives import Objective

LIVE = PreviewSide("m", True, 20.0, 2.0, 3.0, 200, 0)
SAME = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 2.1, 3.2, 200, 0)


def preview(**changes: object) -> ImpactPreview:
    base: dict[str, object] = {"model": "m", "server": "http://t:8000", "trial": "m__tune_0a1b2c3d",
                               "rate_rps": 20.0, "rate_source": "given with --rate", "window_ms": 1000,
                               "live": LIVE, "candidate": SAME, "removed": "the trial copy was removed"}
    return ImpactPreview(**(base | changes))  # type: ignore[arg-type]


def test_an_unchanged_p99_with_no_objective_is_a_go_that_says_it_was_not_judged() -> None:
    found = preview()
    assert found.verdict is PreviewVerdict.GO and found.reasons() == []
    assert found.headline() == ("GO: m: the new config loads, breaks no ensemble and keeps p99 within the "
                                "limit at the replayed rate (no p99 objective set)")
    evidence = found.evidence()
    assert evidence[0] == ("load: 20 requests/s (given with --rate), 1000 ms windows, the live model and the "
                           "trial copy m__tune_0a1b2c3d one after the other")
    assert "p99 change: 3.0 -> 3.2 ms (+7 %)" in evidence
    assert evidence[-1] == "trial: the trial copy was removed; nothing was applied"


def test_an_ensemble_taken_down_comes_first_then_the_validator() -> None:
    down = Impact("apply", ("m",), (Consequence("pipe", Effect.REFUSED, "pipe allows 32, m only 16",
                                                ("pipe", "m")),))
    error = Finding("ensemble.member_change", Severity.ERROR, "max_batch_size", "Triton would unload pipe",
                    "x")
    found = preview(impact=down, findings=(error,))
    assert found.reasons() == ["it takes down pipe: pipe allows 32, m only 16",
                               "the validator refuses it: Triton would unload pipe"]
    assert found.headline() == "NO-GO: m: it takes down pipe: pipe allows 32, m only 16 (+1 more)"


def test_a_refused_load_and_an_unmeasured_trial_are_no_go() -> None:
    assert preview(refused="bad gear", live=None, candidate=None).reasons() == [
        "Triton refused to load it: bad gear"]
    broken = PreviewSide("m__tune_0a1b2c3d", False, error="perf_analyzer not found")
    assert preview(candidate=broken).reasons() == ["the trial could not be measured: perf_analyzer not found"]


def test_the_p99_objective_judges_the_trials_p99() -> None:
    slow = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 30.0, 45.0, 40, 0)
    assert preview(candidate=slow, objective=Objective("m", p99_ms=50.0)).verdict is PreviewVerdict.GO
    assert preview(candidate=slow, objective=Objective("m", p99_ms=40.0)).reasons() == [
        "p99 45.0 ms is over the objective of 40 ms"]


def test_without_an_objective_p99_may_not_double_and_grow_past_the_floor() -> None:
    noisy = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 4.0, 7.0, 200, 0)  # 2.3x, but 4 ms: noise
    assert preview(candidate=noisy).verdict is PreviewVerdict.GO
    slow = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 30.0, 45.0, 200, 0)
    assert preview(candidate=slow).reasons() == [
        "p99 grows 15.0x (more than 2x, and no p99 objective to judge it by)"]


def test_a_p99_of_too_few_requests_is_not_judged_and_the_go_says_so() -> None:
    """At 5 req/s in 500 ms windows each side counts a handful: its p99 is the slowest one, and
    one stall of a busy host made a comment-only change "grow" 15x."""
    few_live = PreviewSide("m", True, 5.0, 2.0, 3.0, 12, 0)
    stalled = PreviewSide("m__tune_0a1b2c3d", True, 5.0, 2.0, 45.0, 12, 0)
    found = preview(live=few_live, candidate=stalled)
    assert found.verdict is PreviewVerdict.GO and found.reasons() == []
    assert found.headline() == (
        "GO: m: the new config loads, breaks no ensemble and its p99 change was not judged: 12 and 12 "
        "requests measured, and a p99 of fewer than 100 is their slowest one (no p99 objective set: "
        "`geadmin objectives set m --p99-ms N`, or preview with longer windows)")
    assert preview(live=few_live, candidate=stalled, objective=Objective("m", p99_ms=40.0)).reasons() == [
        "p99 45.0 ms is over the objective of 40 ms"]  # an objective judges whatever the count


def test_failed_requests_project_the_error_budget_burn() -> None:
    failing = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 2.0, 3.0, 195, 5)
    found = preview(candidate=failing, objective=Objective("m", error_budget=0.01))
    assert found.projected_burn == pytest.approx(2.5)
    assert found.reasons() == ["its failed requests would burn the error budget 2.5x as fast as it lasts"]
    assert any(line.startswith("error budget: projected burn rate 2.50") for line in found.evidence())
    assert preview(objective=Objective("m", error_budget=0.01)).projected_burn == 0.0


def test_memory_says_its_source_or_that_it_is_not_known() -> None:
    assert "memory change: not known here" in "\n".join(preview().evidence())
    held = PreviewSide("m__tune_0a1b2c3d", True, 20.0, 2.0, 3.0, 200, 0, 512 << 20, "npu_ge HBM")
    assert ("memory change: the trial holds 512 MiB (npu_ge HBM); the live model's share is not known here"
            in preview(candidate=held).evidence())


def test_the_json_record_says_nothing_was_applied() -> None:
    record = preview().record()
    assert record["verdict"] == "GO" and record["go"] is True and record["applied"] is False


@pytest.mark.parametrize("load", [{"rate_rps": 0.0}, {"rate_rps": -1.0}, {"window_h": 0.0},
                                  {"window_ms": 50}, {"rate_rps": float("nan")}])
def test_a_load_out_of_bounds_is_refused(load: dict[str, float]) -> None:
    with pytest.raises(InvalidArgumentError):
        PreviewLoad(**load)  # type: ignore[arg-type]
