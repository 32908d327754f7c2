"""Container logs of a compose stack, where an operator reads them: `geadmin status` says why
the compose Triton's container does not serve (its state, last exit and the end of its log),
the diagnostics bundle holds every service's state and log, and a server without a log file
reads Triton's log from its container — only for the server the compose project runs.

The docker CLI is the recorded double (tests/support/docker_replay.py, real outputs of
Docker 20.10); tests/integration/test_compose_driver_docker.py runs the same against the
real engine."""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin import settings
from geadmin.cli.main import main
from geadmin.stack.compose import ComposeDriver
from geadmin.stack.compose_logs import ComposeLogSource, compose_for, container_outage
from geadmin.stack.processes import free_port
from geadmin.stack.target import resolve
from tests.support.docker_replay import FakeDocker, Handler, asset, log_replay

TICKER_LOG = asset("logs_ticker_tail6.txt")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for setting in settings.SETTINGS.values():
        monkeypatch.delenv(setting.env_name, raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], FakeDocker]:
    """The docker CLI replayed; any other program (the bundle's `uname` for the platform) runs."""
    real = subprocess.run

    def install(handler: Handler) -> FakeDocker:
        docker = FakeDocker(handler)
        monkeypatch.setattr(subprocess, "run", lambda argv, **kwargs: (
            docker(argv, **kwargs) if argv[0] == "docker" else real(argv, **kwargs)))
        return docker

    return install


def as_triton(handler: Handler, service: str = "ticker") -> Handler:
    """The recorded project with its `service` named as compose.yaml names Triton's."""
    def handle(argv: list[str]) -> tuple[int, str, str] | str:
        answer = handler(argv)
        label = f'"com.docker.compose.service": "{service}"'
        return answer.replace(label, '"com.docker.compose.service": "triton"') if isinstance(answer, str) \
            else answer

    return handle


def test_a_killed_container_is_said_with_its_exit_and_the_end_of_its_log(
        fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(log_replay(TICKER_LOG, inspect_file="inspect_killed.json"))
    text = container_outage(ComposeDriver("gearec"), "ticker", lines=3)
    first, *tail = text.splitlines()
    assert first.startswith("compose service 'ticker' (project gearec) is exited (")
    assert "last exit: killed by SIGKILL" in first and first.endswith("; the end of its log (docker logs):")
    assert tail == ["    | tick 86", "    | tick 87", "    | tock 87"]  # docker's timestamps removed
    (logs,) = [argv for argv, _ in docker.calls if argv[1] == "logs"]
    assert logs[2:5] == ["--timestamps", "--tail", "3"]


def test_a_crash_looping_container_says_its_restarts(fake: Callable[[Handler], FakeDocker]) -> None:
    fake(log_replay("2026-12-03T09:47:02.7Z fatal: no model repository at /models\n",
                    ps="ps_crasher.jsonl", inspect_file="inspect_crasher.json"))
    text = container_outage(ComposeDriver("gearec2"), "crasher")
    assert "compose service 'crasher' (project gearec2) is restarting, restarted 6 time(s) by its restart " \
           "policy" in text
    assert text.endswith("    | fatal: no model repository at /models")


def test_what_docker_cannot_say_is_said_not_dropped(fake: Callable[[Handler], FakeDocker]) -> None:
    fake(lambda argv: (1, "", asset("errors/no_engine_unix.stderr")))
    text = container_outage(ComposeDriver("gearec"))
    assert text.startswith("compose service 'triton' (project gearec): its container cannot be read: ")
    assert "no Docker engine answers" in text
    fake(log_replay(TICKER_LOG))
    assert "has no container: start it with `docker compose -p gearec up -d triton`" in \
           container_outage(ComposeDriver("gearec"))  # the recorded project has no service triton


def test_the_compose_project_belongs_to_the_default_server_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://triton:8000")
    assert compose_for("http://triton:8000") is None  # no project configured
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "geadmin")
    driver = compose_for("http://triton:8000")
    assert driver is not None and driver.project == "geadmin"
    assert compose_for("http://10.0.0.7:8000") is None  # another server: not this project's Triton
    monkeypatch.setenv("GEADMIN_STACK", "local")
    assert compose_for("http://triton:8000") is None


def test_a_server_without_a_log_file_reads_triton_s_log_from_its_container(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://triton:8000")
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "geadmin")
    log = resolve().log()
    assert isinstance(log, ComposeLogSource) and log.service == "triton" and log.driver.project == "geadmin"
    assert resolve(url="http://10.0.0.7:8000").log() is None
    file = tmp_path / "tritonserver.log"
    assert resolve(triton_log=file).log().description == f"log file {file}"  # type: ignore[union-attr]


def test_status_says_why_the_compose_triton_is_down(monkeypatch: pytest.MonkeyPatch,
                                                    fake: Callable[[Handler], FakeDocker],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "gearec")
    fake(as_triton(log_replay(TICKER_LOG, inspect_file="inspect_killed.json")))
    assert main(["status", "--timeout", "2"]) == 3
    out = capsys.readouterr().out
    first = out.splitlines()[0]  # the cause leads, as on the Overview; its log lines, then the failed call
    assert first.startswith("DOWN: compose service 'triton' (project gearec) is exited (")
    assert "SIGKILL" in first
    assert "    | tock 87" in out and "  check liveness: Triton at " in out
    assert main(["status", "--timeout", "2", "--json"]) == 3
    document = json.loads(capsys.readouterr().out)
    assert document["outage"].startswith("compose service 'triton' (project gearec) is exited")


def test_status_of_another_server_asks_docker_nothing(monkeypatch: pytest.MonkeyPatch,
                                                      fake: Callable[[Handler], FakeDocker],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "gearec")
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://triton:8000")
    docker = fake(log_replay(TICKER_LOG))
    assert main(["status", "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2"]) == 3
    assert "compose service" not in capsys.readouterr().out and docker.calls == []


def test_the_bundle_holds_each_service_s_state_and_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       fake: Callable[[Handler], FakeDocker],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GEADMIN_TRITON_URL", url)
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "gearec")
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", "tock 87")  # a secret in a container's log is redacted
    fake(log_replay(TICKER_LOG, inspect_file="inspect_killed.json"))
    out = tmp_path / "b.tar.gz"
    assert main(["bundle", "-o", str(out), "--json", "--timeout", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    with tarfile.open(out, "r:gz") as archive:
        files = {m.name.split("/", 1)[1]: archive.extractfile(m).read().decode()  # type: ignore[union-attr]
                 for m in archive.getmembers()}
    services = json.loads(files["containers/services.json"])
    assert services["project"] == "gearec"
    assert {s["name"]: s["state"] for s in services["services"]}["ticker"] == "exited"
    assert files["containers/ticker.log"].splitlines()[-2:] == [
        "2026-12-03T09:46:17.884308459Z tick 87", "2026-12-03T09:46:17.884446930Z <redacted>"]
    assert {f for f in files if f.startswith("containers/")} == {"containers/services.json",
                                                                 "containers/ticker.log"}  # one per service
    assert "its container's log is in containers/" in printed["not_collected"]["log"]
