"""The embedded stack's own audit rows: how Triton ended each time, and who stopped the stack.

Every end of Triton under `geadmin up` is one row in the workspace's audit log, with its real
origin and its result:

- a crash (`kill -9`, OOM, a segfault) is a failed `exit`; the restart after it is a row of its
  own, written when it ends: `restart` ok ("live again") or failed ("did not start again");
- a stop or restart someone asked for names who asked: the Stack page's signed-in user (the
  page writes its own row right after its signal, `geadmin.stack.drivers.perform`, and the
  stack finds it), else the signal and that it did not come from the Stack page;
- Triton exiting when asked is "stopped as asked", not "exit code 1" (Triton exits 1 after
  SIGTERM while it unloads); one that had to be killed after the wait says so;
- the whole stack stopping (Ctrl-C, SIGTERM, the dashboard dying with --no-restart) is one
  `stop` row with that origin.

A signal handler is told no sender, so the pid of a shell that sent SIGTERM is not knowable
here: the row names the signal.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit
from geadmin.audit import Actor, Origin
from geadmin.diagnose import unloads
from geadmin.domain import format_duration
from geadmin.errors import WorkspaceDatabaseError
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.local import RESTART_TRITON, STOP_TRITON
from geadmin.stack.supervisor import START_FAILED

ORIGIN_WAIT_S = 1.5  # how long a stop or restart by signal waits for the Stack page's audit row
STACK_PAGE_SERVER = "stack:local"  # the `server` of the Stack page's rows (drivers.perform)
MODEL = "tritonserver"


def origin_of_signal(signum: int | None) -> str:
    """Why the whole stack stops, from the signal `geadmin up` received."""
    if signum == signal.SIGINT:
        return "stopped by Ctrl-C (SIGINT)"
    if signum is None:
        return "stopped"
    try:
        return f"stopped by signal {signal.Signals(signum).name}"
    except ValueError:
        return f"stopped by signal {signum}"



def through(origin: str) -> str:
    """Where a stack action came from, as the history says it: the Stack page, or the CLI."""
    return "with `geadmin stack`" if origin == audit.Origin.CLI.value else "from the Stack page"

class StackAudit:
    """Writes the rows; `say` reports a row that could not be written (the stop still happened)."""

    def __init__(self, home: Path, server: str, say: Callable[[str], None],
                 stopping: threading.Event | None = None, origin_wait_s: float = ORIGIN_WAIT_S) -> None:
        self.home = home
        self.server = server
        self.say = say
        self._stopping = stopping or threading.Event()
        self._stack_stop_written = False
        self.origin_wait_s = origin_wait_s

    def write(self, action: str, ok: bool, message: str, origin: Origin = Origin.LOCAL) -> None:
        problem = audit.try_record_action(action, MODEL, ok, message, server=self.server,
                                          actor=Actor.os_user(origin), home=self.home)
        if problem:
            self.say(f"the {action} of tritonserver is not in the audit log: {problem}")

    def exit(self, record: ExitRecord) -> None:
        """One of the supervisor's records (its `on_exit`)."""
        if record.requested and record.restarted:
            return  # a requested restart: written when it ends (`restart`)
        if record.requested:
            self.write("stop", True, f"{record.note or 'stopped on request'}: tritonserver {record.how} "
                       f"after {format_duration(record.uptime_s)}")
        elif record.note.startswith(START_FAILED):
            self.write("restart", False, f"tritonserver did not start again: {record.note}")
        else:
            self.write("exit", False, f"tritonserver {record.how} after {format_duration(record.uptime_s)}"
                       + ("; geadmin up restarts it (the next row says whether it came back)"
                          if record.restarted else "; not restarted (--no-restart)"))

    def restart(self, ok: bool, message: str) -> None:
        """A restart ended (the supervisor's `on_restart`)."""
        self.write("restart", ok, message)

    def left_out(self, reasons: dict[str, str]) -> None:
        """Models not serving when Triton went, which the restart did not load (the supervisor's
        `on_left_out`): one failed `side_effect` row each, unless the audit log already says why
        (an operator's unload, or a failure still standing), so the verdict keeps them failed."""
        try:
            latest = unloads.latest_state_rows(sorted(reasons), self.home, unloads.SERVING_ACTIONS)
        except WorkspaceDatabaseError as exc:
            self.say(f"the models a restart left out are not in the audit log: {exc}")
            return
        for name, reason in sorted(reasons.items()):
            row = latest.get(name)
            if row is not None and (unloads.is_operator_unload(row) or unloads.is_failure_left(row)):
                continue
            problem = audit.try_record_action(
                unloads.SIDE_EFFECT, name, False,
                f"{name} was not serving when Triton went (its index said: {reason}); the restart loads "
                "only the models that served, so it stays out until loaded", server=self.server,
                actor=Actor.os_user(Origin.LOCAL), home=self.home)
            if problem:
                self.say(f"{name}, left out by the restart, is not in the audit log: {problem}")

    def stack_stopped(self, origin: str, record: ExitRecord | None, state: str) -> None:
        """The whole stack stopped; written once, whatever calls it again."""
        if self._stack_stop_written:
            return
        self._stack_stop_written = True
        ended = (f"tritonserver {record.how} after {format_duration(record.uptime_s)}" if record is not None
                 else f"tritonserver was not running ({state})")
        self.write("stop", True, f"{origin}: `geadmin up` ended; {ended}", origin=Origin.CLI)

    def origin_of(self, action: str, at: float) -> str:
        """Who asked for a "stop" / "restart" whose signal came at `at` (epoch s): the Stack
        page's row with its user, else the signal, from somewhere else (a shell, a script)."""
        actions = ("stop",) if action == "stop" else ("restart", "start")
        verb = "stopped" if action == "stop" else "restart asked"
        since = datetime.fromtimestamp(at - 2.0, timezone.utc)
        deadline = time.monotonic() + self.origin_wait_s
        while True:
            try:
                rows = audit.query(since=since, model="triton", home=self.home)
            except WorkspaceDatabaseError:
                rows = []
            row = next((r for r in rows if r.action in actions and r.server == STACK_PAGE_SERVER
                        and r.result == audit.Result.OK.value), None)
            if row is not None:
                return f"{verb} {through(row.origin)} by {row.who} ({row.origin})"
            if time.monotonic() >= deadline or self._stopping.wait(0.1):
                break
        name = (STOP_TRITON if action == "stop" else RESTART_TRITON).name
        return (f"{verb} by signal {name} to `geadmin up` (pid {os.getpid()}), not from the Stack page or "
                "`geadmin stack`")
