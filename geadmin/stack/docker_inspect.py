"""What the docker CLI prints, parsed: `docker ps` ids, `docker container inspect` into
`Container`s, docker's RFC 3339 nanosecond times, exit codes (128+N is death by signal N),
and a compose service's status and last exit from its containers.

Containers are told apart by the labels Compose puts on them, so a stack started by
Compose v2 (`docker compose`) or v1 (`docker-compose`) looks the same.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from geadmin.errors import DockerError
from geadmin.stack.drivers import ExitRecord, ServiceStatus

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
NUMBER_LABEL = "com.docker.compose.container-number"
ONEOFF_LABEL = "com.docker.compose.oneoff"  # `compose run` containers: not the service

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
