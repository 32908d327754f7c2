"""A faulted chip's plan (`geadmin.diagnose.fault_plan`), run step by step: dry run first.

`apply_plan(impact, authorization, dry_run=True)` says what each step would do and changes
nothing (no audit row, no write, no load: reading the model's config from the repository is
all). With `dry_run=False`:

1. Before anything, the authorization must cover every action the plan's changing steps need
   (RELOAD: reload; DRAIN / MOVE: apply), else NotAuthorizedError. A fault that has cleared
   since the plan was made changes nothing (each step says so).
2. RELOAD reloads the model through the guarded, checked model actions
   (`geadmin.ops.models.actions.run_action`).
3. DRAIN and MOVE write the model's config with `device_ids` without the faulted chip through
   the safe apply (`geadmin.ops.models.apply.apply_config`: validated, atomic, rolled back when
   Triton rejects it), its audit row prefixed with the fault. A config without `device_ids`
   (the backend's default devices) or whose only device is the faulted chip is refused with
   the reason, never guessed. MOVE first checks the other devices' free HBM against what the
   faulted chip holds (npu_ge's device metrics on Triton's /metrics, as the tuner's memory
   check reads them); without those metrics it says it did not check.
4. RESET, WATCH and NONE are only said: the reset command is printed for the operator, never run.

Every changing step gets its own audit row (action `npu-remedy`) naming the fault: the chip,
the node, the code and its level.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.diagnose.npu_faults import ChipImpact, FaultReport, PlanStep, StepKind
from geadmin.errors import GeAdminError, InvalidArgumentError, WorkspaceDatabaseError
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.ops.npu.devices import drained_config, move_refusal
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource

AUDIT_ACTION = "npu-remedy"
CLEARED = "the fault has cleared since the plan was made: nothing changed (read the faults again)"
NEEDS: dict[StepKind, GuardedAction] = {StepKind.RELOAD: GuardedAction.RELOAD,
                                        StepKind.DRAIN: GuardedAction.APPLY,
                                        StepKind.MOVE: GuardedAction.APPLY}


class RemedyState(str, enum.Enum):
    SAID = "said"  # printed for the operator (NONE, WATCH, RESET): geadmin never runs it
    WOULD = "would"  # a dry run: what the step would change
    DONE = "done"  # changed, and checked
    FAILED = "failed"  # tried; the change did not take (the apply put the previous config back)
    REFUSED = "refused"  # not tried: the reason is in the message


AUDIT_RESULTS = {RemedyState.DONE: Result.OK, RemedyState.FAILED: Result.FAILED}


@dataclass(frozen=True)
class RemedyOutcome:
    step: PlanStep
    state: RemedyState
    message: str

    @property
    def ok(self) -> bool:
        return self.state not in (RemedyState.FAILED, RemedyState.REFUSED)

    def record(self) -> dict[str, Any]:
        """For `--json`."""
        return {"kind": self.step.kind.value, "model": self.step.model, "text": self.step.text,
                "command": self.step.command, "state": self.state.value, "ok": self.ok,
                "message": self.message}


def fault_named(impact: ChipImpact) -> str:
    """The fault in one phrase, as every audit row of its remedy names it."""
    fault = impact.record.fault
    where = f"chip {fault.chip}" + (f" of node {fault.node}" if fault.node else "")
    return f"NPU fault on {where} (code {fault.code_hex}, level {impact.cls.level.value})"


def apply_plan(impact: ChipImpact, authorization: Authorization | None, *, dry_run: bool = True,
               client: TritonClient | None = None, repository: Path | None = None, home: Path | None = None,
               log: LogSource | None = None, metrics_url: str | None = None) -> list[RemedyOutcome]:
    """Each step of `impact.plan`, in order (see the module docstring). `client` and `repository`:
    the server the chip's models run on and its model repository (needed by changing steps)."""
    changing = [s for s in impact.plan if s.kind in NEEDS]
    actor: Actor | None = None
    if not dry_run:
        for action in sorted({NEEDS[s.kind] for s in changing}, key=lambda a: a.value):
            actor = require(authorization, action)
        if changing and (client is None or repository is None):
            raise InvalidArgumentError("applying the plan needs the server the chip's models run on and its "
                                       "model repository (--url/--server and --repository)")
    job = _Remedy(impact, dry_run, client, repository, home, log, metrics_url, authorization, actor)
    return [job.step(step) for step in impact.plan]


@dataclass(frozen=True)
class ChipRemedy:
    """One fault of the chip, and what each step of its plan did (or would do)."""

    impact: ChipImpact
    outcomes: tuple[RemedyOutcome, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def apply_chip_plan(report: FaultReport, chip: int, authorization: Authorization | None, *, node: str = "",
                    dry_run: bool = True, client: TritonClient | None = None, repository: Path | None = None,
                    home: Path | None = None, log: LogSource | None = None,
                    metrics_url: str | None = None) -> list[ChipRemedy]:
    """`apply_plan` for every fault present on `chip` of `node` in `report` ([] when it has none);
    a step an earlier fault's plan of the same chip already holds (the same kind, the same model)
    is not run twice: a chip with two codes is drained once."""
    chosen = [i for i in report.impacts
              if i.record.present and i.record.fault.chip == chip and i.record.fault.node == node]
    seen: set[tuple[StepKind, str]] = set()
    done = []
    for one in chosen:
        fresh = tuple(s for s in one.plan if (s.kind, s.model) not in seen or s.kind not in NEEDS)
        seen.update((s.kind, s.model) for s in fresh)
        outcomes = apply_plan(replace(one, plan=fresh), authorization, dry_run=dry_run, client=client,
                              repository=repository, home=home, log=log, metrics_url=metrics_url)
        done.append(ChipRemedy(one, tuple(outcomes)))
    return done


@dataclass
class _Remedy:
    impact: ChipImpact
    dry_run: bool
    client: TritonClient | None
    repository: Path | None
    home: Path | None
    log: LogSource | None
    metrics_url: str | None
    auth: Authorization | None
    actor: Actor | None

    def step(self, step: PlanStep) -> RemedyOutcome:
        if step.kind not in NEEDS:
            said = step.text + (f"; run it yourself: {step.command}" if step.command else "")
            return RemedyOutcome(step, RemedyState.SAID, said)
        if not step.model:
            return RemedyOutcome(step, RemedyState.REFUSED,
                                 f"{step.kind.value} names no model: nothing done")
        if not self.dry_run and not self.impact.record.present:
            return self.audited(RemedyOutcome(step, RemedyState.REFUSED, CLEARED))
        try:
            outcome = self.reload(step) if step.kind is StepKind.RELOAD else self.drain(step)
        except GeAdminError as exc:
            outcome = RemedyOutcome(step, RemedyState.REFUSED, str(exc))
        return outcome if self.dry_run else self.audited(outcome)

    def reload(self, step: PlanStep) -> RemedyOutcome:
        if self.dry_run:
            return RemedyOutcome(step, RemedyState.WOULD, f"would reload {step.model!r} (Triton keeps the "
                                 "serving instances until the new ones load)")
        assert self.client is not None
        (result,) = run_action(self.client, ModelAction.RELOAD, [step.model], log=self.log,
                               repository=self.repository, auth=self.auth)
        return RemedyOutcome(step, RemedyState.DONE if result.ok else RemedyState.FAILED, result.message)

    def drain(self, step: PlanStep) -> RemedyOutcome:
        chip = self.impact.record.fault.chip
        if self.repository is None:
            raise InvalidArgumentError(f"which model repository holds {step.model!r}? pass --repository (or "
                                       "set GEADMIN_REPOSITORY) to drain the chip")
        drained = drained_config(self.repository, step.model, chip)
        if step.kind is StepKind.MOVE:
            refusal = move_refusal(self.metrics_url, chip, drained.remaining)
            if refusal.refused:
                return RemedyOutcome(step, RemedyState.REFUSED, refusal.message)
            checked = f" ({refusal.message})"
        else:
            checked = ""
        change = f"device_ids {drained.before!r} -> {drained.after!r}"
        if self.dry_run:
            return RemedyOutcome(step, RemedyState.WOULD,
                                 f"would apply {step.model!r}'s config with {change} through the safe "
                                 f"apply{checked}")
        assert self.client is not None
        result = apply_config(self.client, self.repository, step.model, drained.text,
                              expected_sha256=drained.sha256, base_text=drained.base_text, auth=self.auth,
                              log=self.log, home=self.home,
                              note=f"{fault_named(self.impact)}: {step.kind.value}")
        state = RemedyState.DONE if result.ok else RemedyState.FAILED
        return RemedyOutcome(step, state, f"{change}: {result.outcome.value}{checked}. {result.message}")

    def audited(self, outcome: RemedyOutcome) -> RemedyOutcome:
        """The remedy's own row, naming the fault; an unwritable workspace is added to the message."""
        result = AUDIT_RESULTS.get(outcome.state, Result.REFUSED)
        step = outcome.step
        message = f"{fault_named(self.impact)}: {step.kind.value} {step.model}: {outcome.message}"
        try:
            audit.record(AUDIT_ACTION, outcome.step.model, result, actor=self.actor,
                         server=self.client.url if self.client else "", message=message, home=self.home)
        except WorkspaceDatabaseError as exc:
            return replace(outcome, message=f"{outcome.message} (the audit row could not be written: {exc})")
        return outcome
