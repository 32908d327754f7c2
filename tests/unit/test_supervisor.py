"""The supervisor's policy and the local driver, without processes: backoff, exit records,
stack.json round trip, log tails, backend directories, driver choice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from geadmin.domain import Ports
from geadmin.errors import ConfigError, ServiceNotFoundError, StackError
from geadmin.stack import backends
from geadmin.stack.choose import choose_driver
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.local import LocalDriver, tail_lines
from geadmin.stack.supervisor import Backoff, exit_record
from geadmin.stack.workspace import LoadOutcome, StackInfo, Workspace


def test_backoff_doubles_to_30s_and_resets_after_a_healthy_minute() -> None:
    backoff = Backoff()
    assert [backoff.after_exit(2.0) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.after_exit(61.0) == 1  # that run was healthy: start over
    assert backoff.after_exit(0.5) == 2


def test_exit_records_name_the_signal_or_the_exit_code() -> None:
    killed = exit_record(-signal.SIGKILL, 12.0, True)
    assert (killed.signal, killed.exit_code) == ("SIGKILL", None)
    assert killed.describe() == "killed by SIGKILL after 12 s"
    crashed = exit_record(134, 3.0, False, "x")
    assert (crashed.signal, crashed.exit_code) == (None, 134)
    assert crashed.describe() == "exit code 134 after 3 s (x)"


def stack_info(home: Path, **overrides: object) -> StackInfo:
    values: dict[str, object] = dict(
        pid=os.getpid(), http_url="http://127.0.0.1:1", grpc_url="grpc://127.0.0.1:2",
        metrics_url="http://127.0.0.1:3/metrics", ports=Ports(1, 2, 3),
        dashboard_url="http://127.0.0.1:4", triton_log=home / "logs" / "tritonserver.log",
        repository=home / "repo", home=home, triton_pid=os.getpid(), triton_state="running",
        triton_started_at=1.0, exits=(ExitRecord(5.0, None, "SIGKILL", 4.0, True, ""),),
        loads=(LoadOutcome("a", True, "READY"), LoadOutcome("b", False, "no model.py")),
        dashboard_pid=os.getpid(), dashboard_started_at=2.0, dashboard_log=home / "d.log")
    values.update(overrides)
    return StackInfo(**values)  # type: ignore[arg-type]


def test_stack_json_round_trips_the_supervisors_state(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    info = stack_info(tmp_path)
    workspace.write_stack(info)
    assert workspace.live_stack() == info


def test_an_older_stack_json_without_supervisor_state_still_reads(tmp_path: Path) -> None:
    data = stack_info(tmp_path).to_json()
    del data["triton"], data["dashboard"]
    assert StackInfo.from_json(data).exits == ()


def test_local_driver_reports_services_and_history_from_stack_json(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    workspace.write_stack(stack_info(tmp_path))
    driver = LocalDriver(workspace)
    triton, dashboard = driver.services()
    assert (triton.name, triton.state, triton.restarts) == ("triton", "running", 1)
    assert triton.health == "unhealthy"  # nothing answers on port 1
    assert dashboard.name == "dashboard" and dashboard.running
    assert driver.history("triton")[0].signal == "SIGKILL"
    assert driver.history("dashboard") == []
    with pytest.raises(ServiceNotFoundError, match="it has: triton, dashboard"):
        driver.history("prometheus")
    with pytest.raises(StackError, match="cannot stop itself"):
        driver.stop("dashboard")


def test_a_dead_triton_pid_shows_as_exited_with_the_last_exit(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    workspace.write_stack(stack_info(tmp_path, triton_pid=2 ** 22 + 7))
    triton = LocalDriver(workspace).services()[0]
    assert triton.state == "exited" and "killed by SIGKILL" in triton.detail


def test_local_driver_without_a_running_stack_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="start it with `geadmin up`"):
        LocalDriver(Workspace(tmp_path)).services()


def test_tail_lines_reads_only_the_end(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))
    assert tail_lines(log, 3, chunk=64) == ["line 99997", "line 99998", "line 99999"]
    assert tail_lines(tmp_path / "missing.log", 3) == []


def test_backend_dirs_are_checked_for_their_library(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected NAME=DIR"):
        backends.parse_backend_dirs(["npu_ge"])
    with pytest.raises(ConfigError, match=r"libtriton_npu_ge\.so does not exist"):
        backends.parse_backend_dirs([f"npu_ge={tmp_path}"])
    with pytest.raises(ConfigError, match="always comes from the nvidia-pytriton wheel"):
        backends.parse_backend_dirs([f"python={tmp_path}"])
    (tmp_path / "libtriton_npu_ge.so").write_bytes(b"")
    assert backends.parse_backend_dirs([f"npu_ge={tmp_path}"]) == {"npu_ge": tmp_path.resolve()}


def test_without_a_built_npu_ge_up_says_how_to_get_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "BUILT_NPU_GE", tmp_path / "nowhere")
    monkeypatch.delenv("GEADMIN_BACKEND_DIRS", raising=False)
    said: list[str] = []
    assert backends.backend_dirs(None, said.append) == {}
    assert said == [backends.NPU_GE_HOWTO] and "make backend" in said[0]


def test_backend_dirs_come_from_the_variable_when_no_flag(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "libtriton_npu_ge.so").write_bytes(b"")
    monkeypatch.setenv("GEADMIN_BACKEND_DIRS", f"npu_ge={tmp_path}")
    assert backends.backend_dirs(None, print) == {"npu_ge": tmp_path.resolve()}


def test_driver_choice_follows_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    monkeypatch.delenv("GEADMIN_COMPOSE_PROJECT", raising=False)
    monkeypatch.delenv("GEADMIN_STACK", raising=False)
    assert choose_driver() is None  # no geadmin up here, no compose project
    Workspace(tmp_path).write_stack(stack_info(tmp_path))
    assert isinstance(choose_driver(), LocalDriver)
    monkeypatch.setenv("GEADMIN_STACK", "compose")
    with pytest.raises(ConfigError, match="needs GEADMIN_COMPOSE_PROJECT"):
        choose_driver()
    monkeypatch.setenv("GEADMIN_STACK", "kubernetes")
    with pytest.raises(ConfigError, match="expected auto, local or compose"):
        choose_driver()


def test_a_compose_project_picks_the_compose_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from geadmin.stack.compose import ComposeDriver

    monkeypatch.delenv("GEADMIN_STACK", raising=False)
    monkeypatch.setenv("GEADMIN_COMPOSE_PROJECT", "geadmin")
    monkeypatch.setenv("GEADMIN_DOCKER", "/usr/bin/docker-x")
    driver = choose_driver()
    assert isinstance(driver, ComposeDriver) and driver.kind == "compose"
    assert driver.project == "geadmin" and driver.docker == "/usr/bin/docker-x"


def test_the_dashboards_restarts_and_exits_are_counted_like_tritons(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    killed = ExitRecord(6.0, None, "SIGKILL", 30.0, True, "")
    workspace.write_stack(stack_info(tmp_path, dashboard_exits=(killed,)))
    driver = LocalDriver(workspace)
    assert driver.services()[1].restarts == 1  # it said 0 whatever happened
    assert driver.history("dashboard") == [killed]
