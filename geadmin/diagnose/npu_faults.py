"""Which models an NPU fault hits, how much capacity it took, and what to do: READS ONLY.

CONTRACT (lead, start of round): the types below are fixed; helper `faults-impact` implements
`assess_faults` (the join of fault records with the model <-> NPU map, per node for fleets)
and `geadmin.diagnose.fault_plan` (a plan per level). Other helpers code against the types.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.npu_map import ModelMap
from geadmin.telemetry.sources.fault_table import FaultClass, FaultTable


@dataclass(frozen=True)
class ModelHit:
    """One model's instances on a faulted chip."""

    model: str
    instances_total: int  # the model's instances on every chip of its server
    instances_lost: int  # those on faulted chips that count as faults
    ensembles: tuple[str, ...] = ()  # ensembles above it, which lose it too

    @property
    def left(self) -> int:
        return max(self.instances_total - self.instances_lost, 0)

    @property
    def down(self) -> bool:
        """No healthy instance left: the model is DOWN whatever Triton says."""
        return self.instances_total > 0 and self.left == 0


class StepKind(str, enum.Enum):
    NONE = "none"  # NotHandleFault: shown, no action
    WATCH = "watch"  # subhealth: watch the chip
    RELOAD = "reload"  # restart the business: reload the affected instances
    DRAIN = "drain"  # reset levels, first: a config without the device (safe apply / rollout)
    RESET = "reset"  # reset levels, then: the npu-smi command, printed for the operator
    MOVE = "move"  # separate levels: move the instances off the chip (memory checked)


@dataclass(frozen=True)
class PlanStep:
    kind: StepKind
    text: str  # one line, what and why
    model: str = ""  # the model it changes ("" for chip-wide steps)
    command: str = ""  # a command printed for the operator (never run by geadmin)
    changes: bool = False  # True: runs through a guarded, audited action when applied


@dataclass(frozen=True)
class ChipImpact:
    """One fault on one chip, classified, with the models it hits and the plan."""

    record: FaultRecord
    cls: FaultClass
    counts: bool  # counts as a fault: a level that needs action, or the chip is unhealthy
    hits: tuple[ModelHit, ...] = ()
    plan: tuple[PlanStep, ...] = ()


@dataclass(frozen=True)
class FaultReport:
    impacts: tuple[ChipImpact, ...] = ()
    notes: tuple[str, ...] = ()  # sources that could not be read, unplaced models

    @property
    def needs_action(self) -> bool:
        return any(i.counts and i.record.present for i in self.impacts)

    @property
    def models_down(self) -> tuple[str, ...]:
        return tuple(sorted({h.model for i in self.impacts if i.record.present for h in i.hits if h.down}))


def assess_faults(records: Sequence[FaultRecord], table: FaultTable, maps: Mapping[str, ModelMap], *,
                  ensembles: Mapping[str, Sequence[str]] | None = None,
                  notes: Sequence[str] = ()) -> FaultReport:
    """Classify each record and join it with the model <-> NPU map of its node (`maps` keyed by
    ChipFault.node; "" for this host); `ensembles`: member -> the ensembles that use it. Pure."""
    raise NotImplementedError  # faults-impact
