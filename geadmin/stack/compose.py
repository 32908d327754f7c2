"""The compose driver: the containers of one compose project, through the docker CLI.

Containers are found by the labels Compose puts on them (`geadmin.stack.docker_inspect`);
every docker call goes through `geadmin.stack.docker_cli.run_docker` (a deadline, and one
failure table). Triton's log is read from its container by `geadmin.stack.compose_logs`.

`history` shows what `docker inspect` keeps: each container's last exit (its code is reset
when the container starts again) and `RestartCount` (restarts by the restart policy, not by
`docker restart`). Not done: `up -d` for a service without a container (it needs the compose
file, which the dashboard may not see).
"""

from __future__ import annotations

from geadmin import settings
from geadmin.errors import DockerError, ServiceNotFoundError
from geadmin.stack.docker_cli import ACTION_TIMEOUT_S, READ_TIMEOUT_S, run_docker
from geadmin.stack.docker_inspect import (
    PROJECT_LABEL,
    SERVICE_LABEL,
    Container,
    last_exit,
    parse_inspect,
    parse_ps_ids,
    service_status,
)
from geadmin.stack.drivers import ExitRecord, ServiceStatus


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
    project = settings.COMPOSE_PROJECT.get()
    if not project:
        return None
    return ComposeDriver(str(project), str(settings.DOCKER.get() or "docker"))
