"""A faulted chip's plan applied to a real tritonserver: the dry run changes nothing and says
what it would do; applied, the drain goes through the safe apply (the served config loses the
chip from device_ids), the reload through the checked model actions, the reset command is only
printed, and every change has an audit row naming the fault. A python model whose config names
`device_ids` stands for an npu_ge model: the python backend ignores the parameter, Triton serves
and reports it like any other, so the apply and the reload are real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.diagnose.npu_faults import PlanStep, StepKind
from geadmin.domain import ModelState
from geadmin.errors import NotAuthorizedError
from geadmin.ops.npu.remedy import AUDIT_ACTION, RemedyState, apply_plan
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.sources.fault_table import FaultLevel
from geadmin.triton.client import TritonClient
from tests.support.auth import auth_as, viewer_auth
from tests.support.fault_reports import HBM_ECC, add_device_model, drain_plan, impact
from tests.support.processes import quick_stopping_triton

pytestmark = pytest.mark.integration

TWO_CHIPS = "two_chips"
ONE_CHIP = "one_chip"
FAULT = "NPU fault on chip 0 (code 0x80E01801, level RestartNPU)"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonProcess, TritonClient]]:
    root = tmp_path_factory.mktemp("remedy")
    repository = root / "repo"
    repository.mkdir()
    add_device_model(repository, TWO_CHIPS, "0,1")
    add_device_model(repository, ONE_CHIP, "0")
    with quick_stopping_triton(repository, models=[TWO_CHIPS, ONE_CHIP], log_path=root / "triton.log",
                       exit_timeout_s=1) as triton, TritonClient(triton.http_url) as client:
        yield triton, client


def served_device_ids(client: TritonClient, model: str) -> str:
    return client.model_config(model).parameters["device_ids"].string_value


def test_a_dry_run_changes_nothing_and_says_what_it_would_do(served: tuple[TritonProcess, TritonClient],
                                                              tmp_path: Path) -> None:
    triton, client = served
    before = (triton.repository / TWO_CHIPS / "config.pbtxt").read_bytes()
    plan = (*drain_plan(TWO_CHIPS, 0), PlanStep(StepKind.RELOAD, "reload", model=TWO_CHIPS, changes=True))
    outcomes = apply_plan(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=plan), None, client=client,
                          repository=triton.repository, home=tmp_path)
    assert [o.state for o in outcomes] == [RemedyState.WOULD, RemedyState.SAID, RemedyState.WOULD]
    assert "device_ids '0,1' -> '1'" in outcomes[0].message
    assert "npu-smi set -t reset -i 0 -c 0" in outcomes[1].message
    assert (triton.repository / TWO_CHIPS / "config.pbtxt").read_bytes() == before
    assert served_device_ids(client, TWO_CHIPS) == "0,1"
    assert audit.query(home=tmp_path) == []


def test_applied_the_drain_serves_without_the_chip_and_the_audit_names_the_fault(
        served: tuple[TritonProcess, TritonClient], tmp_path: Path) -> None:
    triton, client = served
    config = triton.repository / TWO_CHIPS / "config.pbtxt"
    before = config.read_bytes()
    try:
        outcomes = apply_plan(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=drain_plan(TWO_CHIPS, 0)),
                              auth_as("olga"), dry_run=False, client=client, repository=triton.repository,
                              home=tmp_path)
        assert [o.state for o in outcomes] == [RemedyState.DONE, RemedyState.SAID], outcomes
        assert served_device_ids(client, TWO_CHIPS) == "1"
        assert "# the NPUs of this model's instances" in config.read_text(), "comments survive the drain"
        rows = audit.query(home=tmp_path)
        remedy_row = next(r for r in rows if r.action == AUDIT_ACTION)
        assert (remedy_row.who, remedy_row.model, remedy_row.result) == ("olga", TWO_CHIPS, "ok")
        assert remedy_row.message.startswith(f"{FAULT}: drain {TWO_CHIPS}: device_ids '0,1' -> '1'")
        apply_row = next(r for r in rows if r.action == "apply" and r.result == "ok")
        assert apply_row.message.startswith(f"{FAULT}: drain")
        assert [r for r in rows if r.action == AUDIT_ACTION and "reset" in r.message] == []
    finally:
        config.write_bytes(before)
        client.load(TWO_CHIPS)


def test_the_only_device_is_never_drained_and_the_refusal_is_audited(
        served: tuple[TritonProcess, TritonClient], tmp_path: Path) -> None:
    triton, client = served
    before = (triton.repository / ONE_CHIP / "config.pbtxt").read_bytes()
    (outcome, _) = apply_plan(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=drain_plan(ONE_CHIP, 0)),
                              auth_as("olga"), dry_run=False, client=client, repository=triton.repository,
                              home=tmp_path)
    assert outcome.state is RemedyState.REFUSED
    assert "only device" in outcome.message
    assert (triton.repository / ONE_CHIP / "config.pbtxt").read_bytes() == before
    (row,) = audit.query(home=tmp_path)
    assert (row.action, row.result) == (AUDIT_ACTION, "refused")
    assert row.message.startswith(FAULT)


def test_applied_the_reload_reloads_through_the_checked_action(served: tuple[TritonProcess, TritonClient],
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))  # the model actions audit into the workspace's
    triton, client = served
    plan = (PlanStep(StepKind.RELOAD, "restart the business", model=ONE_CHIP, changes=True),)
    (outcome,) = apply_plan(impact(0, HBM_ECC, FaultLevel.RESTART_BUSINESS, plan=plan), auth_as("olga"),
                            dry_run=False, client=client, repository=triton.repository, home=tmp_path)
    assert outcome.state is RemedyState.DONE, outcome.message
    states = {e.name: e.state for e in client.repository_index()}
    assert states[ONE_CHIP] is ModelState.READY
    actions = {(r.action, r.result) for r in audit.query(home=tmp_path)}
    assert {("reload", "ok"), (AUDIT_ACTION, "ok")} <= actions
    (row,) = [r for r in audit.query(home=tmp_path) if r.action == AUDIT_ACTION]
    assert "code 0x80E01801, level RestartBusiness" in row.message


def test_a_viewer_is_refused_before_anything_and_a_cleared_fault_changes_nothing(
        served: tuple[TritonProcess, TritonClient], tmp_path: Path) -> None:
    triton, client = served
    before = (triton.repository / TWO_CHIPS / "config.pbtxt").read_bytes()
    faulted = impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=drain_plan(TWO_CHIPS, 0))
    with pytest.raises(NotAuthorizedError, match="apply"):
        apply_plan(faulted, viewer_auth(), dry_run=False, client=client, repository=triton.repository,
                   home=tmp_path)
    cleared = impact(0, HBM_ECC, FaultLevel.RESTART_NPU, present=False, plan=drain_plan(TWO_CHIPS, 0))
    (outcome, _) = apply_plan(cleared, auth_as("olga"), dry_run=False, client=client,
                              repository=triton.repository, home=tmp_path)
    assert outcome.state is RemedyState.REFUSED and "cleared" in outcome.message
    assert (triton.repository / TWO_CHIPS / "config.pbtxt").read_bytes() == before
    assert served_device_ids(client, TWO_CHIPS) == "0,1"
