"""geadmin.diagnose.fault_report (one server) and geadmin.fleet.npu_faults (a fleet): what they
gather around the fault records — the placements on Triton's /metrics, the npu-smi file, each
member's node — without Triton for the parts that need none. The fault table and the fleet's
reader are faults-core's: here the table double and a reader double stand in (monkeypatch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.diagnose import fault_report as report_module
from geadmin.diagnose.fault_report import FaultSources, fault_report
from geadmin.errors import MetricsUnavailableError, NpuSmiError
from geadmin.fleet import npu_faults as fleet_faults
from geadmin.fleet.members import NODE, Member
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.telemetry.sources.fault_reading import MAX_NPU_SMI_FILE_BYTES, FaultReading, read_npu_smi_file
from geadmin.telemetry.sources.npu_faults import SOURCE_NPU_GE, ChipFault
from geadmin.triton.servers import ServerSpec
from tests.support.faults import HBM_ECC, record, table
from tests.support.http_doubles import closed_port, serve

PLACED = """# TYPE npu_ge_instance_device gauge
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_0",device="0"} 1
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_1",device="1"} 1
# TYPE npu_ge_hbm_used_bytes gauge
npu_ge_hbm_used_bytes{device="0"} 1073741824
npu_ge_hbm_used_bytes{device="1"} 1073741824
# TYPE npu_ge_hbm_total_bytes gauge
npu_ge_hbm_total_bytes{device="0"} 8589934592
npu_ge_hbm_total_bytes{device="1"} 8589934592
"""


def test_the_placements_on_tritons_metrics_give_the_models_on_the_faulted_chip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "load_table", lambda override=None: table())
    with serve(PLACED.encode()) as url:
        sources = FaultSources(npu=NpuSources(triton_metrics_url=url, npu_smi=""))
        report = fault_report(sources, [record(1, HBM_ECC)])
    (impact,) = report.impacts
    assert [(h.model, h.instances_lost, h.instances_total) for h in impact.hits] == [("resnet", 1, 2)]
    assert impact.plan[0].device_ids == (0,)


def test_a_source_that_does_not_answer_is_a_note_and_the_faults_are_still_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "load_table", lambda override=None: table())
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    sources = FaultSources(npu=NpuSources(triton_metrics_url=url, triton_metrics_explicit=True, npu_smi=""))
    report = fault_report(sources, [record(1, HBM_ECC)], notes=["npu-smi: not found"])
    assert report.needs_action and report.impacts[0].hits == ()
    assert report.notes[0] == "npu-smi: not found" and report.notes[1].startswith("NPUs not read: ")


def test_a_saved_npu_smi_file_that_cannot_be_read_or_is_too_big_is_the_operators_input(
        tmp_path: Path) -> None:
    with pytest.raises(NpuSmiError, match=r"cannot read the npu-smi file .*missing"):
        read_npu_smi_file(str(tmp_path / "missing"))
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (MAX_NPU_SMI_FILE_BYTES + 1))
    with pytest.raises(NpuSmiError, match="is over 4 MiB: not npu-smi output"):
        read_npu_smi_file(str(big))


def member(name: str, node: str = "") -> Member:
    return Member(ServerSpec(name, f"http://127.0.0.{len(name)}:8000"), "test", {NODE: node} if node else {})


def test_one_reading_per_node_with_the_members_node_label_else_its_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str | None, str]] = []

    def read_faults_double(sources: NpuSources, *, node: str = "",
                           npu_smi_file: str | None = None) -> FaultReading:
        asked.append((sources.triton_metrics_url, node))
        if "127.0.0.3" in (sources.triton_metrics_url or ""):
            raise MetricsUnavailableError("nothing answers", url=sources.triton_metrics_url)
        fault = ChipFault(1, 507899, SOURCE_NPU_GE, node)
        return FaultReading((fault,), (SOURCE_NPU_GE,), ("npu-smi: not here",), node)

    monkeypatch.setattr(fleet_faults, "read_faults", read_faults_double)
    members = [member("a", "node-a"), member("bb"), member("ccc", "node-a"), member("dddd", "node-d")]
    unread: list[str] = []
    readings = {r.node: r for r in fleet_faults.read_fleet_faults(members, timeout_s=1.0, unread=unread)}
    assert len(unread) == 1 and unread[0].startswith("ccc (node node-a): nothing answers"), unread
    assert sorted(readings) == ["bb", "node-a", "node-d"]
    assert [node for _, node in asked] == ["node-a", "node-a", "bb", "node-d"]
    assert asked[0][0] == "http://127.0.0.1:8002/metrics"  # the member's own metrics port
    assert [f.node for f in readings["bb"].faults] == ["bb"] and readings["bb"].read == (SOURCE_NPU_GE,)
    # node-a: one member did not answer, so its reading clears nothing (no source counts as read)
    assert len(readings["node-a"].faults) == 1 and readings["node-a"].read == ()
    assert readings["node-a"].notes[0] == "a (node node-a): npu-smi: not here"
    assert readings["node-a"].notes[-1].startswith("ccc (node node-a): faults not read: ")
