"""A rollout running in the background, so a page can watch it, pause it and abort it while
it runs (the CLI runs `rollout` in the foreground): a run of the background-run registry
(geadmin.ops.runs: start, progress, steering and their audit rows are its). One rollout per
fleet at a time, in this process: a second is refused with RolloutBusyError naming who started
the first (across processes, the fleet's rollout lock refuses it: geadmin.fleet.rollout).

The rollout journals itself as it goes (geadmin.fleet.journal), so this thread holds nothing
the audit log lacks: if the dashboard dies mid-wave, the next start finds the journal open and
reports it. A pause expires after GEADMIN_ROLLOUT_PAUSE_MAX_S (the rollout stops and puts back
what it changed), so a forgotten pause never blocks the fleet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from geadmin.access.guard import Authorization
from geadmin.access.roles import GuardedAction
from geadmin.access.users import still_allowed
from geadmin.audit import Actor, Origin
from geadmin.errors import RolloutBusyError
from geadmin.fleet.rollout import RolloutResult
from geadmin.fleet.wave import Control
from geadmin.ops import runs
from geadmin.ops.runs import Ending, Run, RunKind

ROLLOUT = RunKind("rollout", "fleet", "the Fleet page", RolloutBusyError, GuardedAction.RELOAD, "fleet",
               pausable=True)
STEERS = runs.STEERS


@dataclass(frozen=True, eq=False)
class RolloutRun:
    """The Fleet page's view of one background rollout: the registry's run, with the rollout's
    `Control` over the run's own pause and abort events."""

    run: Run[RolloutResult]

    @property
    def control(self) -> Control:
        return Control(paused=self.run.paused, aborted=self.run.aborted)

    @property
    def fleet(self) -> str:
        return self.run.key

    @property
    def what(self) -> str:
        return self.run.what

    @property
    def who(self) -> str:
        return self.run.who

    @property
    def lines(self) -> list[str]:
        return self.run.lines

    @property
    def result(self) -> RolloutResult | None:
        return self.run.result

    @property
    def error(self) -> str:
        """A refusal or failure before any server changed (or a crash, named as one)."""
        return self.run.error

    @property
    def running(self) -> bool:
        return self.run.running

    @property
    def state(self) -> str:
        """running, paused, aborting; then done, stopped (aborted, or put back), refused, failed (a crash)."""
        state = self.run.state
        if state == "aborted":
            return "refused" if self.run.error and not self.run.crash else "stopped"
        if state == "failed":
            return "failed" if self.run.crash else "refused"
        return state


Work = Callable[[Control, Callable[[str], None]], RolloutResult]


def start(fleet: str, what: str, who: str, work: Work, *, home: Path | None = None,
          held: tuple[Authorization, GuardedAction] | None = None) -> RolloutRun:
    """Runs `work(control, progress)` on a thread; RolloutBusyError when `fleet` has one running.
    `held`: the starter's authorization and the change's action, asked again before each server
    (a user removed or demoted since stops the rollout, which puts back what it changed)."""
    def revoked() -> str:
        return still_allowed(*held) if held is not None else ""

    def body(run: Run[RolloutResult]) -> RolloutResult:
        return work(Control(paused=run.paused, aborted=run.aborted, revoked=revoked), run.say)

    return RolloutRun(runs.start(ROLLOUT, fleet, what, Actor(who, Origin.DASHBOARD), body,
                                 ending=lambda r: Ending(r.ok, r.headline), home=home))


def latest(fleet: str) -> RolloutRun | None:
    run = runs.latest(ROLLOUT, fleet)
    return RolloutRun(run) if run is not None else None


def steer(run: RolloutRun, command: str, auth: Authorization, *, home: Path | None = None) -> None:
    """Pause, resume or abort a running rollout, as `auth`'s holder (an operator's right, like
    the rollout's): said in its progress and audited as `fleet <command>`."""
    runs.steer(run.run, command, auth, home=home)
