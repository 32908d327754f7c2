"""The local stack driver: the `geadmin up` of this workspace, seen through its stack.json.

`geadmin up` publishes its supervisor's state (Triton's pid, state, restarts, exits) in
`$GEADMIN_HOME/stack.json`; actions are signals to the `geadmin up` process, which its
supervisor turns into a restart or a stop of Triton. The dashboard runs inside that stack,
so it cannot stop or restart itself from here.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from geadmin.errors import ServiceNotFoundError, StackError
from geadmin.stack.drivers import ExitRecord, ServiceStatus
from geadmin.stack.processes import http_ok, pid_alive
from geadmin.stack.workspace import StackInfo, Workspace

RESTART_TRITON = signal.SIGHUP  # restart (or start, when stopped) the supervised Triton
STOP_TRITON = signal.SIGUSR1  # stop it and keep it down until a restart
SERVICES = ("triton", "dashboard")


def triton_health(info: StackInfo) -> str | None:
    """healthy: ready; degraded: live but not ready (strict readiness: a model failed)."""
    if info.triton_state != "running":
        return None
    if http_ok(f"{info.http_url}/v2/health/ready"):
        return "healthy"
    return "degraded" if http_ok(f"{info.http_url}/v2/health/live") else "unhealthy"


class LocalDriver:
    kind = "local"

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def _info(self) -> StackInfo:
        info = self.workspace.live_stack()
        if info is None:
            raise StackError(f"no `geadmin up` is running on the workspace {self.workspace.home} "
                             "(its stack.json is missing or its process is gone): start it with "
                             "`geadmin up`")
        return info

    @staticmethod
    def _check(service: str) -> None:
        if service not in SERVICES:
            raise ServiceNotFoundError(f"no service {service!r} in the local stack "
                                       f"(it has: {', '.join(SERVICES)})")

    def services(self) -> list[ServiceStatus]:
        info = self._info()
        triton_running = info.triton_state == "running" and info.triton_pid is not None \
            and pid_alive(info.triton_pid)
        triton = ServiceStatus(
            "triton", info.triton_state if not (info.triton_state == "running" and not triton_running)
            else "exited", triton_health(info),
            info.triton_started_at if triton_running else None,
            sum(1 for record in info.exits if record.restarted),
            f"pid {info.triton_pid}" if triton_running else _last_exit(info.exits))
        dashboard = ServiceStatus(
            "dashboard", "running" if info.dashboard_pid and pid_alive(info.dashboard_pid) else "exited",
            "healthy" if http_ok(f"{info.dashboard_url}/_stcore/health") else "unhealthy",
            info.dashboard_started_at, sum(1 for record in info.dashboard_exits if record.restarted),
            f"pid {info.dashboard_pid}" if info.dashboard_pid else "")
        return [triton, dashboard]

    def history(self, service: str) -> list[ExitRecord]:
        self._check(service)
        info = self._info()
        return list(info.exits if service == "triton" else info.dashboard_exits)

    def _signal(self, signum: signal.Signals) -> None:
        info = self._info()
        try:
            os.kill(info.pid, signum)
        except ProcessLookupError as exc:
            raise StackError(f"`geadmin up` (pid {info.pid}) is gone: start it again") from exc
        except PermissionError as exc:
            raise StackError(f"`geadmin up` (pid {info.pid}) belongs to another user: run the "
                             "dashboard as that user") from exc

    def _only_triton(self, service: str, verb: str) -> None:
        self._check(service)
        if service == "dashboard":
            raise StackError(f"the dashboard cannot {verb} itself from its own page: {verb} "
                             "`geadmin up` in its terminal (Ctrl-C, then `geadmin up`)")

    def restart(self, service: str) -> None:
        self._only_triton(service, "restart")
        self._signal(RESTART_TRITON)

    def start(self, service: str) -> None:
        self._only_triton(service, "start")
        self._signal(RESTART_TRITON)

    def stop(self, service: str) -> None:
        self._only_triton(service, "stop")
        self._signal(STOP_TRITON)

    def logs(self, service: str, tail: int = 200) -> list[str]:
        self._check(service)
        info = self._info()
        path = info.triton_log if service == "triton" \
            else info.dashboard_log or self.workspace.dashboard_log
        return tail_lines(path, tail)


def tail_lines(path: Path, count: int, chunk: int = 1 << 16) -> list[str]:
    """The last `count` lines of a file, reading backwards (logs can be large)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = position = handle.tell()
            data = b""
            while position > 0 and data.count(b"\n") <= count:
                position = max(0, position - chunk)
                handle.seek(position)
                data = handle.read(end - position)
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-count:]


def _last_exit(exits: tuple[ExitRecord, ...]) -> str:
    if not exits:
        return ""
    last = exits[-1]
    return f"last exit {time.strftime('%H:%M:%S', time.localtime(last.at))}: {last.describe()}"
