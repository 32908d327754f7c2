"""Which models an NPU fault hits, how much capacity it took, and what to do: READS ONLY.

`assess_faults` classifies each fault record with the fault table and joins it with the
model <-> NPU map of its node (geadmin.telemetry.npu_map; for a fleet, one map per node label):

- a fault **counts** (needs action) when it is present and its level asks for more than
  watching (RestartRequest and above), or the chip is reported unhealthy whatever its code.
  NotHandleFault is shown, never alarmed; SubHealthFault is watched, not counted (its action
  is to watch the chip); an unknown code counts only on a chip reported unhealthy. A cleared
  fault is shown and never counts.
- each model on a faulted chip is a `ModelHit`: its instances on its server
  (`instances_total`) and those on the node's chips with a fault that counts
  (`instances_lost`, each instance once however many faults its chip has); a model with none
  left is DOWN whatever Triton says; the ensembles above it lose it too.
- each fault gets its plan (geadmin.diagnose.fault_plan).

ModelHit, StepKind and PlanStep are defined in fault_plan (the plan takes them) and exported
here with the report's types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from geadmin.diagnose.fault_plan import ModelHit, PlanInput, PlanStep, StepKind, plan
from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.npu_map import ModelMap
from geadmin.telemetry.sources.fault_table import FaultClass, FaultLevel, FaultTable
from geadmin.telemetry.sources.npu import NpuDevice

__all__ = ["ChipImpact", "FaultReport", "ModelHit", "PlanStep", "StepKind", "assess_faults",
           "counts_as_fault"]
WATCHED = (FaultLevel.NOT_HANDLE, FaultLevel.SUBHEALTH, FaultLevel.UNKNOWN)  # count only if unhealthy
SEVERITY = {level: rank for rank, level in enumerate(FaultLevel)} | {FaultLevel.UNKNOWN: 0}


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
    # The fault sources this report read now (SOURCE_*); None when it rests on recorded faults
    # (the verdict's). () means none answered: no fault can be ruled out, and nothing says OK.
    sources_read: tuple[str, ...] | None = None
    # A fleet's parts whose faults were not read (a discovery source down, a member that did not
    # answer): no fault there is ruled out, so the report is never OK while one is listed.
    unjudged: tuple[str, ...] = ()

    @property
    def unread(self) -> bool:
        """No source answered and nothing was recorded: the NPUs' state is unknown."""
        return self.sources_read == () and not self.impacts

    @property
    def partial(self) -> bool:
        """Some of the fleet was not read, and nothing read needs action or is down."""
        return bool(self.unjudged) and not self.needs_action and not self.unread

    @property
    def needs_action(self) -> bool:
        return any(i.counts and i.record.present for i in self.impacts)

    @property
    def models_down(self) -> tuple[str, ...]:
        return tuple(sorted({h.model for i in self.impacts if i.record.present for h in i.hits if h.down}))


def counts_as_fault(record: FaultRecord, cls: FaultClass) -> bool:
    """Present, and a level that needs action or a chip reported unhealthy whatever its code."""
    return record.present and (cls.level not in WATCHED or record.fault.healthy is False)


def assess_faults(records: Sequence[FaultRecord], table: FaultTable, maps: Mapping[str, ModelMap], *,
                  ensembles: Mapping[str, Sequence[str]] | None = None,
                  notes: Sequence[str] = (),
                  devices: Mapping[str, Sequence[NpuDevice]] | None = None) -> FaultReport:
    """Classify each record and join it with the model <-> NPU map of its node (`maps` keyed by
    ChipFault.node; "" for this host); `ensembles`: member -> the ensembles that use it;
    `devices`: node -> its NPUs (the reset command's NPU/Chip IDs, the move's HBM check). Pure.
    A fault on a node with no map hits no model, and a note says so."""
    classes = [table.classify(r.fault.code, r.fault.source) for r in records]
    counting = [counts_as_fault(r, c) for r, c in zip(records, classes, strict=True)]
    faulted: dict[str, set[int]] = {}
    for record, counts in zip(records, counting, strict=True):
        if counts:
            faulted.setdefault(record.fault.node, set()).add(record.fault.chip)
    said, unmapped = list(notes), set()
    impacts = []
    for record, cls, counts in zip(records, classes, counting, strict=True):
        node = record.fault.node
        found = maps.get(node)
        if found is None and node not in unmapped:
            unmapped.add(node)
            said.append(f"no model map for {node or 'this host'}: the models its faults hit are not known")
        hits = _hits(record.fault.chip, found, frozenset(faulted.get(node, ())), ensembles or {})
        given = PlanInput(record, cls, counts, hits, frozenset(faulted.get(node, ())),
                          tuple((devices or {}).get(node, ())), _holders(found))
        impacts.append(ChipImpact(record, cls, counts, hits, plan(given)))
    impacts.sort(key=lambda i: (not (i.counts and i.record.present), not i.record.present,
                                -SEVERITY[i.cls.level], i.record.fault.node, i.record.fault.chip))
    return FaultReport(tuple(impacts), tuple(said))


def _hits(chip: int, found: ModelMap | None, faulted: frozenset[int],
          ensembles: Mapping[str, Sequence[str]]) -> tuple[ModelHit, ...]:
    if found is None:
        return ()
    hits = []
    for model in found.models_on(chip):
        rows = [r for r in found.rows if r.model == model]
        hits.append(ModelHit(model, sum(r.instances for r in rows),
                             sum(r.instances for r in rows if r.device in faulted),
                             tuple(sorted(set(ensembles.get(model, ())))),
                             tuple(sorted({r.device for r in rows})),
                             sum(r.instances for r in rows if r.device == chip)))
    return tuple(hits)


def _holders(found: ModelMap | None) -> dict[int, tuple[str, ...]]:
    if found is None:
        return {}
    return {device: found.models_on(device) for device in sorted({r.device for r in found.rows})}
