"""Which Triton a command talks to, and which log and repository explain it (stack.json)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geadmin.domain import Endpoint, Ports
from geadmin.errors import ConfigError
from geadmin.stack.target import resolve
from geadmin.stack.workspace import StackInfo, Workspace


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRITON_URL", "TRITON_URLS", "SERVERS_FILE", "TRITON_LOG", "REPOSITORY", "ADMIN_KEY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def stack_info(home: Path, pid: int | None = None) -> StackInfo:
    return StackInfo(pid=pid or os.getpid(), http_url="http://127.0.0.1:18000", grpc_url="grpc://127.0.0.1:18001",
                     metrics_url="http://127.0.0.1:18002/metrics", ports=Ports(18000, 18001, 18002),
                     dashboard_url="http://127.0.0.1:18501", triton_log=home / "logs" / "tritonserver.log",
                     repository=home / "model_repository", home=home)


def test_stack_file_round_trips_and_a_dead_stack_is_ignored(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    assert workspace.live_stack() is None
    workspace.write_stack(stack_info(tmp_path))
    assert workspace.live_stack() == stack_info(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["stack.json"]  # no temp file left
    workspace.write_stack(stack_info(tmp_path, pid=2**22 + 7))  # no such process
    assert workspace.live_stack() is None
    workspace.stack_file.write_text("{ half a file")
    assert workspace.live_stack() is None
    workspace.remove_stack()
    assert not workspace.stack_file.exists()


def test_without_flags_the_cli_uses_the_live_stack_with_its_log_and_repository(tmp_path: Path) -> None:
    stack = stack_info(tmp_path)
    target = resolve(stack=stack)
    assert target.spec.url == "http://127.0.0.1:18000"
    assert (target.log_path, target.repository) == (stack.triton_log, stack.repository)
    assert "embedded stack" in target.source and target.notes == ()


def test_the_stacks_grpc_port_is_the_same_server(tmp_path: Path) -> None:
    stack = stack_info(tmp_path)
    target = resolve(url="grpc://127.0.0.1:18001", stack=stack)
    assert target.log_path == stack.triton_log


def test_without_a_stack_the_default_address_and_no_log(tmp_path: Path) -> None:
    target = resolve()
    assert target.spec.url == "http://127.0.0.1:8000" and target.log_path is None


def test_explicit_env_url_wins_over_the_stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "grpc://10.0.0.5:8001")
    target = resolve(stack=stack_info(tmp_path))
    assert target.spec.url == "grpc://10.0.0.5:8001" and target.log_path is None


def test_env_log_is_used_for_its_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://10.0.0.5:8000")
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(tmp_path / "prod.log"))
    assert resolve().log_path == tmp_path / "prod.log"
    assert resolve(url="10.0.0.5:8000").log_path == tmp_path / "prod.log"


def test_env_log_for_another_server_is_not_used_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://10.0.0.5:8000")
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(tmp_path / "prod.log"))
    target = resolve(url="http://10.0.0.6:8000")
    assert target.log_path is None
    (note,) = target.notes
    assert "GEADMIN_TRITON_LOG" in note and "10.0.0.5" in note and "--triton-log" in note


def test_env_log_without_env_url_belongs_to_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(tmp_path / "mine.log"))
    assert resolve(stack=stack_info(tmp_path)).log_path == tmp_path / "mine.log"


def test_flags_win(tmp_path: Path) -> None:
    target = resolve(url="http://h:1", triton_log=tmp_path / "x.log", repository=tmp_path / "r",
                     admin_key="k", stack=stack_info(tmp_path))
    assert (target.spec.url, target.log_path, target.repository, target.spec.admin_key) == (
        "http://h:1", tmp_path / "x.log", tmp_path / "r", "k")


def test_server_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URLS", "prod=grpc://10.0.0.5:8001,canary=http://10.0.0.6:8000")
    assert resolve(server="canary").spec.url == "http://10.0.0.6:8000"
    with pytest.raises(ConfigError, match="no server named 'x'; configured: prod, canary"):
        resolve(server="x")


@pytest.mark.parametrize("url", ["htp:/host:8000", "grpc:host:8001", "ftp://host:21", "http://", "http://h:99999",
                                 "http://h:8000/v2", "[::1"])
def test_malformed_urls_name_the_accepted_forms(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Endpoint.parse(url)
    assert "grpc://host:8001" in str(caught.value) or "invalid" in str(caught.value)


def test_bare_host_port_and_ipv6_parse() -> None:
    assert Endpoint.parse("localhost:8000").url == "http://localhost:8000"
    assert Endpoint.parse("grpc://[::1]:8001").address == "[::1]:8001"  # a bare ::1:8001 is no address
