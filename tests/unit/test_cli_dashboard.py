"""`geadmin dashboard` talks to the Triton every other command picks: the running stack of its
workspace before the default address (it used to poll :8000 beside a stack on other ports)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from geadmin.cli.main import main
from geadmin.domain import Ports
from geadmin.stack.workspace import StackInfo, Workspace


def _run_dashboard(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    seen: dict[str, Any] = {}

    def exec_instead(path: str, argv: list[str], env: dict[str, str]) -> None:  # Streamlit not started
        seen.update(env=env, argv=argv)

    monkeypatch.setattr(os, "execvpe", exec_instead)
    assert main(["dashboard", "--port", "18501"]) == 0
    return dict(seen["env"])


def test_the_dashboard_in_a_running_stacks_workspace_targets_that_stacks_triton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    monkeypatch.delenv("GEADMIN_TRITON_URL", raising=False)
    workspace = Workspace(home)
    workspace.ensure()
    workspace.write_stack(StackInfo(
        pid=os.getpid(), http_url="http://127.0.0.1:28100", grpc_url="grpc://127.0.0.1:28101",
        metrics_url="http://127.0.0.1:28102/metrics", ports=Ports(28100, 28101, 28102),
        dashboard_url="http://127.0.0.1:28103", triton_log=workspace.triton_log,
        repository=workspace.repository, home=home, triton_pid=os.getpid()))
    env = _run_dashboard(monkeypatch)
    assert env["GEADMIN_TRITON_URL"] == "http://127.0.0.1:28100"
    assert "the embedded stack of" in capsys.readouterr().out


def test_without_a_stack_the_dashboard_uses_the_variable_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("GEADMIN_TRITON_URL", raising=False)
    assert _run_dashboard(monkeypatch)["GEADMIN_TRITON_URL"] == "http://127.0.0.1:8000"
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://127.0.0.2:9000")
    assert _run_dashboard(monkeypatch)["GEADMIN_TRITON_URL"] == "http://127.0.0.2:9000"
