"""FaultReport values built by hand, for the faces (watcher, exporter, remedy, pages) to be
tested on their own: each is a real value of the contract types in geadmin.diagnose.npu_faults,
with the plan and the hits a test names, never a double of a server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geadmin.diagnose.npu_faults import ChipImpact, FaultReport, ModelHit, PlanStep, StepKind
from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.sources.fault_table import FaultClass, FaultLevel
from geadmin.telemetry.sources.npu_faults import SOURCE_EXPORTER, ChipFault
from tests.support.samples import ANSWERING_EXECUTE, add_python_model

HBM_ECC = 0x80E01801  # a code the impact tests treat as RestartNPU (what the table says is faults-core's)
NOT_HANDLE = 0x80E21007  # NotHandleFault in MindCluster's and ModelArts' tables (FACTS.md)


def impact(chip: int, code: int | None, level: FaultLevel, *, node: str = "", present: bool = True,
           counts: bool | None = None, hits: Sequence[ModelHit] = (), plan: Sequence[PlanStep] = (),
           healthy: bool | None = None, first_s: float = 1_000.0, last_s: float = 2_000.0) -> ChipImpact:
    fault = ChipFault(chip, code, SOURCE_EXPORTER, node=node, healthy=healthy)
    cls = FaultClass(code, level, f"meaning of {level.value}", f"for inference: {level.value}",
                     f"action for {level.value}", "test table")
    counted = level is not FaultLevel.NOT_HANDLE if counts is None else counts
    return ChipImpact(FaultRecord(fault, first_s, last_s, present), cls, counted, tuple(hits), tuple(plan))


def report(*impacts: ChipImpact, notes: Sequence[str] = ()) -> FaultReport:
    return FaultReport(tuple(impacts), tuple(notes))


def drain_plan(model: str, chip: int) -> tuple[PlanStep, ...]:
    """What a reset level's plan says: drain the model, then the reset command for the operator."""
    return (PlanStep(StepKind.DRAIN, f"take chip {chip} out of {model}'s device_ids", model=model,
                     changes=True),
            PlanStep(StepKind.RESET, f"reset chip {chip}", command=f"npu-smi set -t reset -i {chip} -c 0"))


def add_device_model(repository: Path, name: str, device_ids: str) -> Path:
    """A python model that answers, with two instances and `device_ids` in its config (a comment
    above it): it stands for an npu_ge model in the remedy tests — the python backend ignores
    the parameter, Triton serves and reports it, so an apply or a reload of it is real."""
    model = add_python_model(repository, name)
    (model / "1" / "model.py").write_text((model / "1" / "model.py").read_text() + ANSWERING_EXECUTE)
    config = model / "config.pbtxt"
    config.write_text(config.read_text()
                      + "# the NPUs of this model's instances\n"
                      + f'parameters {{ key: "device_ids" value {{ string_value: "{device_ids}" }} }}\n'
                      + "instance_group [{ count: 2 kind: KIND_CPU }]\n")
    return model
