"""The way forward from a rollout cut short: run it again as its journal planned it.

`geadmin.fleet.journal` keeps a rollout's record and the way back (`restore`); this is the
other choice an operator has for an unresolved rollout (`geadmin fleet resume ID`, the
Overview's interrupted-change card): the same change on the same servers, with the configs
it found before it started kept as the ones to put back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.diagnose import rollouts
from geadmin.errors import RolloutRefusedError
from geadmin.fleet import journal
from geadmin.fleet.members import Member
from geadmin.fleet.rollout import Change, RolloutResult, rollout


def resume(journal_id: int, members: Sequence[Member], *, home: Path | None = None,
           **kwargs: Any) -> RolloutResult:
    """Run an unresolved rollout again, as planned, on the servers of its plan (found among
    `members` at the same address), keeping its previous configs as the ones to put back.
    RolloutRefusedError when it cannot be resumed (see `journal.resumable`); `kwargs` are `rollout`'s."""
    # before anything is read; `rollout` checks the change's
    require(kwargs.get("auth"), GuardedAction.RELOAD)
    found = rollouts.read(journal_id, home=home)
    why = journal.resumable(found)
    if why:
        raise RolloutRefusedError(f"rollout #{journal_id} cannot be resumed: {why}; restore it instead "
                          f"(`{found.restore_command}`)")
    plan = found.plan
    new = plan.new_config.encode() if plan.change == Change.APPLY.value else None
    return rollout(journal.fleet_members(plan, members), Change(plan.change), plan.model, new_config=new,
                   wave_size=plan.wave_size, fleet=plan.fleet, home=home, resume_of=journal_id, **kwargs)
