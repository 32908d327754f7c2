"""What the Stack page and `geadmin stack` see of a stack, whoever runs it.

Two drivers implement `StackDriver`: `geadmin.stack.local.LocalDriver` (the embedded
stack of `geadmin up`: its own processes) and `geadmin.stack.compose.ComposeDriver`
(containers of a compose project, through the docker CLI). `choose_driver` in
`geadmin.stack.choose` picks one from how the dashboard was started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.domain import format_duration
from geadmin.errors import GeAdminError


@dataclass(frozen=True)
class ExitRecord:
    """One time a service's process ended (and, under a supervisor, was restarted)."""

    at: float  # epoch seconds of the exit
    exit_code: int | None  # None when ended by a signal
    signal: str | None  # e.g. "SIGKILL"
    uptime_s: float  # how long that run lasted
    restarted: bool  # False: left stopped (--no-restart, or stopped on purpose)
    note: str = ""  # e.g. "restart requested from the Stack page"
    requested: bool = False  # True: a stop or restart someone asked for, not a crash

    @property
    def how(self) -> str:
        if self.requested and self.signal != "SIGKILL":  # it exited when asked: its code is no failure
            return "stopped as asked"
        if self.requested:
            return "killed by SIGKILL (it did not stop in time when asked)"
        if self.signal:
            return f"killed by {self.signal}"
        return "did not start" if self.exit_code is None else f"exit code {self.exit_code}"

    def describe(self) -> str:
        return f"{self.how} after {format_duration(self.uptime_s)}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class ServiceStatus:
    """One service of the stack as its driver sees it now."""

    name: str  # "triton", "dashboard", or the compose service name
    state: str  # "running", "restarting", "exited", "stopped", "created", ...
    health: str | None  # "healthy", "unhealthy", "starting"; None: no health check
    started_at: float | None  # epoch seconds of the current run; None when not running
    restarts: int  # restarts since the stack started
    detail: str = ""  # e.g. "pid 1234", the image, or the last exit

    @property
    def running(self) -> bool:
        return self.state == "running"

    def uptime(self) -> str:
        """How long the current run has lasted, as every view prints it ("" when not running)."""
        if not (self.running and self.started_at):
            return ""
        return format_duration(time.time() - self.started_at)


class StackDriver(Protocol):
    """Read and act on the services of one stack. Errors are `StackError`s with the cause."""

    kind: str  # "local" or "compose"

    def services(self) -> list[ServiceStatus]: ...

    def history(self, service: str) -> list[ExitRecord]: ...

    def restart(self, service: str) -> None: ...

    def stop(self, service: str) -> None: ...

    def start(self, service: str) -> None: ...

    def logs(self, service: str, tail: int = 200) -> list[str]: ...


STACK_ACTIONS = ("restart", "stop", "start")


def perform(driver: StackDriver, service: str, action: str, *, auth: Authorization | None = None) -> None:
    """Restart, stop or start `service`, audited with who asked (the row is written whether
    the driver succeeds or not; a row that cannot be written does not undo the action).
    `auth` must cover `action` (NotAuthorizedError before the driver is asked)."""
    if action not in STACK_ACTIONS:
        raise ValueError(f"unknown stack action {action!r}")
    actor = require(auth, GuardedAction(action))
    try:
        getattr(driver, action)(service)
    except GeAdminError as exc:
        audit.try_record_action(action, service, False, str(exc), server=f"stack:{driver.kind}", actor=actor)
        raise
    audit.try_record_action(action, service, True, f"asked the {driver.kind} stack to {action} {service}",
                            server=f"stack:{driver.kind}", actor=actor)
