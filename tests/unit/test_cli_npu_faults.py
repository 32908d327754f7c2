"""`geadmin npu faults`: the first lines name the chip, the code, its level, the models and the
share of their instances lost, and the next step; exit 0 when nothing needs action (a
NotHandleFault alone is shown), 4 for a fault that needs action or an unhealthy chip whatever its
code, 1 when a model has no healthy instance left.

The tests marked NEEDS_FAULTS_CORE run the whole command with the real readers, store and table
(geadmin.telemetry.sources.npu_faults, telemetry.history.faults, sources.fault_table) against a
double of npu-exporter on loopback: they pass once faults-core's branch is merged. The others
rest on values only."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.cli.npu_faults import exit_code
from geadmin.diagnose.fault_text import report_json, report_lines, short
from geadmin.diagnose.npu_faults import assess_faults
from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.sources.npu_faults import SOURCE_NPU_GE, ChipFault
from tests.support.faults import (
    AICORE_RETRY,
    CHIP_OUT,
    HBM_ECC,
    SENSOR_NOTE,
    UNLISTED,
    model_map,
    npu,
    record,
    table,
)
from tests.support.http_doubles import closed_port
from tests.support.npu_exporter_double import ChipState, npu_exporter_double

MAPS = {"": model_map(resnet={3: 1, 1: 1}, bert={3: 1})}


def test_exit_codes_follow_the_worst_fault() -> None:
    assert exit_code(assess_faults([], table(), MAPS)) == ExitCode.OK
    assert exit_code(assess_faults([record(3, SENSOR_NOTE)], table(), MAPS)) == ExitCode.OK
    assert exit_code(assess_faults([record(1, AICORE_RETRY)], table(), MAPS)) == ExitCode.DEGRADED
    assert exit_code(assess_faults([record(2, UNLISTED, healthy=False)], table(), MAPS)) == ExitCode.DEGRADED
    assert exit_code(assess_faults([record(2, UNLISTED, healthy=True)], table(), MAPS)) == ExitCode.OK
    assert exit_code(assess_faults([record(3, HBM_ECC)], table(), MAPS)) == ExitCode.FAILED  # bert: none left
    assert exit_code(assess_faults([record(3, HBM_ECC, present=False)], table(), MAPS)) == ExitCode.OK


def test_a_fleet_part_not_read_is_never_ok_and_leads_when_nothing_else_needs_action() -> None:
    missing = ("dns:triton.internal: no answer", "c (node c): nothing answers")
    quiet = replace(assess_faults([], table(), MAPS), unjudged=missing)
    assert exit_code(quiet) == ExitCode.DEGRADED
    lines = report_lines(quiet)
    assert lines[0] == ("DEGRADED: NPU faults not read on 2 part(s) of the fleet, so a fault there is not "
                        "ruled out — dns:triton.internal: no answer; 1 more below")
    assert [line for line in lines if line.startswith("not read: ")] == [f"not read: {m}" for m in missing]
    assert report_json(quiet)["unjudged"] == list(missing)
    # a fault that needs action still leads; the parts not read are still said
    acting = replace(assess_faults([record(1, AICORE_RETRY)], table(), MAPS), unjudged=missing[:1])
    assert exit_code(acting) == ExitCode.DEGRADED
    assert report_lines(acting)[0].startswith("ACTION: 1 NPU fault(s) need action")
    assert f"not read: {missing[0]}" in report_lines(acting)


def test_the_first_lines_name_chip_code_level_models_share_and_next_step() -> None:
    report = assess_faults([record(1, AICORE_RETRY), record(0, SENSOR_NOTE)], table(), MAPS,
                           devices={"": [npu(1, 0, 1)]})
    lines = report_lines(report)
    assert lines[0] == "ACTION: 1 NPU fault(s) need action — NPU 1: reload resnet"
    assert lines[1] == ("NPU 1: 0x80C98000 (RestartBusiness, AI Core error) hits resnet (1 of 2 instances) — "
                        "reload resnet")
    assert lines[4] == "  next: [reload] reload resnet: RestartBusiness restarts its instance(s) on NPU 1 " \
        "(changes: guarded, audited)"
    assert lines[5].startswith("NPU 0: 0x80CB8009 (NotHandleFault, sensor notice) hits no model — no action")


def test_the_plan_prints_every_step_with_the_reset_command_for_the_operator() -> None:
    report = assess_faults([record(3, HBM_ECC)], table(), MAPS, devices={"": [npu(3, 2, 1)]})
    lines = report_lines(report, plan=True)
    assert lines[0] == "DOWN: no healthy instance left of bert (1 NPU fault(s) need action)"
    assert "  [drain] drain NPU 3 of bert: it has no other healthy device" in "\n".join(lines)
    assert "  [drain] drain NPU 3 of resnet: device_ids 1 (without 3) through the safe apply " \
        "(changes: guarded, audited)" in lines
    assert "    $ npu-smi set -t reset -i 2 -c 1   # for you to run; geadmin never runs it" in lines
    document = report_json(report)
    assert document["models_down"] == ["bert"] and document["needs_action"] is True
    assert document["faults"][0]["code_hex"] == "0x80E18402"  # type: ignore[index]


def test_a_long_meaning_is_cut_to_its_first_clause_in_the_first_lines() -> None:
    assert short("a fault a reset does not repair: the chip is taken out of service") == \
        "a fault a reset does not repair"
    assert short("x" * 80) == "x" * 71 + "…"
    assert short("HBM multi-bit ECC error") == "HBM multi-bit ECC error"


def test_a_long_meaning_is_cut_at_a_word_boundary_and_loses_the_level_the_line_already_names() -> None:
    meaning = "a fault the driver records that does not affect running work (NotHandleFault)"
    assert short(meaning, level="NotHandleFault") == \
        "a fault the driver records that does not affect running work"
    clipped = short("the chip's memory controller reported an uncorrectable error in a bank that "
                    "serves the model weights", limit=40)
    assert clipped == "the chip's memory controller reported…"
    assert len(clipped) <= 40
    whole = {"the", "chip's", "memory", "controller", "reported", "an", "uncorrectable"}
    assert set(clipped.removesuffix("…").split()) <= whole  # no word cut in two


@pytest.mark.parametrize(("code", "healthy", "words"), [
    (AICORE_RETRY, None, "watch the chip (no model on it)"),  # RestartBusiness: nothing to reload
    (HBM_ECC, None, "reset (no model on it)"),  # RestartNPU: nothing to drain, the chip is reset
    (CHIP_OUT, None, "keep it out of service (no model on it)"),  # SeparateNPU: nothing to move
    (UNLISTED, False, "reset (no model on it)"),  # unknown code, unhealthy chip
])
def test_a_fault_that_needs_action_on_a_chip_with_no_model_says_the_chips_step_in_headline_and_line(
        code: int, healthy: bool | None, words: str) -> None:
    report = assess_faults([record(7, code, healthy=healthy)], table(), MAPS)
    lines = report_lines(report)
    assert lines[0] == f"ACTION: 1 NPU fault(s) need action — NPU 7: {words}"
    assert lines[1].endswith(f"hits no model — {words.removesuffix(' (no model on it)')}"), lines[1]
    assert "no action" not in "\n".join(lines), lines
    assert exit_code(report) == ExitCode.DEGRADED


def test_the_headline_names_the_first_three_faults_that_need_action_and_counts_the_rest() -> None:
    records = [record(chip, AICORE_RETRY) for chip in (4, 5, 6, 7)]
    first = report_lines(assess_faults(records, table(), MAPS))[0]
    assert first == ("ACTION: 4 NPU fault(s) need action — NPU 4: watch the chip (no model on it); NPU 5: "
                     "watch the chip (no model on it); NPU 6: watch the chip (no model on it); 1 more below")


# -- NEEDS_FAULTS_CORE: the whole command, real readers / store / table ---------------------------
OVERRIDE = {"RestartNPUCodes": ["80E18402"], "NotHandleFaultCodes": ["80CB8009"]}


def _run(tmp_path: Path, chips: dict[int, ChipState], *extra: str,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    override = tmp_path / "faultCode.json"
    override.write_text(json.dumps(OVERRIDE))
    with npu_exporter_double(chips) as url:
        code = main(["npu", "faults", "--exporter-url", url, "--url", f"http://127.0.0.1:{closed_port()}",
                     "--metrics-url", f"http://127.0.0.1:{closed_port()}/metrics", "--fault-table",
                     str(override), "--home", str(tmp_path / "home"), "--timeout", "2", *extra])
    return code, capsys.readouterr().out


def test_cli_a_not_handle_fault_alone_exits_0_and_is_shown(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, {0: ChipState(), 1: ChipState(codes=(SENSOR_NOTE,))}, capsys=capsys)
    assert code == ExitCode.OK, out
    assert out.splitlines()[0] == "OK: no NPU fault needs action (1 shown)"
    assert out.splitlines()[1].startswith("NPU 1: 0x80CB8009 (NotHandleFault")


def test_cli_a_reset_level_code_exits_4_and_an_unknown_code_on_an_unhealthy_chip_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, {0: ChipState(codes=(HBM_ECC, SENSOR_NOTE)), 1: ChipState(False, (UNLISTED,))},
                     "--json", capsys=capsys)
    assert code == ExitCode.DEGRADED, out
    faults = {(f["npu"], f["code_hex"]): f for f in json.loads(out)["faults"]}
    assert faults[(0, "0x80E18402")]["level"] == "RestartNPU" and faults[(0, "0x80E18402")]["counts"]
    assert faults[(1, "0x8FFFFFFF")]["level"] == "unknown" and faults[(1, "0x8FFFFFFF")]["counts"]
    assert not faults[(0, "0x80CB8009")]["counts"]


# -- read as on-call would: an ECC fault on a chip with a two-instance model, an unknown code on
# -- an unhealthy chip, a fault without a code, a cleared fault ------------------------------------
TWO = {"": model_map(resnet={1: 1, 3: 1})}


def test_an_ecc_fault_on_one_of_a_models_two_chips_says_the_share_the_step_and_that_a_reset_follows() -> None:
    lines = report_lines(assess_faults([record(3, HBM_ECC)], table(), TWO, devices={"": [npu(3, 2, 1)]}))
    assert lines[0] == "ACTION: 1 NPU fault(s) need action — NPU 3: drain and reset"
    assert lines[1] == ("NPU 3: 0x80E18402 (RestartNPU, HBM multi-bit ECC error) hits resnet (1 of 2 "
                        "instances) — drain and reset")
    assert lines[4].startswith("  next: [drain] drain NPU 3 of resnet: device_ids 1 (without 3)")
    assert lines[5] == "  then 1 more step: reset (--plan prints every step)"  # the reset is not hidden


def test_an_unknown_code_on_an_unhealthy_chip_says_why_it_counts_and_where_to_look_it_up() -> None:
    lines = report_lines(assess_faults([record(1, UNLISTED, healthy=False)], table(), TWO))
    assert lines[1].startswith("NPU 1: 0x8FFFFFFF (unknown, unknown code, chip unhealthy) hits resnet")
    assert lines[2] == ("  the chip is reported unhealthy, so this counts as a fault whatever its code: look "
                        "0x8FFFFFFF up in the driver's fault list")


def test_a_fault_without_a_code_shows_what_its_source_saw() -> None:
    saw = "instance r_0_1 of resnet lost its device (1x)"
    lost = FaultRecord(ChipFault(1, None, SOURCE_NPU_GE, "", False, saw), 1000.0, 2000.0, True)
    lines = report_lines(assess_faults([lost], table(), TWO))
    assert lines[1].startswith("NPU 1: no code (unknown, instance r_0_1 of resnet lost its device (1x), chip "
                               "unhealthy) hits resnet (1 of 2 instances)"), lines[1]
    assert lines[2] == "  the chip is reported unhealthy without a fault code: its instances may fail or hang"


def test_a_cleared_fault_reads_as_past_not_as_a_chip_that_still_cannot_serve() -> None:
    lines = report_lines(assess_faults([record(3, HBM_ECC, present=False)], table(), TWO))
    assert lines[0] == "OK: no NPU fault needs action (1 shown, 1 cleared)"
    assert lines[1].endswith("hit resnet (0 of 2 instances) — cleared, nothing to do"), lines[1]
    assert lines[2] == ("  cleared: not reported since 1970-01-01 00:33:20Z; while present: models on the "
                        "chip: RestartNPU")


def test_cli_no_source_answering_is_unknown_not_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """No npu-smi, no exporter, Triton's metrics down: nothing rules a fault out, so no green."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi
    monkeypatch.delenv("GEADMIN_NPU_EXPORTER_URL", raising=False)
    code = main(["npu", "faults", "--url", f"http://127.0.0.1:{closed_port()}",
                 "--home", str(tmp_path / "home"), "--timeout", "2"])
    out = capsys.readouterr().out
    assert code == ExitCode.UNREACHABLE, out
    assert out.splitlines()[0] == ("UNKNOWN: no NPU fault source answered, so no fault can be ruled out "
                                   "(why: the notes below)")
    assert "note: Triton's metrics (npu_ge)" in out

    with npu_exporter_double({0: ChipState()}) as url:  # one source answering, nothing faulted: OK
        code = main(["npu", "faults", "--exporter-url", url, "--url", f"http://127.0.0.1:{closed_port()}",
                     "--home", str(tmp_path / "home"), "--timeout", "2"])
    assert code == ExitCode.OK
    assert capsys.readouterr().out.splitlines()[0] == "OK: no NPU fault reported"


def test_cli_a_triton_without_npu_ge_is_no_fault_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Triton's metrics answer, but with no npu_ge on them they say nothing of any NPU: UNKNOWN."""
    from tests.support.http_doubles import serve

    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi
    monkeypatch.delenv("GEADMIN_NPU_EXPORTER_URL", raising=False)
    page = b"# TYPE nv_inference_count counter\nnv_inference_count{model=\"m\",version=\"1\"} 3\n"
    with serve(page) as metrics:
        code = main(["npu", "faults", "--url", f"http://127.0.0.1:{closed_port()}", "--metrics-url", metrics,
                     "--home", str(tmp_path / "home"), "--timeout", "2"])
    out = capsys.readouterr().out
    assert code == ExitCode.UNREACHABLE, out
    assert out.startswith("UNKNOWN: no NPU fault source answered"), out
    assert "no npu_ge metrics on " in out
