"""A fleet's rollouts cut short and not yet put right: a new rollout refused, the fleet DEGRADED.

An unresolved rollout (geadmin.diagnose.rollouts: cut short, neither restored nor resumed) left
servers changed. A new rollout of the fleet, or of any of its servers, would take the mixed
fleet for its "before": it is refused until the old one is restored (geadmin.fleet.restore) or
resumed (geadmin.fleet.resume). And the fleet's verdict (`geadmin fleet status`, the Fleet page)
is DEGRADED by the verdict's interrupted-change rule, naming what changed where and the restore
command.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geadmin.diagnose import interrupted, rollouts, verdict
from geadmin.diagnose.verdict import Reason
from geadmin.errors import RolloutBusyError


def refuse_unresolved(fleet: str, home: Path | None, urls: Sequence[str] = (), besides: int = 0) -> None:
    """RolloutBusyError when a rollout of `fleet`, or of any of its servers (`urls`), was cut short
    and not yet restored or resumed: a new one would take the mixed fleet for its "before".
    `besides`: the version rollout whose retire step this is (it settles that one)."""
    for journal in rollouts.unresolved_over(fleet, urls, home=home):
        if journal.id == besides:
            continue
        raise RolloutBusyError(f"rollout #{journal.id} of fleet {fleet!r} ({journal.what}) was cut short and "
                               f"left servers changed ({journal.where()}): restore it first "
                               f"(`{journal.restore_command}`, or Restore on the Fleet page)")


def fleet_reasons(fleet: str, urls: Sequence[str] = (), *, home: Path | None = None) -> list[Reason]:
    """The verdict's interrupted-change rule for a fleet: one DEGRADED reason per unresolved
    rollout of `fleet` or of its servers (`urls`), naming what changed where and the restore command."""
    found = rollouts.unresolved_over(fleet, urls, home=home)
    return verdict.interrupted_reasons([interrupted.from_journal(j) for j in found])


def fleet_headline(headline: str, reasons: Sequence[Reason]) -> str:
    """The fleet's headline with its interrupted rollouts: "FLEET OK" becomes DEGRADED."""
    if not reasons or not headline.startswith("FLEET OK"):
        return headline
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f"FLEET DEGRADED: {reasons[0].text}{more}"
