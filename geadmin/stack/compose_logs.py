"""Triton's log, read from its compose container with `docker logs --timestamps`, and why a
compose service's container does not serve (its state, its last exit, the end of its log).

Which server a compose project runs: GEADMIN_COMPOSE_PROJECT belongs to the server
GEADMIN_TRITON_URL names (the default one when it is unset), as GEADMIN_TRITON_LOG does — the
dashboard's own in compose.yaml — and never to another (`compose_for`), unless GEADMIN_STACK
is `local`. For that server, `geadmin status` says `container_outage` while Triton does not
answer (the reason its container died is in the container's log, not in Triton's log file),
the diagnostics bundle holds every service's state and log tail (geadmin.ops.bundle), and a
target without a log file reads Triton's log from the container (geadmin.stack.target).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone

from geadmin import settings
from geadmin.domain import LogCursor
from geadmin.errors import StackError
from geadmin.stack.compose import ComposeDriver, compose_project_from_settings
from geadmin.stack.docker_inspect import Container, parse_time_ns
from geadmin.triton.logs import LogSource, mentions_pattern
from geadmin.triton.servers import is_env_server

TRITON_SERVICE = "triton"  # compose.yaml's
OUTAGE_LINES = 20  # of the container's log, under the outage


class ComposeLogSource(LogSource):
    """The log of a compose service's container (Triton's), read with `docker logs`.

    A `LogCursor` here is a point in the container's log: `offset` is the docker timestamp
    (epoch ns) of the last line read, `inode` identifies the container (from its id), so a
    recreated container is read from its start, like a rotated file. `--since` is inclusive
    and exact to the nanosecond: lines at the cursor itself are dropped here. The lines
    returned have docker's timestamp removed, so they parse as Triton's own.
    """

    def __init__(self, driver: ComposeDriver, service: str = "triton") -> None:
        self.driver = driver
        self.service = service
        self.last_error = ""  # why the last read failed ("" when it did not)
        self._lock = threading.Lock()
        self._tracked: frozenset[str] = frozenset()
        self._last: dict[str, str] = {}
        self._read_to: LogCursor | None = None

    @property
    def description(self) -> str:
        where = f"docker logs of compose service '{self.service}' (project {self.driver.project})"
        return where + (f" — unreadable: {self.last_error}" if self.last_error else "")

    def cursor(self) -> LogCursor:
        try:
            container = self.driver.main_container(self.service)
            out = self._logs(container, ["--tail", "1"])
        except StackError as exc:  # a log we cannot read must not stop the action it explains
            self.last_error = str(exc)
            return LogCursor(time.time_ns(), datetime.now(timezone.utc))
        stamps = [ns for ns, _ in _stamped(out)]
        return LogCursor(stamps[-1] if stamps else 0, datetime.now(timezone.utc), _identity(container))

    def read(self, cursor: LogCursor) -> tuple[list[str], LogCursor]:
        try:
            container = self.driver.main_container(self.service)
            same = cursor.inode in (0, _identity(container))
            since = ["--since", _unix(cursor.offset)] if same and cursor.offset > 0 else []
            out = self._logs(container, since)
        except StackError as exc:
            self.last_error = str(exc)
            return [], cursor
        floor = cursor.offset if same else -1
        lines = [(ns, text) for ns, text in _stamped(out) if ns > floor]
        end = lines[-1][0] if lines else max(floor, 0)
        return [text for _, text in lines], LogCursor(end, datetime.now(timezone.utc), _identity(container))

    def last_lines(self, names: Iterable[str]) -> dict[str, str]:
        wanted = frozenset(names)
        with self._lock:
            if not wanted <= self._tracked:  # a model seen for the first time: one full pass
                self._tracked |= wanted
                self._last, self._read_to = {}, None
            start = self._read_to or LogCursor(-1, datetime.now(timezone.utc))
            lines, end = self.read(start)
            if self._read_to and self._read_to.inode not in (0, end.inode):
                self._last = {}  # the container was recreated: its log starts again
            pattern = mentions_pattern(self._tracked)
            for line in lines:
                match = pattern.search(line)
                if match:
                    self._last[match.group(1)] = line
            self._read_to = end
            return {name: line for name, line in self._last.items() if name in wanted}

    def tail(self, lines: int) -> list[str]:
        """The last `lines` lines of the container's log (stdout and stderr, docker's timestamps
        removed); raises StackError when docker cannot say."""
        container = self.driver.main_container(self.service)
        return [text for _, text in _stamped(self._logs(container, ["--tail", str(max(int(lines), 0))]))]

    def _logs(self, container: Container, args: list[str]) -> str:
        self.last_error = ""
        return self.driver._run(["logs", "--timestamps", *args, container.id],
                                f"read Triton's log from compose service '{self.service}'",
                                merge_stderr=True)


def _unix(ns: int) -> str:
    return f"{ns // 10**9}.{ns % 10**9:09d}"  # the CLI's exact form: seconds.nanoseconds


def _identity(container: Container) -> int:
    return int(container.id[:15], 16)  # 60 bits of the id: a positive int, like an inode


def _stamped(text: str) -> list[tuple[int, str]]:
    """(epoch ns, line) for each line of `docker logs --timestamps`."""
    found = []
    for raw in text.splitlines():
        stamp, _, line = raw.partition(" ")
        ns = parse_time_ns(stamp)
        if ns is not None:
            found.append((ns, line))
    return found


def compose_for(url: str) -> ComposeDriver | None:
    """The compose project that runs the Triton at `url` (see the module docstring), or None."""
    if settings.STACK.get().strip().lower() == "local" or not is_env_server(url):
        return None
    return compose_project_from_settings()


def container_outage(driver: ComposeDriver, service: str = TRITON_SERVICE, lines: int = OUTAGE_LINES) -> str:
    """Why `service`'s container does not serve, for an operator: its state, its last exit and
    restarts, and the end of its log (indented under the first line); what docker could not
    say is said too, never dropped."""
    where = f"compose service '{service}' (project {driver.project})"
    try:
        status = next((s for s in driver.services() if s.name == service), None)
    except StackError as exc:
        return f"{where}: its container cannot be read: {exc}"
    if status is None:
        return f"{where} has no container: start it with `docker compose -p {driver.project} up -d {service}`"
    restarts = f", restarted {status.restarts} time(s) by its restart policy" if status.restarts else ""
    headline = f"{where} is {status.state}{restarts} ({status.detail})"
    try:
        tail = ComposeLogSource(driver, service).tail(lines)
    except StackError as exc:
        return f"{headline}; its log cannot be read: {exc}"
    if not tail:
        return f"{headline}; its log is empty"
    return "\n".join([f"{headline}; the end of its log (docker logs):", *(f"    | {line}" for line in tail)])


def compose_outage(url: str) -> str:
    """`container_outage` of the compose Triton when `url` is the server it runs, else ""."""
    driver = compose_for(url)
    return container_outage(driver) if driver is not None else ""
