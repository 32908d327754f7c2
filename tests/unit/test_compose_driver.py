"""The compose driver on real docker CLI outputs (tests/unit/assets/docker/, see its README):
parsing, the failure table and its completeness, and the commands it runs.

The docker CLI is replaced here only by `FakeDocker`, which replays recorded outputs (a test
double, in tests/); tests/integration/test_compose_driver_docker.py runs the real engine.
"""

from __future__ import annotations

import builtins
import inspect
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.domain import LogCursor
from geadmin.errors import DockerError, DockerUnavailableError, ServiceNotFoundError, StackError
from geadmin.stack.compose import ComposeDriver, compose_project_from_settings
from geadmin.stack.compose_logs import ComposeLogSource
from geadmin.stack.docker_cli import (
    EXCEPTION_FAILURES,
    FAILURES,
    DockerFailure,
    classify,
    docker_error,
    run_docker,
)
from geadmin.stack.docker_inspect import (
    Container,
    last_exit,
    parse_inspect,
    parse_ps_ids,
    parse_time_ns,
    service_status,
    split_exit,
)
from geadmin.stack.drivers import StackDriver
from tests.support.docker_replay import ASSETS, FakeDocker, Handler, asset, log_replay, recorded

ERRORS = sorted((ASSETS / "errors").glob("*.stderr"))
# The file name's prefix says which failure a recorded stderr is.
PREFIXES = {"no_engine": DockerFailure.NO_ENGINE, "socket_denied": DockerFailure.SOCKET_DENIED,
            "no_such_container": DockerFailure.NO_SUCH_CONTAINER, "other": DockerFailure.OTHER}


def containers(name: str) -> list[Container]:
    return parse_inspect(asset(name))


def by_service(name: str, service: str) -> Container:
    return next(c for c in containers(name) if c.service == service)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], FakeDocker]:
    def install(handler: Handler) -> FakeDocker:
        docker = FakeDocker(handler)
        monkeypatch.setattr(subprocess, "run", docker)
        return docker

    return install


# -- parsing ----------------------------------------------------------------------------
def test_ps_json_lines_give_the_ids_that_inspect_describes() -> None:
    ids = parse_ps_ids(asset("ps_running.jsonl"))
    full = [c.id for c in containers("inspect_running.json")]
    assert len(ids) == 2 and all(any(f.startswith(i) for f in full) for i in ids)


def test_parse_time_keeps_docker_nanoseconds_and_reads_go_zero_time_as_never() -> None:
    assert parse_time_ns("2026-12-03T09:44:33.539865897Z") == 1796291073539865897
    assert parse_time_ns("2026-12-03T09:46:17.884446930Z") == 1796291177884446930
    assert parse_time_ns("2026-12-03T09:44:33Z") == 1796291073 * 10**9
    assert parse_time_ns("2026-12-03T10:44:33.5+01:00") == 1796291073 * 10**9 + 500_000_000
    assert parse_time_ns("0001-01-01T00:00:00Z") is None
    assert parse_time_ns("not a time") is None


@pytest.mark.parametrize(("code", "expected"), [(137, (None, "SIGKILL")), (143, (None, "SIGTERM")),
                                                (3, (3, None)), (0, (0, None)), (128, (128, None))])
def test_exit_codes_above_128_are_deaths_by_signal(code: int,
                                                   expected: tuple[int | None, str | None]) -> None:
    assert split_exit(code) == expected


def test_running_project_has_state_health_and_uptime() -> None:
    ticker = service_status("ticker", [by_service("inspect_running.json", "ticker")])
    sleeper = service_status("sleeper", [by_service("inspect_running.json", "sleeper")])
    assert (ticker.state, ticker.health, ticker.restarts) == ("running", "healthy", 0)
    assert ticker.started_at == pytest.approx(1796291073.539865897)
    assert "image local/debian:bookworm" in ticker.detail and "gearec_ticker_1" in ticker.detail
    assert (sleeper.state, sleeper.health) == ("running", None)  # no health check


def test_killed_container_shows_the_signal_and_no_uptime() -> None:
    killed = by_service("inspect_killed.json", "ticker")
    status = service_status("ticker", [killed])
    assert (status.state, status.started_at, status.health) == ("exited", None, None)
    record = last_exit(killed)
    assert record is not None
    assert (record.exit_code, record.signal, record.restarted) == (None, "SIGKILL", False)
    assert record.uptime_s == pytest.approx(16.83, abs=0.01)
    assert "last exit: killed by SIGKILL after 17 s" in status.detail


def test_container_started_again_has_lost_its_exit_code() -> None:
    """docker resets ExitCode at the next start: only the time of the exit is left."""
    again = by_service("inspect_started_after_kill.json", "ticker")
    assert (again.status, again.health, again.exit_code) == ("running", "starting", 0)
    record = last_exit(again)
    assert record is not None and record.restarted and record.exit_code is None and record.signal is None
    assert "unknown" in record.note


def test_stopped_container_exited_cleanly() -> None:
    record = last_exit(by_service("inspect_stopped.json", "sleeper"))
    assert record is not None and (record.exit_code, record.signal) == (0, None)
    assert record.describe().startswith("exit code 0 after 19 s")


def test_crash_loop_shows_restarting_with_the_restart_count_and_last_code() -> None:
    crasher = by_service("inspect_crasher.json", "crasher")
    status = service_status("crasher", [crasher])
    assert (status.state, status.restarts, status.started_at) == ("restarting", 6, None)
    record = last_exit(crasher)
    assert record is not None and (record.exit_code, record.restarted) == (3, True)


def test_created_container_never_ran() -> None:
    created = by_service("inspect_created.json", "ticker")
    assert (created.status, created.started_at, created.finished_at) == ("created", None, None)
    assert last_exit(created) is None


def test_a_scaled_service_shows_its_first_container_and_says_how_many() -> None:
    first = by_service("inspect_running.json", "ticker")
    second = Container(**{**first.__dict__, "id": "f" * 64, "name": "gearec_ticker_2", "number": 2})
    status = service_status("ticker", [first, second])
    assert "2 containers, showing #1" in status.detail and "gearec_ticker_1" in status.detail


# -- the failure table --------------------------------------------------------------------
def test_every_failure_kind_has_an_error_and_a_message() -> None:
    missing = [failure for failure in DockerFailure if failure not in FAILURES]
    assert not missing, f"add these to FAILURES: {missing}"


def test_every_failure_kind_is_reached_by_a_recorded_output_or_an_exception() -> None:
    reached = {classify(output=path.read_text()) for path in ERRORS}
    reached |= {classify(FileNotFoundError()), classify(PermissionError()),
                classify(subprocess.TimeoutExpired(["docker"], 1))}
    assert reached == set(DockerFailure), f"no sample reaches: {set(DockerFailure) - reached}"


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_each_recorded_stderr_maps_to_the_failure_its_name_says(path: Path) -> None:
    expected = next(failure for prefix, failure in PREFIXES.items() if path.stem.startswith(prefix))
    assert classify(output=path.read_text()) is expected


# Not recordable here (other clients, other platforms): quoted from public reports.
QUOTED_NO_ENGINE = [
    "failed to connect to the docker API at unix:///run/nothing.sock; check if the path is correct and "
    "if the daemon is running: dial unix /run/nothing.sock: connect: no such file or directory",
    'error during connect: Get "http://%2F%2F.%2Fpipe%2FdockerDesktopLinuxEngine/v1.47/containers/json": '
    "open //./pipe/dockerDesktopLinuxEngine: The system cannot find the file specified.",
]


@pytest.mark.parametrize("stderr", QUOTED_NO_ENGINE)
def test_other_clients_wording_of_no_engine_is_known(stderr: str) -> None:
    assert classify(output=stderr) is DockerFailure.NO_ENGINE


def subprocess_exceptions() -> set[type[BaseException]]:
    """Everything `subprocess.run` can raise for a failed start or wait: its own exception
    classes and every OSError subclass of the standard library."""
    found = {obj for obj in vars(subprocess).values()
             if inspect.isclass(obj) and issubclass(obj, BaseException)}
    found |= {obj for obj in vars(builtins).values() if inspect.isclass(obj) and issubclass(obj, OSError)}
    return found


def test_every_exception_of_running_the_cli_is_mapped() -> None:
    classes = subprocess_exceptions()
    assert subprocess.TimeoutExpired in classes and FileNotFoundError in classes
    unmapped = [cls for cls in classes if not any(issubclass(cls, known) for known, _ in EXCEPTION_FAILURES)]
    assert not unmapped, f"add these to EXCEPTION_FAILURES: {unmapped}"


def test_the_exception_table_has_no_shadowed_rows() -> None:
    seen: list[type[BaseException]] = []
    for kind, _ in EXCEPTION_FAILURES:
        assert not [base for base in seen if issubclass(kind, base)], f"{kind} is shadowed"
        seen.append(kind)


def test_every_message_is_one_line_with_cause_then_fix() -> None:
    for failure, (error_type, _) in FAILURES.items():
        err = docker_error(failure, what="restart x", argv=["docker", "restart", "x"],
                                   detail="boom", timeout_s=30)
        assert isinstance(err, error_type) and isinstance(err, StackError)
        text = str(err)
        assert "\n" not in text and text.startswith("restart x: ")
        assert failure is DockerFailure.OTHER or " — " in text, f"{failure}: no fix in {text!r}"


def stand_in_cli(tmp_path: Path, body: str, name: str = "docker") -> str:
    """A stand-in docker CLI (a shell script, test double) for the real subprocess path."""
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_recorded_failures_through_a_real_subprocess(tmp_path: Path, path: Path) -> None:
    cli = stand_in_cli(tmp_path, f"cat '{path}' >&2; exit 1")
    expected_type = FAILURES[classify(output=path.read_text())][0]
    with pytest.raises(StackError) as caught:
        run_docker([cli, "ps"], what="list")
    assert type(caught.value) is expected_type
    assert path.read_text().splitlines()[0].strip() in str(caught.value)


def test_no_cli_says_install_docker_or_set_geadmin_docker(tmp_path: Path) -> None:
    with pytest.raises(DockerUnavailableError, match="install docker, or set GEADMIN_DOCKER"):
        run_docker([str(tmp_path / "nowhere" / "docker"), "ps"], what="list")


def test_a_cli_that_is_not_executable_is_unavailable(tmp_path: Path) -> None:
    not_executable = tmp_path / "docker"
    not_executable.write_text("not a program")
    with pytest.raises(DockerUnavailableError, match="cannot run the docker CLI"):
        run_docker([str(not_executable), "ps"], what="list")


def test_a_hung_cli_is_killed_at_the_timeout(tmp_path: Path) -> None:
    cli = stand_in_cli(tmp_path, "exec sleep 30")
    with pytest.raises(DockerError, match=r"did not finish within 0.5s .*check `docker info`"):
        run_docker([cli, "ps"], what="list", timeout_s=0.5)


def test_engine_down_names_the_three_fixes() -> None:
    err = docker_error(DockerFailure.NO_ENGINE, what="list", argv=["docker", "ps"],
                               detail=asset("errors/no_engine_unix.stderr").strip(), timeout_s=30)
    assert isinstance(err, DockerUnavailableError)
    assert all(fix in str(err) for fix in ("systemctl start docker", "DOCKER_HOST", "/var/run/docker.sock"))
    denied = docker_error(DockerFailure.SOCKET_DENIED, what="list", argv=["docker", "ps"], detail="",
                                  timeout_s=30)
    assert "docker group" in str(denied) and "group_add" in str(denied)


# -- the driver's commands ----------------------------------------------------------------
def test_the_driver_is_a_stack_driver() -> None:
    driver: StackDriver = ComposeDriver("gearec")
    assert driver.kind == "compose"


def test_services_are_found_by_the_project_label(fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(recorded("ps_running.jsonl", "inspect_running.json"))
    services = ComposeDriver("gearec", docker="/usr/bin/docker").services()
    assert [s.name for s in services] == ["sleeper", "ticker"]
    ps, _ = docker.calls[0]
    assert ps == ["/usr/bin/docker", "ps", "-a", "--filter", "label=com.docker.compose.project=gearec",
                  "--format", "{{json .}}"]
    assert docker.calls[1][0][:3] == ["/usr/bin/docker", "container", "inspect"]


def test_one_off_run_containers_are_not_the_service(fake: Callable[[Handler], FakeDocker]) -> None:
    items = json.loads(asset("inspect_running.json"))
    items[0]["Config"]["Labels"]["com.docker.compose.oneoff"] = "True"
    fake(lambda argv: asset("ps_running.jsonl") if argv[1] == "ps" else json.dumps(items))
    assert len(ComposeDriver("gearec").services()) == 1


def test_restart_restarts_the_service_containers_then_checks_them(
        fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(recorded("ps_running.jsonl", "inspect_running.json"))
    ComposeDriver("gearec").restart("ticker")
    assert docker.verbs() == ["ps", "container inspect", "restart", "ps", "container inspect"]
    ps, _ = docker.calls[0]
    assert "label=com.docker.compose.service=ticker" in ps
    restart, kwargs = docker.calls[2]
    assert restart[2:] == [c.id for c in containers("inspect_running.json")]
    assert kwargs["timeout"] >= 60  # docker waits the grace period


def test_restart_reports_a_container_that_does_not_stay_up(fake: Callable[[Handler], FakeDocker]) -> None:
    inspected = iter(["inspect_running.json", "inspect_killed.json"])

    def handle(argv: list[str]) -> str:
        if argv[1] == "ps":
            return asset("ps_running.jsonl")
        return asset(next(inspected)) if argv[1] == "container" else ""

    fake(handle)
    stayed_down = r"did not stay up \(killed by SIGKILL after 17 s\) — read its logs"
    with pytest.raises(DockerError, match=stayed_down):
        ComposeDriver("gearec").start("ticker")


def test_stop_does_not_wait_for_the_container_to_come_back(fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(recorded("ps_running.jsonl", "inspect_stopped.json"))
    ComposeDriver("gearec").stop("sleeper")
    assert docker.verbs() == ["ps", "container inspect", "stop"]


def test_logs_tail_with_timestamps_and_stderr_merged(fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(recorded("ps_running.jsonl", "inspect_running.json", logs=asset("logs_ticker_tail6.txt")))
    lines = ComposeDriver("gearec").logs("ticker", tail=6)
    assert lines == asset("logs_ticker_tail6.txt").splitlines()
    assert {"tick 86", "tock 86"} <= {line.split(" ", 1)[1] for line in lines}  # both streams
    argv, kwargs = docker.calls[-1]
    assert argv[1:5] == ["logs", "--tail", "6", "--timestamps"]
    assert kwargs["stderr"] is subprocess.STDOUT  # one stream, in docker's order


def test_history_is_the_last_exit_docker_keeps(fake: Callable[[Handler], FakeDocker]) -> None:
    fake(recorded("ps_running.jsonl", "inspect_killed.json"))
    [record] = ComposeDriver("gearec").history("ticker")
    assert record.signal == "SIGKILL" and record.at == pytest.approx(1796291090.369, abs=0.001)


def test_unknown_service_names_the_services_there_are(fake: Callable[[Handler], FakeDocker]) -> None:
    def handle(argv: list[str]) -> str:
        if argv[1] == "ps":
            return "" if any("service=" in a for a in argv) else asset("ps_running.jsonl")
        return asset("inspect_running.json")

    fake(handle)
    with pytest.raises(ServiceNotFoundError, match=r"no service 'trtion' \(it has: sleeper, ticker\)"):
        ComposeDriver("gearec").restart("trtion")


def test_a_project_without_containers_says_how_to_bring_it_up(fake: Callable[[Handler], FakeDocker]) -> None:
    fake(lambda argv: "")
    driver = ComposeDriver("geadmin")
    assert driver.services() == []
    with pytest.raises(ServiceNotFoundError,
                       match=r"docker compose -p geadmin up -d.*GEADMIN_COMPOSE_PROJECT"):
        driver.logs("triton")


def test_a_container_removed_between_ps_and_inspect_is_listed_again(
        fake: Callable[[Handler], FakeDocker]) -> None:
    gone: tuple[int, str, str] = (1, "[]", asset("errors/no_such_container_inspect.stderr"))
    answers: list[tuple[int, str, str] | str] = [gone, asset("inspect_running.json")]
    replies = iter(answers)
    fake(lambda argv: asset("ps_running.jsonl") if argv[1] == "ps" else next(replies))
    assert len(ComposeDriver("gearec").services()) == 2


def test_a_container_gone_before_the_action_is_service_not_found(
        fake: Callable[[Handler], FakeDocker]) -> None:
    stderr = asset("errors/no_such_container_restart.stderr")
    fake(recorded("ps_running.jsonl", "inspect_running.json", restart=(1, "", stderr)))
    with pytest.raises(ServiceNotFoundError, match=r"the container is gone .* refresh and retry"):
        ComposeDriver("gearec").restart("ticker")


def test_settings_choose_the_project_and_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEADMIN_COMPOSE_PROJECT", raising=False)
    monkeypatch.delenv("GEADMIN_DOCKER", raising=False)
    assert compose_project_from_settings() is None
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "geadmin")
    driver = compose_project_from_settings()
    assert driver is not None and (driver.project, driver.docker) == ("geadmin", "docker")
    monkeypatch.setenv("GEADMIN_DOCKER", "/opt/docker/bin/docker")
    driver = compose_project_from_settings()
    assert driver is not None and driver.docker == "/opt/docker/bin/docker"


# -- Triton's log through docker logs -----------------------------------------------------
TICKER_LOG = asset("logs_ticker_tail6.txt")


def test_cursor_is_the_last_line_and_read_gives_only_what_follows(
        fake: Callable[[Handler], FakeDocker]) -> None:
    head = "".join(line + "\n" for line in TICKER_LOG.splitlines()[:3])
    docker = fake(log_replay(head))
    source = ComposeLogSource(ComposeDriver("gearec"), service="ticker")
    cursor = source.cursor()
    assert cursor.offset == 1796291176882848121 and cursor.inode != 0
    docker.handler = log_replay(TICKER_LOG)  # three more lines were written
    lines, end = source.read(cursor)
    assert lines == ["tick 86", "tick 87", "tock 87"]  # docker's timestamp removed; none twice
    assert "--since" in docker.calls[-1][0] and "1796291176.882848121" in docker.calls[-1][0]
    assert end.offset == 1796291177884446930 and end.inode == cursor.inode
    assert source.read(end)[0] == []


def test_a_recreated_container_is_read_from_its_start(fake: Callable[[Handler], FakeDocker]) -> None:
    docker = fake(log_replay(TICKER_LOG))
    source = ComposeLogSource(ComposeDriver("gearec"), service="ticker")
    cursor = source.cursor()
    old = LogCursor(cursor.offset, cursor.at, cursor.inode + 1)  # another container's cursor
    lines, _ = source.read(old)
    assert len(lines) == 6 and "--since" not in docker.calls[-1][0]


def test_last_lines_follow_the_log_incrementally(fake: Callable[[Handler], FakeDocker]) -> None:
    head = "".join(line + "\n" for line in TICKER_LOG.splitlines()[:2])
    docker = fake(log_replay(head))
    source = ComposeLogSource(ComposeDriver("gearec"), service="ticker")
    assert source.last_lines(["tick", "tock"]) == {"tick": "tick 85", "tock": "tock 85"}
    docker.handler = log_replay(TICKER_LOG)
    assert source.last_lines(["tick"]) == {"tick": "tick 87"}
    assert "--since" in docker.calls[-1][0]  # only what was written since


def test_an_unreadable_log_never_stops_the_action_it_explains(fake: Callable[[Handler], FakeDocker]) -> None:
    fake(lambda argv: (1, "", asset("errors/no_engine_unix.stderr")))
    source = ComposeLogSource(ComposeDriver("gearec"))
    cursor = source.cursor()
    assert source.read(cursor) == ([], cursor)
    assert source.last_lines(["digits"]) == {}
    assert "unreadable: " in source.description and "no Docker engine answers" in source.description
