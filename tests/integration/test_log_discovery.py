"""A Triton the CLI was pointed at by URL alone (no GEADMIN_TRITON_LOG, no GEADMIN_HOME):
its log is found — from a live stack.json naming the URL, Triton's logging API (`log_file`),
or the process listening on the port — so a rejected config is explained by its real reason,
not "failed to poll from model repository". Real tritonservers throughout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.cli.main import main
from geadmin.domain import Ports
from geadmin.stack.log_discovery import find_log
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.logs import is_tritonserver, listening_pids, process_log_file
from tests.support.processes import wait_for

GRAPH_EXECUTOR = "unexpected platform type 'graph_executor'"


@pytest.fixture(autouse=True)
def no_workspace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell without GEADMIN_HOME, whose default workspace is empty."""
    for name in ("HOME", "TRITON_URL", "TRITON_URLS", "SERVERS_FILE", "ADMIN_KEY", "TRITON_LOG",
                 "REPOSITORY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "geadmin"


def break_config(server: TritonProcess, model: str = "digits_classifier") -> None:
    config = server.repository / model / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'platform: "graph_executor"'))


def publish_stack(home: Path, server: TritonProcess) -> None:
    """stack.json of a `geadmin up` (this live process) whose Triton is `server`."""
    home.mkdir(parents=True, exist_ok=True)
    ports = Ports(server.ports.http, server.ports.grpc, server.ports.metrics)
    Workspace(home).write_stack(StackInfo(
        pid=os.getpid(), http_url=server.http_url, grpc_url=f"grpc://127.0.0.1:{server.ports.grpc}",
        metrics_url=server.metrics_url, ports=ports,
        dashboard_url="http://127.0.0.1:9", triton_log=server.log_path, repository=server.repository,
        home=home, triton_pid=server.pid))


def test_load_by_url_alone_explains_a_rejected_config_from_the_log_of_the_process_on_the_port(
        triton_factory: Callable[..., TritonProcess], capsys: pytest.CaptureFixture[str]) -> None:
    server = triton_factory(models=["digits_classifier"])
    assert listening_pids(server.ports.http) == [server.pid] and is_tritonserver(server.pid)
    assert process_log_file(server.pid) == server.log_path  # its stdout, as `geadmin up` starts it
    break_config(server)
    assert main(["models", "load", "digits_classifier", "--url", server.http_url]) == 1
    err = capsys.readouterr().err
    assert GRAPH_EXECUTOR in err
    assert f"reading Triton's log {server.log_path}" in err
    assert f"tritonserver (pid {server.pid}) listening on port {server.ports.http}" in err


def test_an_embedded_stack_in_another_workspace_is_recognised_with_its_repository(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path, no_workspace: Path) -> None:
    other = tmp_path / "elsewhere"  # started with GEADMIN_HOME=elsewhere, from another shell
    server = triton_factory(models=["digits_classifier"], log_path=Workspace(other).triton_log)
    publish_stack(other, server)
    found = find_log(server.http_url)
    assert found is not None and found.path == Workspace(other).triton_log
    assert found.home == other and found.repository == server.repository
    assert "the embedded stack of" in found.how
    assert find_log(f"grpc://127.0.0.1:{server.ports.grpc}") is not None  # its other port too


def test_the_default_workspace_is_searched_even_when_geadmin_home_points_elsewhere(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path, no_workspace: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = triton_factory(models=["digits_classifier"])
    publish_stack(no_workspace, server)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "empty-home"))
    found = find_log(server.http_url)
    assert found is not None and found.how == f"the embedded stack of {no_workspace}"


def test_the_logging_api_names_the_log_file_of_a_server_started_with_log_file(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    log_file = tmp_path / "triton-own.log"
    server = triton_factory(models=["digits_classifier"], extra_args=[f"--log-file={log_file}"])
    found = find_log(server.http_url)
    assert found is not None and found.path == log_file and found.how == "Triton's logging API (log_file)"
    break_config(server)
    assert main(["models", "load", "digits_classifier", "--url", server.http_url]) == 1
    assert GRAPH_EXECUTOR in capsys.readouterr().err


def test_a_server_on_another_host_is_not_guessed_at() -> None:
    assert find_log("http://192.0.2.1:8000") is None  # TEST-NET-1: never this host; nothing is sent


def test_an_explicit_log_wins_and_nothing_is_searched(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = triton_factory(models=["digits_classifier"])
    empty = tmp_path / "other.log"
    empty.write_text("")
    assert main(["models", "list", "--url", server.http_url, "--triton-log", str(empty)]) == 0
    assert "reading Triton's log" not in capsys.readouterr().err


def test_another_program_on_the_port_is_not_taken_for_triton_nor_its_output_for_a_log(
        tmp_path: Path) -> None:
    port = free_port()
    output = tmp_path / "web.log"
    with output.open("w") as stdout:
        web = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                               stdout=stdout, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: listening_pids(port) == [web.pid], timeout_s=20), "it never listened"
        assert process_log_file(web.pid) == output  # what an unchecked discovery would have read
        assert not is_tritonserver(web.pid)
        assert find_log(f"http://127.0.0.1:{port}") is None
    finally:
        web.terminate()
        web.wait(timeout=10)
