"""Models that share an NPU, tuned together under its memory: the joint choice.

Each model's objective search (`geadmin.ops.tune.objective`) gives every trial it measured;
the ones meeting the model's objective at its recorded peak are its options, each with the
NPU memory it was measured to hold (`Trial.memory_bytes`). `choose` picks ONE option per
model so that, on every device the models share, the sum of their options' memory fits the
room there (`room`: the HBM free before the run plus what the tuned models' live instances
hold, which the winners replace). Among the combinations that fit: the fewest instances in
total, then the least memory in total, then the smaller max_batch_size and the lower p99 in
total.

The search is exhaustive over the product of the options (each model's options ordered best
first), up to `MAX_COMBINATIONS`: beyond that the rest is not looked at and the choice says
it was cut. Nothing fits: the closest combination (the least memory over the room, summed
over the devices) is named with each short device, the models on it, and by how much. A
model without an option meeting its objective: no choice, and it is named.

A model's memory counts on every device it runs on (the per-instance figure is what one
device grew by); memory not measured (no npu_ge device metrics) counts as 0, and a device
whose HBM is unknown is not checked: `JointChoice.unchecked` says which.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from geadmin.ops.tune.memory import MIB
from geadmin.ops.tune.outcome import Trial

MAX_COMBINATIONS = 4096


@dataclass(frozen=True)
class Pick:
    model: str
    trial: Trial

    @property
    def memory_bytes(self) -> int:
        return self.trial.memory_bytes or 0


@dataclass(frozen=True)
class Shortage:
    device: int
    need_bytes: int  # what the combination's models need there
    room_bytes: int
    holders: tuple[tuple[str, int], ...]  # (model, bytes) on the device

    def describe(self) -> str:
        held = " + ".join(f"{model} {amount / MIB:.0f} MiB" for model, amount in self.holders)
        return (f"device {self.device} is short by {(self.need_bytes - self.room_bytes) / MIB:.0f} MiB: "
                f"{held} = {self.need_bytes / MIB:.0f} MiB, and {self.room_bytes / MIB:.0f} MiB is there "
                "(free before the run + what the live models hold)")


@dataclass(frozen=True)
class JointChoice:
    picks: tuple[Pick, ...]  # the choice (fits), or the closest combination (not fits); () when missing
    fits: bool
    shortages: tuple[Shortage, ...] = ()  # the closest combination's short devices
    missing: tuple[str, ...] = ()  # models with no trial meeting their objective
    examined: int = 0
    total: int = 0  # combinations there were
    unchecked: tuple[int, ...] = ()  # devices the models run on whose HBM is unknown

    @property
    def cut(self) -> bool:
        return self.examined < self.total

    def describe(self) -> str:
        if self.missing:
            return (f"no joint choice: {', '.join(self.missing)} met its objective in no trial, so no "
                    "combination meets every objective")
        chosen = "; ".join(f"{p.model}: {p.trial.candidate.describe()} ({p.memory_bytes / MIB:.0f} MiB)"
                           for p in self.picks)
        if self.fits:
            text = (f"joint choice: {chosen} — {sum(p.trial.candidate.instances for p in self.picks)} "
                    f"instances, {sum(p.memory_bytes for p in self.picks) / MIB:.0f} MiB in total")
        else:
            text = (f"no combination fits: {'; '.join(s.describe() for s in self.shortages)}; "
                    f"the closest: {chosen}")
        if self.cut:
            text += (f" (cut: {self.examined} of {self.total} combinations examined, best options of each "
                     "model first)")
        if self.unchecked:
            text += f" (HBM unknown on device(s) {', '.join(map(str, self.unchecked))}: not checked there)"
        unmeasured = [p.model for p in self.picks if p.trial.memory_bytes is None]
        if unmeasured:
            text += f" (NPU memory not measured for {', '.join(unmeasured)}: counted as 0)"
        return text


def _order(trial: Trial) -> tuple[int, int, int, float]:
    return (trial.candidate.instances, trial.memory_bytes or 0, trial.candidate.max_batch_size,
            trial.p99_ms or 0.0)


def choose(options: Mapping[str, Sequence[Trial]], devices: Mapping[str, Sequence[int]],
           room: Mapping[int, int], *, limit: int = MAX_COMBINATIONS) -> JointChoice:
    """One option per model (see the module docstring). `options`: model -> its trials meeting
    its objective; `devices`: model -> the devices it runs on; `room`: device -> bytes."""
    missing = tuple(model for model, found in options.items() if not found)
    used = sorted({d for model in options for d in devices.get(model, ())})
    unchecked = tuple(d for d in used if d not in room)
    if missing:
        return JointChoice((), False, missing=missing, unchecked=unchecked)
    models = list(options)
    ordered = [sorted(options[m], key=_order) for m in models]
    total = 1
    for found in ordered:
        total *= len(found)
    best: tuple[tuple[object, ...], tuple[Trial, ...]] | None = None
    closest: tuple[tuple[object, ...], tuple[Trial, ...], tuple[Shortage, ...]] | None = None
    examined = 0
    for combination in itertools.islice(itertools.product(*ordered), max(limit, 1)):
        examined += 1
        key = tuple(sum(values) for values in zip(*(_order(t) for t in combination), strict=True))
        short = _shortages(models, combination, devices, room)
        if not short:
            if best is None or key < best[0]:
                best = (key, combination)
        elif best is None:
            over = sum(s.need_bytes - s.room_bytes for s in short)
            if closest is None or (over, *key) < closest[0]:
                closest = ((over, *key), combination, short)
    if best is not None:
        return JointChoice(_picks(models, best[1]), True, examined=examined, total=total, unchecked=unchecked)
    assert closest is not None
    return JointChoice(_picks(models, closest[1]), False, closest[2], examined=examined, total=total,
                       unchecked=unchecked)


def _picks(models: list[str], combination: Sequence[Trial]) -> tuple[Pick, ...]:
    return tuple(Pick(model, trial) for model, trial in zip(models, combination, strict=True))


def _shortages(models: list[str], combination: Sequence[Trial], devices: Mapping[str, Sequence[int]],
               room: Mapping[int, int]) -> tuple[Shortage, ...]:
    holders: dict[int, list[tuple[str, int]]] = {}
    for model, trial in zip(models, combination, strict=True):
        for device in devices.get(model, ()):
            holders.setdefault(device, []).append((model, trial.memory_bytes or 0))
    short = []
    for device, held in sorted(holders.items()):
        need = sum(amount for _, amount in held)
        if device in room and need > room[device]:
            short.append(Shortage(device, need, room[device], tuple(held)))
    return tuple(short)
