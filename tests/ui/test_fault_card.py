"""The NPUs page's fault cards through AppTest: one card per faulted chip with its code, level,
meaning, the models and share of instances lost, the ensembles, and the plan; never green while
a model has no healthy instance; `/npu?npu=N&node=NODE` opens on that card; "Dry run" changes
nothing and "Apply" needs the dry run and a ticked confirmation, then drains the chip from a real
tritonserver's model through the safe apply, audited with the fault named.

The fault report is built by hand (tests/support/fault_reports.py) and handed to the page in
place of the readers (`report_double`): the readers and the impact are tested in their modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.diagnose.npu_faults import FaultReport, ModelHit, PlanStep, StepKind, assess_faults
from geadmin.errors import TelemetryError
from geadmin.ops.npu import wiring
from geadmin.ops.npu.remedy import AUDIT_ACTION
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.sources.fault_table import FaultLevel
from geadmin.triton.client import TritonClient
from pages.ui import keys
from tests.support.apptest import APP, button, isolate, point_at, run
from tests.support.fault_reports import HBM_ECC, NOT_HANDLE, add_device_model, drain_plan, impact, report
from tests.support.faults import AICORE_RETRY, model_map, record, table

NOWHERE = "http://127.0.0.1:9"
DRAINED = "resnet"
DOWN = report(
    impact(3, HBM_ECC, FaultLevel.RESTART_NPU, node="node-a",
           hits=[ModelHit(DRAINED, 2, 1, ("pipeline",)), ModelHit("bert", 1, 1)],
           plan=drain_plan(DRAINED, 3)),
    impact(5, NOT_HANDLE, FaultLevel.NOT_HANDLE, node="node-a"),
    impact(1, HBM_ECC, FaultLevel.RESTART_NPU, node="node-b", hits=[ModelHit("ocr", 2, 1)],
           plan=(PlanStep(StepKind.RELOAD, "reload ocr", model="ocr", changes=True),)))


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    for name in ("TRITON_METRICS_URL", "NPU_EXPORTER_URL"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_TRITON_URL", NOWHERE)
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def hand(monkeypatch: pytest.MonkeyPatch, faults: FaultReport) -> None:
    def report_double(sources: wiring.HostFaultSources, *, home: Path | None = None) -> FaultReport:
        return faults

    monkeypatch.setattr(wiring, "current_report", report_double)


def npu_page(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("npu.py")
    for name, value in params.items():
        at.query_params[name] = value
    return run(at)


def cards(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("**NPU ")]


def test_each_faulted_chip_has_a_card_with_code_level_models_and_plan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hand(monkeypatch, DOWN)
    at = npu_page()
    assert cards(at) == ["**NPU 3 · node\\-a · `0x80E01801` · RestartNPU**",
                         "**NPU 5 · node\\-a · `0x80E21007` · NotHandleFault**",
                         "**NPU 1 · node\\-b · `0x80E01801` · RestartNPU**"]
    (down,) = [e.value for e in at.error]
    assert "No healthy instance left: bert — DOWN whatever Triton says" in down
    assert not at.success, "a card is never green"
    table = at.dataframe[0].value
    assert list(table["model"]) == [DRAINED, "bert"]
    assert list(table["instances lost"]) == ["1 of 2", "1 of 1"]
    assert list(table["share lost"]) == [50.0, 100.0]
    assert list(table["ensembles"]) == ["pipeline", "-"]
    assert list(table["status"]) == ["degraded", "DOWN"]
    assert any("npu-smi set -t reset -i 3 -c 0" in m.value and "never resets hardware" in m.value
               for m in at.markdown)
    assert any("No action: the table says" in c.value for c in at.caption)  # the NotHandleFault's card


def test_a_link_opens_on_its_chip_s_card_and_a_chip_without_a_fault_is_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hand(monkeypatch, DOWN)
    at = npu_page(npu="1", node="node-b")
    assert cards(at)[0].startswith("**NPU 1 · node\\-b")
    gone = npu_page(npu="7", node="node-a")
    assert any("The link names NPU 7" in i.value and "no fault is recorded there now" in i.value
               for i in gone.info)


def test_a_link_with_a_chip_that_is_no_number_is_said_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    hand(monkeypatch, DOWN)
    at = npu_page(npu="3) [x](https://evil.example")
    (warning,) = [w.value for w in at.warning if "link" in w.value]
    assert "which is not a chip number" in warning and "](https://evil" not in warning
    assert cards(at)[0].startswith("**NPU 3")  # the page's own order: the present faults


def test_faults_not_read_are_one_caption_and_nothing_red(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(sources: wiring.HostFaultSources, *, home: Path | None = None) -> FaultReport:
        raise TelemetryError("npu-exporter at http://127.0.0.1:9/metrics does not answer")

    monkeypatch.setattr(wiring, "current_report", unreadable)
    at = npu_page()  # a source given explicitly that does not answer: said calmly
    assert any(c.value.startswith("NPU faults not read:") for c in at.caption)
    assert not at.error and not cards(at)


def test_the_dry_run_comes_first_and_apply_needs_the_confirmation(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    add_device_model(repository, DRAINED, "2,3")
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(repository))
    hand(monkeypatch, report(DOWN.impacts[0]))
    at = npu_page()
    confirm = at.checkbox(key=keys.NPU_FAULT_CONFIRM_PREFIX + "node-a|3|0x80E01801")
    assert confirm.disabled and button(at, "Apply").disabled  # type: ignore[attr-defined]
    button(at, "Dry run").click()  # type: ignore[attr-defined]
    run(at)
    assert any("Dry run: nothing was changed" in c.value for c in at.caption)
    (said,) = [m.value for m in at.markdown if "would apply" in m.value]
    assert "\\'2\\,3\\' \\-\\> \\'2\\'" in said  # the outcome's text, escaped as markdown
    assert 'string_value: "2,3"' in (repository / DRAINED / "config.pbtxt").read_text()
    assert button(at, "Apply").disabled  # type: ignore[attr-defined]
    at.checkbox(key=keys.NPU_FAULT_CONFIRM_PREFIX + "node-a|3|0x80E01801").check()
    run(at)
    assert not button(at, "Apply").disabled  # type: ignore[attr-defined]


@pytest.fixture
def served(triton_factory: Callable[..., TritonProcess], tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    repository = tmp_path / "served"
    add_device_model(repository, DRAINED, "2,3")
    return point_at(monkeypatch, triton_factory(repository, models=[DRAINED]))


def test_apply_drains_the_chip_on_the_real_server_and_the_audit_names_the_fault(
        served: TritonProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hand(monkeypatch, report(DOWN.impacts[0]))
    at = npu_page()
    button(at, "Dry run").click()  # type: ignore[attr-defined]
    run(at)
    at.checkbox(key=keys.NPU_FAULT_CONFIRM_PREFIX + "node-a|3|0x80E01801").check()
    run(at)
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    assert any(c.value == "Applied:" for c in at.caption), [e.value for e in at.error]
    with TritonClient(served.http_url) as client:
        assert client.model_config(DRAINED).parameters["device_ids"].string_value == "2"
    (row,) = [r for r in audit.query(home=tmp_path / "home") if r.action == AUDIT_ACTION]
    assert row.result == "ok"
    assert row.message.startswith("NPU fault on chip 3 of node node-a (code 0x80E01801, level RestartNPU): "
                                  "drain resnet")


def by_node_script(faults: object) -> None:  # run as a script of its own: its names are imported inside
    from pages.ui.fault_card import faults_by_node

    faults_by_node(faults)  # type: ignore[arg-type]


def test_the_fleet_view_groups_the_present_faults_by_node_with_the_models_down() -> None:
    cleared = impact(2, HBM_ECC, FaultLevel.RESTART_NPU, node="node-c", present=False)
    at = run(AppTest.from_function(by_node_script, args=(report(*DOWN.impacts, cleared),)))
    assert [m.value for m in at.markdown] == ["**node\\-a** · 2 faults · DOWN: bert",
                                              "**node\\-b** · 1 fault"]
    node_a, node_b = (d.value for d in at.dataframe)
    assert list(node_a["NPU"]) == [3, 5] and list(node_a["needs action"]) == ["yes", "no"]
    assert list(node_a["models hit"]) == ["resnet (1/2), bert (1/1)", "-"]
    assert list(node_b["card"]) == ["/npu?npu=1&node=node-b"]


def test_a_fleet_without_faults_says_so() -> None:
    at = run(AppTest.from_function(by_node_script, args=(report(),)))
    assert [c.value for c in at.caption] == ["No NPU fault present on the fleet's nodes."]


def test_a_fleet_part_not_read_is_a_warning_and_never_says_the_fleet_is_clear() -> None:
    partial = replace(report(), unjudged=("dns:triton.internal: no answer",))
    at = run(AppTest.from_function(by_node_script, args=(partial,)))
    assert [w.value.replace("\u2060", "").replace("\\", "") for w in at.warning] == [
        "NPU faults not read, so a fault there is not ruled out: dns:triton.internal: no answer"]
    assert [c.value for c in at.caption] == ["No NPU fault present on the nodes that were read."]


def test_nothing_faulted_draws_no_fault_section(monkeypatch: pytest.MonkeyPatch) -> None:
    hand(monkeypatch, report(notes=["npu-smi not on PATH"]))
    at = npu_page()
    assert "Faults" not in [s.value for s in at.subheader] and not cards(at)
    assert not [c.value for c in at.caption if "npu-smi not on PATH" in c.value]


def test_a_fault_that_needs_action_on_a_chip_with_no_model_says_what_to_do_with_the_chip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a RestartBusiness code on chip 7, where no model runs: the plan and the card's "Next:" agree
    # (watch the chip), never the level's "reload the affected instances" with nothing to reload
    hand(monkeypatch, assess_faults([record(7, AICORE_RETRY)], table(), {"": model_map(resnet={1: 2})}))
    at = npu_page()
    assert cards(at) == ["**NPU 7 · `0x80C98000` · RestartBusiness**"]
    (warning,) = [w.value.replace("\u2060", "").replace("\\", "") for w in at.warning if "Next:" in w.value]
    assert "Next: watch NPU 7: RestartBusiness with no model on it, nothing to reload" in warning, warning
    assert "act on RestartBusiness" not in warning  # the level's action, for a chip with models
    assert any("No model instance is known to run on this chip." in c.value for c in at.caption)
    assert any(m.value.replace("\u2060", "").startswith("1. watch NPU 7\\:") for m in at.markdown)
