"""The verdict's npu-fault rule (diagnose.fault_rule, wired in diagnose.evidence.assess): a fault
that needs action makes the server DEGRADED with the chip, code, level, models and share lost,
and the next step as the fix; a model left with no healthy instance is named DOWN (the server
DOWN when it is an --expect'ed model); a NotHandleFault is a note, never a reason.

The fault history is faults-core's store: until it merges these tests put the records in place
of `fault_records` and the fault table double in place of `load_table` (monkeypatch)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

import pytest

from geadmin.diagnose import fault_report, fault_rule
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Level, Verdict, VerdictRule
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.telemetry.history.faults import FaultRecord
from tests.support.faults import HBM_ECC, SENSOR_NOTE, record, table
from tests.support.http_doubles import serve

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
PLACED = """# TYPE npu_ge_instance_device gauge
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_0",device="3"} 1
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_1",device="1"} 1
npu_ge_instance_device{model="bert",version="1",instance="bert_0_0",device="3"} 1
"""


def snapshot() -> ServerSnapshot:
    models = tuple(ModelEntry(name, "1", ModelState.READY, "") for name in ("bert", "resnet"))
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=True, ready=True,
                          info=ServerInfo("triton", "2.51.0", ()), models=models)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FaultRecord]]:
    found: list[FaultRecord] = []
    asked: list[dict[str, object]] = []

    def fault_records(**kwargs: object) -> list[FaultRecord]:
        asked.append(kwargs)
        return list(found)

    monkeypatch.setattr(fault_rule, "fault_records", fault_records)
    monkeypatch.setattr(fault_report, "load_table", lambda override=None: table())
    yield found
    fresh_since = NOW.timestamp() - fault_rule.FRESH_S
    assert all(a["present_only"] and a["node"] == "" and a["since_s"] == fresh_since for a in asked)


def judged(records: Sequence[FaultRecord], recorded: list[FaultRecord],
           expected: Sequence[str] = ()) -> Verdict:
    recorded.extend(records)
    with serve(PLACED.encode()) as url:
        return assess(snapshot(), EvidenceSources(metrics_url=url, now=NOW), expected=expected)


def test_a_fault_that_needs_action_is_degraded_with_the_models_share_and_next_step(
        recorded: list[FaultRecord]) -> None:
    verdict = judged([record(3, HBM_ECC)], recorded)
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.NPU_FAULT]
    assert len(verdict.reasons) == 2
    assert verdict.headline.startswith(
        "DEGRADED: NPU 3: 0x80E18402 (RestartNPU, HBM multi-bit ECC error) hits bert (1 of 1 instance, "
        "none left: DOWN); resnet (1 of 2 instances) — give bert another device first, then drain and reset")
    fault, down = verdict.reasons
    assert "npu-smi set -t reset -i <NPU ID of device 3>" in fault.fix
    assert "drain NPU 3 of resnet" in fault.fix
    assert (down.model, down.text.split(":")[0]) == ("bert", "model 'bert' is DOWN whatever Triton says")


def test_an_expected_model_left_with_no_healthy_instance_makes_the_server_down(
        recorded: list[FaultRecord]) -> None:
    verdict = judged([record(3, HBM_ECC)], recorded, expected=["bert"])
    assert verdict.level is Level.DOWN and VerdictRule.NPU_FAULT_EXPECTED in verdict.rules
    assert verdict.reasons[-1].to_json()["level"] == "DOWN" and verdict.reasons[-1].model == "bert"


def test_a_not_handle_fault_is_a_note_and_the_server_stays_ok(recorded: list[FaultRecord]) -> None:
    verdict = judged([record(3, SENSOR_NOTE)], recorded)
    assert verdict.level is Level.OK and verdict.reasons == ()
    assert verdict.notes == ("NPU 3: 0x80CB8009 (NotHandleFault, sensor notice) hits bert (0 of 1 instance); "
                             "resnet (0 of 2 instances) — no action (shown, no action)",)


def test_no_recorded_fault_reads_nothing_else(recorded: list[FaultRecord]) -> None:
    verdict = assess(snapshot(), EvidenceSources(metrics_url="http://127.0.0.1:9/metrics", now=NOW))
    # the fault rule adds nothing; the closed metrics page is said once (no instance judged)
    assert verdict.level is Level.OK and [n.split(":")[0] for n in verdict.notes] == [
        "npu_ge's instance health is not judged"]
