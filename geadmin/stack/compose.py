"""The compose driver: the containers of one compose project, through the docker CLI.

Containers are found by the labels Compose puts on them (`com.docker.compose.project`,
`...service`), so a stack started by Compose v2 (`docker compose`) or v1 (`docker-compose`)
looks the same. Every docker call is an argument list with a timeout, and every failure
goes through one table (`FAILURES`) into a `StackError` whose first line says cause and fix.

`history` shows what `docker inspect` keeps: each container's last exit (its code is reset
when the container starts again) and `RestartCount` (restarts by the restart policy, not by
`docker restart`). Not done: `up -d` for a service without a container (it needs the compose
file, which the dashboard may not see).
"""

from __future__ import annotations

import enum
import json
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from geadmin import settings
from geadmin.domain import LogCursor
from geadmin.errors import DockerError, DockerUnavailableError, ServiceNotFoundError, StackError
from geadmin.stack.drivers import ExitRecord, ServiceStatus
from geadmin.triton.logs import LogSource, mentions_pattern

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
NUMBER_LABEL = "com.docker.compose.container-number"
ONEOFF_LABEL = "com.docker.compose.oneoff"  # `compose run` containers: not the service
READ_TIMEOUT_S = 30.0
ACTION_TIMEOUT_S = 120.0  # `docker stop` waits the container's grace period, then kills


# -- failure translation --------------------------------------------------------------
class Failure(enum.Enum):
    NO_CLI = "no docker CLI"
    CLI_NOT_RUNNABLE = "the docker CLI cannot be run"
    NO_ENGINE = "no engine answers"
    SOCKET_DENIED = "no permission on the engine's socket"
    NO_SUCH_CONTAINER = "the container is gone"
    TIMEOUT = "no answer in time"
    OTHER = "any other failure"


# Lower-cased stderr substrings, first match wins; recorded in tests/unit/assets/docker/errors/
# (Docker 20.10 and 28 clients) except the two marked, quoted from public reports.
STDERR_FAILURES: tuple[tuple[str, Failure], ...] = (
    ("permission denied while trying to connect to the docker daemon", Failure.SOCKET_DENIED),
    ("cannot connect to the docker daemon", Failure.NO_ENGINE),
    ("failed to connect to the docker api", Failure.NO_ENGINE),  # quoted: Docker 29 clients
    ("error during connect", Failure.NO_ENGINE),  # quoted: Docker Desktop's named pipe, tcp://
    ("no such container", Failure.NO_SUCH_CONTAINER),
    ("no such object", Failure.NO_SUCH_CONTAINER),  # `docker inspect`'s wording
)
# What running the CLI can raise; first isinstance match wins, so subclasses come first.
EXCEPTION_FAILURES: tuple[tuple[type[BaseException], Failure], ...] = (
    (FileNotFoundError, Failure.NO_CLI),
    (PermissionError, Failure.CLI_NOT_RUNNABLE),
    (subprocess.TimeoutExpired, Failure.TIMEOUT),
    (subprocess.SubprocessError, Failure.OTHER),
    (OSError, Failure.CLI_NOT_RUNNABLE),  # e.g. ENOEXEC: GEADMIN_DOCKER is not a program
)
# {what}: the action; {cli}: the binary; {command}: the command line; {detail}: the CLI's
# error line or the exception; {timeout_s}: the deadline.
FAILURES: dict[Failure, tuple[type[StackError], str]] = {
    Failure.NO_CLI: (DockerUnavailableError, "{what}: no docker CLI '{cli}' on this machine — "
                     "install docker, or set GEADMIN_DOCKER to the docker binary's path"),
    Failure.CLI_NOT_RUNNABLE: (DockerUnavailableError, "{what}: cannot run the docker CLI '{cli}' "
                               "({detail}) — set GEADMIN_DOCKER to the docker binary's path"),
    Failure.NO_ENGINE: (DockerUnavailableError, "{what}: no Docker engine answers ({detail}) — start "
                        "it (`sudo systemctl start docker`), check DOCKER_HOST, or mount "
                        "/var/run/docker.sock into the dashboard's container"),
    Failure.SOCKET_DENIED: (DockerUnavailableError, "{what}: no permission on the Docker socket "
                            "({detail}) — add the user to the docker group (`sudo usermod -aG docker "
                            "USER`, log in again); in a container, add the socket's group (group_add)"),
    Failure.NO_SUCH_CONTAINER: (ServiceNotFoundError, "{what}: the container is gone ({detail}) — it "
                                "was removed or recreated since it was listed: refresh and retry"),
    Failure.TIMEOUT: (DockerError, "{what}: `{command}` did not finish within {timeout_s:g}s — the "
                      "Docker engine may be overloaded or hung: check `docker info` and its log"),
    Failure.OTHER: (DockerError, "{what}: `{command}` failed: {detail}"),
}


def classify(exc: BaseException | None = None, stderr: str = "") -> Failure:
    if exc is not None:
        return next((failure for kind, failure in EXCEPTION_FAILURES if isinstance(exc, kind)),
                    Failure.OTHER)
    lowered = stderr.lower()
    return next((failure for marker, failure in STDERR_FAILURES if marker in lowered), Failure.OTHER)


def docker_error(failure: Failure, *, what: str, argv: Sequence[str], detail: str,
                 timeout_s: float) -> StackError:
    error_type, template = FAILURES[failure]
    return error_type(template.format(what=what, cli=argv[0], command=shlex.join(argv),
                                      detail=detail or "no message", timeout_s=timeout_s))


def run_docker(argv: Sequence[str], *, what: str, timeout_s: float = READ_TIMEOUT_S,
               merge_stderr: bool = False) -> str:
    """The CLI's stdout (with stderr interleaved when `merge_stderr`: one ordered stream)."""
    try:
        done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                              encoding="utf-8", errors="replace", timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise docker_error(classify(exc), what=what, argv=argv, detail=str(exc),
                           timeout_s=timeout_s) from exc
    if done.returncode != 0:
        text = done.stdout if merge_stderr else done.stderr
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        # The CLI prints its error first on stderr; merged with a log, it comes last.
        detail = (lines[-1] if merge_stderr else lines[0]) if lines else f"exit code {done.returncode}"
        raise docker_error(classify(stderr=text or ""), what=what, argv=argv, detail=detail,
                           timeout_s=timeout_s)
    return done.stdout or ""


# -- parsing docker's outputs ---------------------------------------------------------
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def parse_time_ns(text: str) -> int | None:
    """Docker's RFC 3339 time with nanoseconds, in epoch ns; None for Go's zero time
    ("0001-01-01T00:00:00Z"), which docker prints for "never"."""
    match = _TIME.match(text.strip())
    if not match or match[1].startswith("0001-"):
        return None
    zone = "+00:00" if match[3] == "Z" else match[3]
    seconds = int(datetime.fromisoformat(match[1] + zone).timestamp())
    return seconds * 1_000_000_000 + int((match[2] or "").ljust(9, "0"))


def split_exit(code: int) -> tuple[int | None, str | None]:
    """(exit code, signal): docker reports death by signal N as exit code 128+N (137: SIGKILL)."""
    if 128 < code <= 128 + 64:
        try:
            return None, signal.Signals(code - 128).name
        except ValueError:  # a real-time signal: keep the number
            pass
    return code, None


@dataclass(frozen=True)
class Container:
    """What `docker container inspect` says about one container of the project."""

    id: str
    name: str
    service: str
    number: int
    image: str
    status: str  # created, running, paused, restarting, removing, exited, dead
    health: str | None
    started_at: float | None  # epoch s of the last start; None: never started
    finished_at: float | None  # epoch s of the last exit; None: never exited
    exit_code: int
    oom_killed: bool
    restart_count: int
    oneoff: bool

    @classmethod
    def from_inspect(cls, item: dict[str, Any]) -> Container:
        state, config = item.get("State") or {}, item.get("Config") or {}
        labels = config.get("Labels") or {}
        return cls(
            id=item["Id"], name=str(item.get("Name", "")).lstrip("/"),
            service=labels.get(SERVICE_LABEL, ""), number=int(labels.get(NUMBER_LABEL) or 0),
            image=config.get("Image", ""), status=state.get("Status", "unknown"),
            health=(state.get("Health") or {}).get("Status"), started_at=_seconds(state.get("StartedAt", "")),
            finished_at=_seconds(state.get("FinishedAt", "")),
            exit_code=int(state.get("ExitCode") or 0), oom_killed=bool(state.get("OOMKilled")),
            restart_count=int(item.get("RestartCount") or 0),
            oneoff=labels.get(ONEOFF_LABEL, "False") == "True",
        )


def _seconds(text: str) -> float | None:
    ns = parse_time_ns(text)
    return None if ns is None else ns / 1e9


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DockerError(f"the docker CLI printed no JSON ({exc}: {text[:80]!r}) — is GEADMIN_DOCKER "
                          "the docker CLI?") from exc


def parse_ps_ids(text: str) -> list[str]:
    """Container ids from `docker ps --format '{{json .}}'` (one JSON object a line)."""
    return [_json(line)["ID"] for line in text.splitlines() if line.strip()]


def parse_inspect(text: str) -> list[Container]:
    return [Container.from_inspect(item) for item in _json(text or "[]")]


def last_exit(container: Container) -> ExitRecord | None:
    """The last exit as `docker inspect` keeps it (None: it never exited)."""
    if container.finished_at is None:
        return None
    if container.started_at is not None and container.started_at > container.finished_at:
        return ExitRecord(at=container.finished_at, exit_code=None, signal=None, uptime_s=0.0,
                          restarted=True, note="code and run length unknown: docker resets them "
                          "when a container starts again")
    code, sig = split_exit(container.exit_code)
    uptime = container.finished_at - (container.started_at or container.finished_at)
    return ExitRecord(at=container.finished_at, exit_code=code, signal=sig, uptime_s=max(uptime, 0.0),
                      restarted=container.status == "restarting",
                      note="out of memory (OOM killed)" if container.oom_killed else "")


def service_status(service: str, containers: Sequence[Container]) -> ServiceStatus:
    """One service from its containers; a scaled service shows its first (lowest number) one."""
    main = containers[0]
    running = main.status == "running"
    detail = [f"image {main.image}", f"container {main.name}"]
    if len(containers) > 1:
        detail.append(f"{len(containers)} containers, showing #{main.number}")
    exit_record = None if running else last_exit(main)
    if exit_record:
        detail.append(f"last exit: {exit_record.describe()}")
    return ServiceStatus(name=service, state=main.status,
                         health=main.health if main.status in ("running", "restarting") else None,
                         started_at=main.started_at if running else None,
                         restarts=sum(c.restart_count for c in containers), detail=", ".join(detail))


# -- the driver -----------------------------------------------------------------------
class ComposeDriver:
    """The services of compose project `project`, through the docker CLI `docker`."""

    kind = "compose"

    def __init__(self, project: str, docker: str = "docker") -> None:
        self.project = project
        self.docker = docker

    def services(self) -> list[ServiceStatus]:
        by_service: dict[str, list[Container]] = {}
        for container in self._containers():
            by_service.setdefault(container.service, []).append(container)
        return [service_status(name, group) for name, group in sorted(by_service.items())]

    def history(self, service: str) -> list[ExitRecord]:
        """The last exit of each container of the service, oldest first: all docker keeps."""
        records = [last_exit(c) for c in self._containers(service)]
        return sorted((r for r in records if r), key=lambda r: r.at)

    def restart(self, service: str) -> None:
        self._act("restart", service)

    def stop(self, service: str) -> None:
        self._act("stop", service)

    def start(self, service: str) -> None:
        self._act("start", service)

    def logs(self, service: str, tail: int = 200) -> list[str]:
        """The last `tail` lines, stdout and stderr in the order docker stored them, each
        with docker's RFC 3339 timestamp in front."""
        container = self.main_container(service)
        out = self._run(["logs", "--tail", str(max(int(tail), 0)), "--timestamps", container.id],
                        f"read the logs of compose service '{service}'", merge_stderr=True)
        return out.splitlines()

    def main_container(self, service: str) -> Container:
        """The container whose log and state stand for the service: the first running one."""
        containers = self._containers(service)
        return next((c for c in containers if c.status == "running"), containers[0])

    def _act(self, verb: str, service: str) -> None:
        what = f"{verb} compose service '{service}' (project {self.project})"
        ids = [c.id for c in self._containers(service)]
        self._run([verb, *ids], what, timeout_s=ACTION_TIMEOUT_S)
        if verb == "stop":
            return
        # Check, don't assume: a container that dies at once would otherwise look restarted.
        stopped = [c for c in self._containers(service) if c.status not in ("running", "restarting")]
        if stopped:
            record = last_exit(stopped[0])
            how = record.describe() if record else stopped[0].status
            raise DockerError(f"{what}: container {stopped[0].name} did not stay up ({how}) — "
                              "read its logs for the reason")

    def _filters(self, service: str | None = None) -> list[str]:
        filters = ["--filter", f"label={PROJECT_LABEL}={self.project}"]
        return filters + (["--filter", f"label={SERVICE_LABEL}={service}"] if service else [])

    def _containers(self, service: str | None = None) -> list[Container]:
        """The project's (or one service's) containers, by service and number."""
        what = f"list the containers of compose project '{self.project}'"
        for attempt in range(2):
            ids = parse_ps_ids(self._run(["ps", "-a", *self._filters(service), "--format", "{{json .}}"],
                                         what))
            try:
                found = parse_inspect(self._run(["container", "inspect", *ids], what)) if ids else []
                break
            except ServiceNotFoundError:  # removed between ps and inspect: list again, once
                if attempt:
                    raise
        containers = sorted((c for c in found if not c.oneoff), key=lambda c: (c.service, c.number, c.name))
        if service and not containers:
            raise self._not_found(service)
        return containers

    def _not_found(self, service: str) -> ServiceNotFoundError:
        names = sorted({c.service for c in self._containers()})
        if not names:
            return ServiceNotFoundError(
                f"compose project '{self.project}' has no containers — is it up (`docker compose -p "
                f"{self.project} up -d`), and is GEADMIN_COMPOSE_PROJECT its name?")
        return ServiceNotFoundError(
            f"compose project '{self.project}' has no service '{service}' (it has: {', '.join(names)}) — "
            f"pick one of those, or create it with `docker compose -p {self.project} up -d {service}`")

    def _run(self, args: list[str], what: str, *, timeout_s: float = READ_TIMEOUT_S,
             merge_stderr: bool = False) -> str:
        return run_docker([self.docker, *args], what=what, timeout_s=timeout_s, merge_stderr=merge_stderr)


def compose_project_from_settings() -> ComposeDriver | None:
    """The driver for GEADMIN_COMPOSE_PROJECT (None when unset), running GEADMIN_DOCKER."""
    project = settings.get("COMPOSE_PROJECT")
    if not project:
        return None
    return ComposeDriver(str(project), str(settings.get("DOCKER") or "docker"))


# -- Triton's log, read from its container --------------------------------------------
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
