"""`geadmin tune --objective MODEL_A MODEL_B ...` / `--npu N`: tune the models that share an NPU
together, then apply the joint choice one model at a time.

Steps (`tune_jointly`):

1. where every model runs: the model <-> NPU map (`geadmin.telemetry.npu_map`: npu_ge's
   placements, then the configs' device_ids); `--npu N` names the models it places on N;
2. each device's HBM is read once, before any trial loads (npu_ge's device metrics on
   Triton's /metrics, `geadmin.ops.tune.memory.device_hbm`);
3. each model's objective search runs in turn (the next starting once the devices hold no more
   than in step 2: the last trial copy's memory is back), as `geadmin tune MODEL --objective` does (its
   own trial copy, locks, journal, saved run and audit row); nothing is applied;
4. the room on each device is the free HBM of step 2 plus what the tuned models' live
   instances hold there (measured per instance by each search); every trial meeting its
   model's objective is an option, and `geadmin.ops.tune.joint.choose` picks one per model.

`apply_joint` then hands each pick to the tuner's guarded safe apply
(`geadmin.ops.tune.apply.apply_winner`: on the server the run measured, only while the file
is the one its run started from, validated, rolled back if it does not load), one model at a
time, stopping at the first that fails; one audit row says which were applied, which failed
and why, and which were not tried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError, InvalidArgumentError, TuneRefusedError
from geadmin.ops.tune.apply import apply_winner
from geadmin.ops.tune.joint import MAX_COMBINATIONS, JointChoice, choose
from geadmin.ops.tune.memory import MIB, device_hbm
from geadmin.ops.tune.objective import ObjectivePlan, shortfall, tune_to_objective
from geadmin.ops.tune.outcome import Trial, TuneResult
from geadmin.ops.tune.results import load_run
from geadmin.ops.tune.search import Progress, candidate_text
from geadmin.ops.tune.trials import ACTION
from geadmin.repository import store
from geadmin.telemetry.npu_map import ModelMap, loaded_npu_ge_configs, model_map
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import scrape
from geadmin.triton.client import TritonClient

MAX_MODELS = 8
RELEASE_S = 10.0  # the longest wait for a trial copy's NPU memory to show as free again


@dataclass(frozen=True)
class JointRun:
    results: tuple[TuneResult, ...]
    plans: tuple[ObjectivePlan, ...]
    devices: dict[str, tuple[int, ...]]  # model -> the devices it runs on
    room: dict[int, int]  # device -> bytes the tuned models may hold there
    choice: JointChoice

    def to_json(self) -> dict[str, Any]:
        return {"kind": "joint", "runs": {r.model: r.id for r in self.results},
                "devices": {m: list(d) for m, d in self.devices.items()},
                "room_bytes": {str(d): b for d, b in self.room.items()}, "fits": self.choice.fits,
                "missing": list(self.choice.missing), "headline": self.choice.describe(),
                "picks": [{"model": p.model, "run": self.run_of(p.model).id, **p.trial.to_json()}
                          for p in self.choice.picks],
                "examined": self.choice.examined, "combinations": self.choice.total}

    def run_of(self, model: str) -> TuneResult:
        return next(r for r in self.results if r.model == model)


def placement(client: TritonClient, metrics_url: str | None) -> ModelMap:
    """The model <-> NPU map: npu_ge's placements on `metrics_url`, then the configs."""
    devices = []
    if metrics_url:
        try:
            devices = devices_from_triton(scrape(metrics_url, timeout_s=5.0))
        except GeAdminError:
            devices = []
    placed = {p.model for d in devices for p in d.models or ()}
    return model_map(devices, loaded_npu_ge_configs(client, skip=placed))


def models_on_npu(found: ModelMap, device: int) -> tuple[str, ...]:
    """The models `found` places on `device`; InvalidArgumentError when none."""
    models = found.models_on(device)
    if not models:
        raise InvalidArgumentError(f"the model <-> NPU map places no model on device {device} "
                                   "(geadmin npu shows the map)")
    return models


def options(result: TuneResult, plan: ObjectivePlan) -> list[Trial]:
    """Every trial of `result` that met the objective at the plan's rate."""
    rate = plan.rate_rps
    return [t for t in result.trials if t.rate_rps == rate and not shortfall(t, plan.objective, rate)]


def live_hold(result: TuneResult) -> int:
    """The bytes the live model's instances hold (per instance as the search measured it)."""
    per_instance = next((t.memory_bytes // max(t.candidate.instances, 1) for t in result.trials
                         if t.memory_bytes), 0)
    return per_instance * max(result.live.instances, 0)


def released(metrics_url: str, before: dict[int, tuple[int, int]], timeout_s: float = RELEASE_S) -> bool:
    """Wait until every device holds no more than before the run (the last model's trial copy has
    given its memory back, and npu_ge's device metrics say so): the next model's search measures
    one instance's memory against what its devices held before it; False when time ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = device_hbm(metrics_url)
        if all(now.get(d, (0, 0))[0] <= used + MIB for d, (used, _) in before.items()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def tune_jointly(client: TritonClient, repository: Path, plans: Sequence[ObjectivePlan], *, auth: object,
                 home: Path | None = None, budget_s: float = 180.0, metrics_url: str | None = None,
                 progress: Progress | None = None, cancel: threading.Event | None = None,
                 admin_key: str | None = None, limit: int = MAX_COMBINATIONS) -> JointRun:
    """Steps 1-4 of the module docstring; nothing applied."""
    require(auth, GuardedAction.TUNE)
    models = [p.load.model for p in plans]
    if len(set(models)) != len(models) or not 1 <= len(models) <= MAX_MODELS:
        raise InvalidArgumentError(f"joint tuning takes 1 to {MAX_MODELS} different models, got "
                                   f"{', '.join(models) or 'none'}")
    found = placement(client, metrics_url)
    devices = {m: found.devices_of(m) for m in models}
    before = device_hbm(metrics_url) if metrics_url else {}
    say = progress or (lambda text: None)
    results: list[TuneResult] = []
    for plan in plans:
        if results and metrics_url:
            released(metrics_url, before)
        say(f"tuning {plan.load.model} ({len(results) + 1} of {len(plans)})")
        results.append(tune_to_objective(client, repository, plan, auth=auth, home=home, budget_s=budget_s,
                                         progress=say, cancel=cancel, admin_key=admin_key,
                                         metrics_url=metrics_url))
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
    room = {d: total - used for d, (used, total) in before.items()}
    for result in results:
        for device in devices[result.model]:
            if device in room:
                room[device] += live_hold(result)
    meeting = {r.model: options(r, p) for r, p in zip(results, plans, strict=True)}
    return JointRun(tuple(results), tuple(plans), devices, room, choose(meeting, devices, room, limit=limit))


@dataclass(frozen=True)
class JointApply:
    applied: tuple[str, ...]
    failed: str  # the model whose apply failed ("" when none did)
    reason: str
    not_tried: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failed

    def describe(self) -> str:
        parts = [f"applied: {', '.join(self.applied) or 'none'}"]
        if self.failed:
            parts.append(f"{self.failed} failed: {self.reason}")
            parts.append(f"not tried: {', '.join(self.not_tried) or 'none'}")
        return "; ".join(parts)


def apply_joint(client: TritonClient, repository: Path, joint: JointRun, *, auth: object,
                home: Path | None = None) -> JointApply:
    """Each pick through `apply_winner`, one model at a time, stopping at the first failure;
    TuneRefusedError (nothing applied) when the choice does not fit. Audited in one row."""
    who = require(auth, GuardedAction.APPLY)
    assert isinstance(auth, Authorization)
    if not joint.choice.fits:
        raise TuneRefusedError(f"nothing applied: {joint.choice.describe()}")
    picks = list(joint.choice.picks)
    applied: list[str] = []
    failed = reason = ""
    for pick in picks:
        result = joint.run_of(pick.model)
        try:
            live = store.read_config(repository, pick.model)
            run = dict(load_run(result.id or 0, home=home), best=pick.trial.to_json(),
                       best_text=candidate_text(live.text, pick.trial.candidate))
            outcome = apply_winner(client, repository, run, auth=auth, home=home)
        except GeAdminError as exc:
            failed, reason = pick.model, str(exc).splitlines()[0]
            break
        if not outcome.ok:
            failed, reason = pick.model, outcome.message.splitlines()[0]
            break
        applied.append(pick.model)
    rest = tuple(p.model for p in picks[len(applied) + bool(failed):])
    done = JointApply(tuple(applied), failed, reason, rest)
    runs = ", ".join(str(r.id) for r in joint.results)
    audit.record_action(ACTION, "+".join(p.model for p in picks), done.ok,
                        f"joint apply of tuning runs {runs}: {done.describe()}", server=client.url, actor=who,
                        home=home)
    return done
