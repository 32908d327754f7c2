"""NPU faults joined with what a real tritonserver serves: npu_ge on the ACL test double runs
`pair` on devices 0 and 1 and `single` on device 1 (config device_ids; npu_ge publishes the
placements on Triton's /metrics), the ensemble `pipe` runs `pair`, and a double of npu-exporter
on loopback reports a fault on chip 1.

`geadmin npu faults` must name the chip, the code, its level, the models, the share lost and the
next step in its first lines, and exit 1 (`single` has no healthy instance left); `geadmin
status` then reads the recorded fault through the verdict's npu-fault rule. A fleet of two such
servers on two nodes keeps each node's chips to the servers on it.

NEEDS_FAULTS_CORE: the command tests run the real readers, store and table (faults-core's
branch); `test_a_fleet_of_two_nodes...` rests on the join alone (its table is the test double).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.fleet import npu_faults as fleet_faults
from geadmin.fleet.members import NODE, Member, Trust
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.servers import ServerSpec
from tests.support.faults import HBM_ECC, SENSOR_NOTE, record, table
from tests.support.npu_exporter_double import ChipState, npu_exporter_double
from tests.support.npu_fault_servers import start_fault_server

pytestmark = pytest.mark.integration

OVERRIDE = {"RestartNPUCodes": ["80E18402"], "NotHandleFaultCodes": ["80CB8009"]}
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    server = start_fault_server(tmp_path_factory.mktemp("npu_faults"), "one")
    try:
        yield server
    finally:
        server.stop()


def faults_command(served: TritonProcess, tmp_path: Path, chips: dict[int, ChipState], *extra: str,
                   monkeypatch: pytest.MonkeyPatch) -> int:
    override = tmp_path / "faultCode.json"
    override.write_text(json.dumps(OVERRIDE))
    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi here
    with npu_exporter_double(chips) as exporter:
        return main(["npu", "faults", "--url", served.http_url, "--metrics-url", served.metrics_url,
                     "--exporter-url", exporter, "--fault-table", str(override),
                     "--home", str(tmp_path / "home"), *extra])


def test_a_reset_level_fault_names_the_models_share_lost_and_next_step_and_status_follows(
        served: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = faults_command(served, tmp_path, {0: ChipState(), 1: ChipState(codes=(HBM_ECC,))},
                          monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert code == ExitCode.FAILED, out
    first, second = out.splitlines()[:2]
    assert first == "DOWN: no healthy instance left of single (1 NPU fault(s) need action)"
    assert second.startswith("NPU 1: 0x80E18402 (RestartNPU"), out
    assert ("hits pair (1 of 2 instances) and the ensemble(s) pipe; "
            "single (1 of 1 instance, none left: DOWN) — give single another device first, "
            "then drain and reset") in second
    assert "next: [drain] drain NPU 1 of pair: device_ids 0 (without 1) through the safe apply" in out

    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", served.metrics_url)
    monkeypatch.setenv("GEADMIN_NPU_FAULT_TABLE", str(tmp_path / "faultCode.json"))  # the verdict's table
    assert main(["status", "--url", served.http_url]) == ExitCode.DEGRADED
    status = capsys.readouterr().out
    assert status.startswith("DEGRADED: NPU 1: 0x80E18402 (RestartNPU"), status
    assert "[npu-fault] model 'single' is DOWN whatever Triton says" in status
    assert main(["status", "--url", served.http_url, "--expect", "single"]) == ExitCode.FAILED
    assert capsys.readouterr().out.startswith("DOWN: model 'single' is DOWN whatever Triton says")


def test_a_not_handle_fault_alone_exits_0_and_the_plan_says_no_action(
        served: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    chips = {0: ChipState(codes=(SENSOR_NOTE,)), 1: ChipState()}
    code = faults_command(served, tmp_path, chips, "--plan", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert code == ExitCode.OK, out
    assert out.splitlines()[:2] == [
        "OK: no NPU fault needs action (1 shown)",
        "NPU 0: 0x80CB8009 (NotHandleFault, " + out.splitlines()[1].split("(NotHandleFault, ", 1)[1]]
    assert "hits pair (0 of 2 instances) and the ensemble(s) pipe — no action" in out
    assert "[none] NPU 0: no impact on inference (NotHandleFault); no action" in out


def test_a_fleet_of_two_nodes_keeps_each_nodes_chips_to_its_servers(
        served: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = start_fault_server(tmp_path, "two", single_on="0")
    try:
        members = [Member(ServerSpec("a", served.http_url, metrics_url=served.metrics_url), "test",
                          {NODE: "node-a"}, trust=Trust(True, "test")),
                   Member(ServerSpec("b", other.http_url, metrics_url=other.metrics_url), "test",
                          {NODE: "node-b"}, trust=Trust(True, "test"))]
        monkeypatch.setattr(fleet_faults, "load_table", lambda override=None: table())
        report = fleet_faults.fleet_fault_report(members, [record(1, HBM_ECC, node="node-a")], timeout_s=5.0)
    finally:
        other.stop()
    (impact,) = report.impacts
    assert impact.record.fault.node == "node-a"
    assert {(h.model, h.instances_lost, h.instances_total, h.ensembles) for h in impact.hits} == {
        ("pair", 1, 2, ("pipe",)), ("single", 1, 1, ())}
    assert report.models_down == ("single",)  # node-b's single runs on its own chip 0: untouched
    assert "through a rollout limited to node node-a" in impact.plan[0].text
