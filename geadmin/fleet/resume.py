"""The way forward from a rollout cut short: run it again as its journal planned it.

`geadmin.fleet.journal` keeps a rollout's record and `geadmin.fleet.restore` the way back; this
is the other choice an operator has for an unresolved rollout (`geadmin fleet resume ID`, the
Overview's interrupted-change card): the same change on the same servers, with the configs
it found before it started kept as the ones to put back. Only an unresolved rollout is resumed,
an apply only while its config still validates, and only on the servers of its plan found at
the same address now. A version rollout's first step goes on to its retire step once it is
done (geadmin.fleet.versions); one left between its steps runs only the retire step, and only
while every repository holds the config its first step wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollout_plan import RolloutPlan
from geadmin.diagnose.rollouts import Journal
from geadmin.errors import GeAdminError, RepositoryError, RolloutRefusedError
from geadmin.fleet.discovery import AD_HOC
from geadmin.fleet.members import Member
from geadmin.fleet.rollout import Change, RolloutResult, fleet_lock, rollout
from geadmin.fleet.versions import retire_step
from geadmin.repository import store
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.repository.validate import refuse_invalid


def resume(journal_id: int, members: Sequence[Member], *, home: Path | None = None,
           **kwargs: Any) -> RolloutResult:
    """Run an unresolved rollout again, as planned, on the servers of its plan (found among
    `members` at the same address), keeping its previous configs as the ones to put back.
    RolloutRefusedError when it cannot be resumed (see `resumable`); `kwargs` are `rollout`'s."""
    # before anything is read; `rollout` checks the change's
    require(kwargs.get("auth"), GuardedAction.RELOAD)
    found = rollouts.read(journal_id, home=home)
    why = resumable(found)
    if why:
        raise RolloutRefusedError(f"rollout #{journal_id} cannot be resumed: {why}; restore it instead "
                          f"(`{found.restore_command}`)")
    plan = found.plan
    servers = fleet_members(plan, members)
    kwargs.update(wave_size=plan.wave_size, fleet=plan.fleet, home=home)
    if plan.retire is not None and found.step_done:  # a version rollout left between its steps
        return retire_step(servers, found, **kwargs)
    new = plan.new_config.encode() if plan.change == Change.APPLY.value else None
    with fleet_lock(plan.fleet, home):  # a version rollout's first step goes on to its second
        result = rollout(servers, Change(plan.change), plan.model, new_config=new, resume_of=journal_id,
                         **kwargs)
        if plan.retire is None or not result.ok:
            return result
        return retire_step(servers, rollouts.read(result.journal_id or 0, home=home), **kwargs)


def resumable(journal: Journal) -> str:
    """"" when `journal` can be resumed, else why not: only an unresolved rollout, and for an
    apply only while its config still validates against the first repository (a version
    rollout left between its steps: the retire step's config, with every repository still
    holding the config its first step wrote)."""
    if not journal.unresolved:
        return f"rollout #{journal.id} is not waiting to be resumed"
    plan = journal.plan
    if plan.change != "apply":
        return ""
    between = plan.retire if plan.retire is not None and journal.step_done else None
    first = plan.servers[0].repository
    try:
        refuse_invalid(plan.model, between.config if between else plan.new_config, Path(first) / plan.model)
    except GeAdminError as exc:
        return f"its config no longer validates: {str(exc).splitlines()[0]}"
    return _changed_since_first_step(plan) if between else ""


def _changed_since_first_step(plan: RolloutPlan) -> str:
    """"" when every repository holds the config a version rollout's first step wrote, else why not."""
    for previous in plan.previous:
        path = Path(previous.repository) / plan.model / CONFIG_FILE
        try:
            found = store.read_config(Path(previous.repository), plan.model).sha256
        except GeAdminError as exc:
            return f"cannot read {path}: {str(exc).splitlines()[0]}"
        if found != plan.new_sha256:
            return (f"{path} is not the config its first step wrote (sha256 {found[:12]}): changed since, by "
                    "hand or by a retire step cut short (`geadmin fleet status` names it)")
    return ""


def fleet_members(plan: RolloutPlan, members: Sequence[Member]) -> list[Member]:
    """The plan's servers, in its order, as the members found now (RepositoryError when one is gone),
    each with the repository the plan wrote."""
    by_name = {m.name: m for m in members}
    missing = [s.name for s in plan.servers if s.name not in by_name
               or by_name[s.name].url.rstrip("/") != s.url.rstrip("/")]
    if missing:
        how = (": an ad-hoc rollout's servers get a key only as configured servers at the same URL; pass "
               "`--source SRC` or `--fleet NAME` that finds them with their key, or" if plan.fleet == AD_HOC
               else ":")
        raise RepositoryError(f"{', '.join(missing)} of rollout plan {plan.fleet!r} are not members of the "
                              f"fleet at the same address now{how} restore the rollout instead of resuming "
                              "it")
    # Each keeps its trust as found now (a member no longer proven is refused by the rollout).
    found = [by_name[s.name] for s in plan.servers]
    return [replace(m, repository=Path(s.repository) if s.repository else m.repository)
            for m, s in zip(found, plan.servers, strict=True)]
