"""The next safe steps for one NPU fault, per level: a dry run, READS ONLY.

What each level of the fault table (geadmin.telemetry.sources.fault_table) asks of an inference
server, mildest first:

- NotHandleFault: nothing (the fault is shown, never alarmed); a cleared fault: nothing.
- SubHealthFault, and an unknown code on a chip not reported unhealthy: watch the chip.
- RestartRequest / RestartBusiness: reload the affected models (their instances restart); with
  no model on the chip, watch it (there is nothing to reload).
- FreeRestartNPU / RestartNPU, and any other level on a chip reported unhealthy: drain first
  (a config without the device, through the safe apply; for a fleet member, a rollout limited
  to its node), then the chip's reset, `npu-smi set -t reset -i <NPU ID> -c <Chip ID>` (Huawei's
  npu-smi reference, "复位芯片": out-of-band reset of one chip; never while it serves; wait at
  least 20 s before querying it again). geadmin prints that command; it never runs it.
- SeparateNPU: move the instances off the chip for good (new device_ids without it), checked
  against the free HBM of the devices that take them, the way the tuner's memory check
  (geadmin.ops.tune.memory) refuses a trial that would not fit: one instance's HBM is measured
  (here: the faulted chip's used HBM shared by its instances), never guessed; without figures
  the step says the memory was not checked. With no model on the chip: keep it out of service.

A step that changes something (`PlanStep.changes`) runs only through the guarded, audited
actions (geadmin.ops.npu); here it is only described.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.sources.fault_table import FaultClass, FaultLevel
from geadmin.telemetry.sources.npu import NpuDevice

MIB = 1 << 20
RESTART_LEVELS = (FaultLevel.RESTART_REQUEST, FaultLevel.RESTART_BUSINESS)
RESET_LEVELS = (FaultLevel.FREE_RESTART_NPU, FaultLevel.RESTART_NPU)


@dataclass(frozen=True)
class ModelHit:
    """One model's instances on a faulted chip."""

    model: str
    instances_total: int  # the model's instances on every chip of its server
    instances_lost: int  # those on faulted chips that count as faults
    ensembles: tuple[str, ...] = ()  # ensembles above it, which lose it too
    devices: tuple[int, ...] = ()  # every device the model runs on (its server's map)
    on_chip: int = 0  # its instances on this chip

    @property
    def left(self) -> int:
        return max(self.instances_total - self.instances_lost, 0)

    @property
    def down(self) -> bool:
        """No healthy instance left: the model is DOWN whatever Triton says."""
        return self.instances_total > 0 and self.left == 0

    @property
    def share(self) -> str:
        """"1 of 2 instances lost" — what the first lines say."""
        return f"{self.instances_lost} of {self.instances_total} instance(s) lost"


class StepKind(str, enum.Enum):
    NONE = "none"  # NotHandleFault: shown, no action
    WATCH = "watch"  # subhealth: watch the chip
    RELOAD = "reload"  # restart the business: reload the affected instances
    DRAIN = "drain"  # reset levels, first: a config without the device (safe apply / rollout)
    RESET = "reset"  # reset levels, then: the npu-smi command, printed for the operator
    MOVE = "move"  # separate levels: move the instances off the chip (memory checked)
    SEPARATE = "separate"  # separate levels, no model on the chip: keep it out of service (said only)


@dataclass(frozen=True)
class PlanStep:
    kind: StepKind
    text: str  # one line, what and why
    model: str = ""  # the model it changes ("" for chip-wide steps)
    command: str = ""  # a command printed for the operator (never run by geadmin)
    changes: bool = False  # True: runs through a guarded, audited action when applied
    device_ids: tuple[int, ...] = ()  # DRAIN / MOVE: the model's device_ids after the step


@dataclass(frozen=True)
class PlanInput:
    """What the plan of one fault rests on (built by `assess_faults`)."""

    record: FaultRecord
    cls: FaultClass
    counts: bool
    hits: Sequence[ModelHit]
    faulted: frozenset[int]  # every chip of the node with a present fault that counts
    devices: Sequence[NpuDevice] = ()  # the node's devices (NPU/Chip IDs, HBM), when known
    holders: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # device -> models on it


def plan(given: PlanInput) -> tuple[PlanStep, ...]:
    """The steps for one fault, mildest level first; see the module docstring."""
    fault, level = given.record.fault, given.cls.level
    chip = f"NPU {fault.chip}" + (f" on node {fault.node}" if fault.node else "")
    if not given.record.present:
        return (PlanStep(StepKind.NONE, f"{chip}: cleared, nothing to do"),)
    if not given.counts:
        if level is FaultLevel.NOT_HANDLE:
            return (PlanStep(StepKind.NONE, f"{chip}: no impact on inference (NotHandleFault); no action"),)
        why = "subhealth" if level is FaultLevel.SUBHEALTH else "a code the fault table does not list, " \
            "the chip not reported unhealthy"
        return (PlanStep(StepKind.WATCH, f"watch {chip}: {why}; if it repeats or the chip turns "
                         "unhealthy, drain it"),)
    if level in RESTART_LEVELS:
        return _reload(given, chip)
    if level is FaultLevel.SEPARATE_NPU:
        return _move(given, chip)
    return _drain_and_reset(given, chip)


def _reload(given: PlanInput, chip: str) -> tuple[PlanStep, ...]:
    if not given.hits:  # nothing to reload: the fault counts, so the chip is watched
        return (PlanStep(StepKind.WATCH, f"watch {chip}: {given.cls.level.value} with no model on it, "
                         "nothing to reload; if it repeats or the chip turns unhealthy, drain and reset it"),)
    return tuple(PlanStep(StepKind.RELOAD, f"reload {h.model}: {given.cls.level.value} restarts its "
                          f"instance(s) on {chip}", h.model, changes=True) for h in given.hits)


def _drain_and_reset(given: PlanInput, chip: str) -> tuple[PlanStep, ...]:
    fault = given.record.fault
    how = f"a rollout limited to node {fault.node}" if fault.node else "the safe apply"
    steps = []
    for hit in given.hits:
        kept = tuple(d for d in hit.devices if d not in given.faulted)
        if kept:
            text = (f"drain {chip} of {hit.model}: device_ids {_ids(kept)} (without {fault.chip}) "
                    f"through {how}")
        else:
            text = (f"drain {chip} of {hit.model}: it has no other healthy device, so draining leaves it "
                    f"with no instance; give it another device first (device_ids) or unload it")
        steps.append(PlanStep(StepKind.DRAIN, text, hit.model, changes=True, device_ids=kept))
    why = "the chip is reported unhealthy" if given.cls.level not in RESET_LEVELS else given.cls.level.value
    command = reset_command(fault.chip, given.devices)
    if steps:
        text = (f"then reset {chip} ({why}) — run by you, once nothing runs on it; wait 20 s before reading "
                "it again, then put the devices back (geadmin config rollback MODEL)")
    else:  # nothing to drain: the reset is the first step
        text = f"reset {chip} ({why}) — run by you; no model runs on it; wait 20 s before reading it again"
    steps.append(PlanStep(StepKind.RESET, text, command=command))
    return tuple(steps)


def reset_command(chip: int, devices: Sequence[NpuDevice]) -> str:
    """npu-smi's reset of one chip: `-i` takes the NPU ID (`npu-smi info -l`), `-c` the Chip ID
    (`npu-smi info -m`), not the device id ACL uses; unknown here, they are left to fill in."""
    found = next((d for d in devices if d.id == chip), None)
    if found is not None and found.npu_id is not None and found.chip_id is not None:
        return f"npu-smi set -t reset -i {found.npu_id} -c {found.chip_id}"
    return f"npu-smi set -t reset -i <NPU ID of device {chip}> -c <Chip ID of device {chip}>"


def _move(given: PlanInput, chip: str) -> tuple[PlanStep, ...]:
    fault = given.record.fault
    by_id = {d.id: d for d in given.devices}
    here = sum(h.on_chip for h in given.hits) or 1
    used = by_id[fault.chip].hbm_used_bytes if fault.chip in by_id else None
    per_instance = used // here if used else None
    steps = []
    for hit in given.hits:
        targets = tuple(d for d in hit.devices if d not in given.faulted) or _spare(given, by_id)
        if not targets:
            steps.append(PlanStep(StepKind.MOVE, f"move {hit.model} off {chip}: no healthy NPU left to take "
                                  "it; unload it or add an NPU", hit.model))
            continue
        verdict = _fits(hit, targets, given, per_instance)
        fits = not verdict.startswith("does not fit")
        steps.append(PlanStep(StepKind.MOVE, f"move {hit.model} off {chip} for good: device_ids "
                              f"{_ids(targets)}; {verdict}", hit.model, changes=fits, device_ids=targets))
    return tuple(steps) or (PlanStep(StepKind.SEPARATE, f"keep {chip} out of service: no model runs on it; "
                                     "leave it out of every config's device_ids until it is repaired"),)


def _spare(given: PlanInput, by_id: Mapping[int, NpuDevice]) -> tuple[int, ...]:
    """A healthy device of the node to take a model that ran only on the faulted chip: the one
    with the most free HBM."""
    healthy = [d for i, d in by_id.items() if i not in given.faulted]
    free = [(d.hbm_total_bytes - d.hbm_used_bytes, -d.id) for d in healthy
            if d.hbm_total_bytes is not None and d.hbm_used_bytes is not None]
    return (-max(free)[1],) if free else ()


def _fits(hit: ModelHit, targets: Sequence[int], given: PlanInput, per_instance: int | None) -> str:
    """Triton loads the new config before it unloads the old (as the tuner's check assumes): each
    target needs room for its share of all the model's instances beside what it holds now."""
    if per_instance is None:
        return "memory not checked: no HBM figures for the faulted chip"
    each = per_instance * math.ceil(max(hit.instances_total, 1) / len(targets))
    short = []
    for device in targets:
        d = next((x for x in given.devices if x.id == device), None)
        if d is None or d.hbm_total_bytes is None or d.hbm_used_bytes is None:
            return f"memory not checked: no HBM figures for NPU {device}"
        free = d.hbm_total_bytes - d.hbm_used_bytes
        if each > free:
            short.append(f"NPU {device} has {free / MIB:.0f} MiB free, it needs about {each / MIB:.0f} MiB")
    if short:
        holders = sorted({m for t in targets for m in given.holders.get(t, ()) if m != hit.model})
        what = f"unload {', '.join(holders)} from them" if holders else "free memory on them"
        return "does not fit: " + "; ".join(short) + f" — {what} first, or run fewer instances"
    return f"fits: about {per_instance / MIB:.0f} MiB per instance"


def _ids(devices: Sequence[int]) -> str:
    return ",".join(map(str, devices)) if devices else "(none)"
