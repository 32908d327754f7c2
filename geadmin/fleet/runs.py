"""A rollout running in the background, so a page can watch it, pause it and abort it while
it runs (the CLI runs `rollout` in the foreground). One rollout per fleet at a time, in this
process: a second is refused with RolloutBusyError naming who started the first (across
processes, the fleet's rollout lock refuses it: geadmin.fleet.rollout).

The rollout journals itself as it goes (geadmin.fleet.journal), so this thread holds nothing
the audit log lacks: if the dashboard dies mid-wave, the next start finds the journal open and
reports it. A pause expires after GEADMIN_ROLLOUT_PAUSE_MAX_S (the rollout stops and puts back
what it changed), so a forgotten pause never blocks the fleet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError, RolloutBusyError
from geadmin.fleet.rollout import Control, RolloutResult

_lock = threading.Lock()
_runs: dict[str, RolloutRun] = {}  # fleet name -> its latest run (running or finished)


@dataclass
class RolloutRun:
    fleet: str
    what: str  # e.g. "apply digits on 3 servers", for the page
    who: str
    started_at: float = field(default_factory=time.time)
    control: Control = field(default_factory=Control)
    lines: list[str] = field(default_factory=list)  # progress, in order
    result: RolloutResult | None = None
    error: str = ""  # a refusal or failure before any server changed
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    @property
    def state(self) -> str:
        if self.running:
            if self.control.aborted.is_set():
                return "aborting"
            return "paused" if self.control.paused.is_set() else "running"
        if self.error:
            return "refused"
        return "done" if self.result is not None and self.result.ok else "stopped"


Work = Callable[[Control, Callable[[str], None]], RolloutResult]


def start(fleet: str, what: str, who: str, work: Work) -> RolloutRun:
    """Runs `work(control, progress)` on a thread; RolloutBusyError when `fleet` has one running."""
    with _lock:
        current = _runs.get(fleet)
        if current is not None and current.running:
            raise RolloutBusyError(f"a rollout of fleet {fleet!r} is running ({current.what}, started by "
                                   f"{current.who}): wait for it, or abort it on the Fleet page")
        run = RolloutRun(fleet, what, who)

        def body() -> None:
            try:
                run.result = work(run.control, run.lines.append)
            except GeAdminError as exc:
                run.error = str(exc)
            except Exception as exc:  # not ours: the rollout put back and ended its journal
                run.error = f"{type(exc).__name__}: {exc}"

        run.thread = threading.Thread(target=body, name=f"rollout-{fleet}", daemon=True)
        _runs[fleet] = run
        run.thread.start()
        return run


def latest(fleet: str) -> RolloutRun | None:
    with _lock:
        return _runs.get(fleet)


STEERS = ("pause", "resume", "abort")


def steer(run: RolloutRun, command: str, auth: Authorization, *, home: Path | None = None) -> None:
    """Pause, resume or abort a running rollout, as `auth`'s holder (an operator's right, like
    the rollout's): said in its progress and audited as `fleet <command>`."""
    if command not in STEERS:
        raise ValueError(f"unknown rollout command {command!r}")
    who = require(auth, GuardedAction.RELOAD)
    if command == "pause":
        run.control.paused.set()
    elif command == "resume":
        run.control.paused.clear()
    else:
        run.control.aborted.set()
    run.lines.append(f"{command} by {who.name}")
    audit.record(f"fleet {command}", "", audit.Result.OK, actor=who, server=run.fleet, message=run.what,
                 home=home)
