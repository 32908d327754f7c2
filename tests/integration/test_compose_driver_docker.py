"""The compose driver against a real Docker engine and a real compose project.

`scripts/docker-engine.sh` makes the engine answer (it starts dockerd when none does, and
builds the local base image: no registry can be pulled here); if it fails, these tests fail.
The project is tests/integration/assets/compose_sleeper.yaml, brought up with docker-compose
(v1, the one Debian ships; its containers carry the same labels as Compose v2's) under a
unique name, and brought down with nothing left at the end.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from geadmin.errors import DockerError, DockerUnavailableError, ServiceNotFoundError
from geadmin.stack.compose import ComposeDriver
from geadmin.stack.compose_logs import ComposeLogSource, container_outage
from geadmin.stack.docker_cli import run_docker
from geadmin.stack.docker_inspect import parse_time_ns
from geadmin.stack.drivers import ServiceStatus

pytestmark = [pytest.mark.integration, pytest.mark.docker]  # the real Docker engine

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SCRIPT = ROOT / "scripts" / "docker-engine.sh"
COMPOSE_FILE = Path(__file__).parent / "assets" / "compose_sleeper.yaml"
T = TypeVar("T")


def run(argv: list[str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 60) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def engine() -> None:
    done = run(["bash", str(ENGINE_SCRIPT)], timeout_s=900)
    assert done.returncode == 0, (f"{ENGINE_SCRIPT} failed (exit {done.returncode}) — no Docker engine "
                                  f"for these tests:\n{done.stdout}\n{done.stderr}")


def leftovers(project: str) -> dict[str, str]:
    label = f"label=com.docker.compose.project={project}"
    found = {kind: run(["docker", kind, "ls", "-q", "--filter", label]).stdout.strip()
             for kind in ("network", "volume")}
    found["container"] = run(["docker", "ps", "-aq", "--filter", label]).stdout.strip()
    return {kind: ids for kind, ids in found.items() if ids}


@pytest.fixture(scope="module")
def project(engine: None) -> Iterator[str]:
    name = f"geatest{uuid.uuid4().hex[:8]}"
    compose = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", name]
    up = run([*compose, "up", "-d"], timeout_s=300)
    try:
        assert up.returncode == 0, f"docker-compose up failed:\n{up.stderr}"
        yield name
    finally:
        down = run([*compose, "down", "-v", "--timeout", "5"], timeout_s=300)
        assert down.returncode == 0, f"docker-compose down failed:\n{down.stderr}"
        assert not leftovers(name), f"left behind by project {name}: {leftovers(name)}"


@pytest.fixture(scope="module")
def driver(project: str) -> ComposeDriver:
    return ComposeDriver(project)


def status(driver: ComposeDriver, service: str) -> ServiceStatus:
    return next(s for s in driver.services() if s.name == service)


def healthy_ticker(driver: ComposeDriver) -> ServiceStatus | None:
    ticker = status(driver, "ticker")
    return ticker if ticker.running and ticker.health == "healthy" else None


def test_lists_both_services_running_with_their_health(driver: ComposeDriver) -> None:
    wait_for("ticker to become healthy", lambda: healthy_ticker(driver))
    services = {s.name: s for s in driver.services()}
    assert sorted(services) == ["sleeper", "ticker"]
    assert services["sleeper"].running and services["sleeper"].health is None  # no health check
    for service in services.values():
        assert service.started_at is not None and 0 <= time.time() - service.started_at < 300
        assert "image local/debian:bookworm" in service.detail


def test_logs_tail_real_lines_of_both_streams_in_order(driver: ComposeDriver) -> None:
    wait_for("a few log lines", lambda: len(driver.logs("ticker", tail=6)) >= 6)
    lines = driver.logs("ticker", tail=6)
    assert len(lines) == 6
    stamps = [parse_time_ns(line.split(" ", 1)[0]) for line in lines]
    assert all(stamps) and stamps == sorted(stamps)  # type: ignore[type-var]
    words = {line.split(" ")[1] for line in lines}
    assert words == {"tick", "tock"}  # stdout and stderr, merged


def test_restart_starts_a_new_run(driver: ComposeDriver) -> None:
    before = status(driver, "sleeper").started_at
    assert before is not None
    driver.restart("sleeper")
    after = status(driver, "sleeper")
    assert after.running and after.started_at is not None and after.started_at > before


def test_stop_then_start(driver: ComposeDriver) -> None:
    driver.stop("sleeper")
    stopped = status(driver, "sleeper")
    assert stopped.state == "exited" and stopped.started_at is None
    assert "last exit: exit code 0" in stopped.detail  # its TERM trap exits 0
    driver.start("sleeper")
    assert status(driver, "sleeper").running


def test_a_killed_container_shows_the_signal_in_history(driver: ComposeDriver, project: str) -> None:
    killed = run(["docker", "kill", f"{project}_ticker_1"])
    assert killed.returncode == 0, killed.stderr
    wait_for("ticker to exit", lambda: status(driver, "ticker").state == "exited")
    [record] = driver.history("ticker")
    assert (record.signal, record.exit_code, record.restarted) == ("SIGKILL", None, False)
    assert abs(time.time() - record.at) < 60 and record.uptime_s > 0
    assert "killed by SIGKILL" in status(driver, "ticker").detail
    outage = container_outage(driver, "ticker", lines=4).splitlines()  # what `geadmin status` says
    assert outage[0].startswith(f"compose service 'ticker' (project {project}) is exited (")
    assert "killed by SIGKILL" in outage[0] and len(outage) == 5
    assert all(line.startswith("    | ") for line in outage[1:])
    assert {line.split()[1] for line in outage[1:]} == {"tick", "tock"}  # its last words, both streams
    driver.start("ticker")
    wait_for("ticker to be healthy again", lambda: healthy_ticker(driver))


def test_log_source_follows_the_container_log(driver: ComposeDriver) -> None:
    source = ComposeLogSource(driver, service="ticker")
    cursor = source.cursor()
    assert cursor.offset > 0 and cursor.inode
    lines, end = wait_for("two new lines in the container log",
                          lambda: read if len((read := source.read(cursor))[0]) >= 2 else None)
    assert len(lines) >= 2 and all(line.split(" ")[0] in ("tick", "tock") for line in lines)
    assert end.offset > cursor.offset
    more, _ = wait_for("a line after those", lambda: read if (read := source.read(end))[0] else None)
    assert more and not set(more) & set(lines)  # nothing read twice
    latest = source.last_lines(["tick", "tock"])
    assert set(latest) == {"tick", "tock"} and source.last_error == ""


def test_unknown_service_is_named_with_the_ones_there_are(driver: ComposeDriver) -> None:
    with pytest.raises(ServiceNotFoundError, match=r"\(it has: sleeper, ticker\)"):
        driver.restart("trtion")


def test_no_engine_at_docker_host_says_how_to_fix_it(engine: None, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(DockerUnavailableError, match=r"no Docker engine answers .*systemctl start docker"):
        ComposeDriver("anything").services()


def test_an_engine_that_never_answers_times_out(engine: None, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(path))
        silent.listen(8)  # the kernel accepts connections; nothing ever answers them
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        started = time.monotonic()
        with pytest.raises(DockerError, match=r"did not finish within 2s — the Docker engine may be"):
            run_docker(["docker", "ps"], what="list containers", timeout_s=2)
        assert time.monotonic() - started < 10
