"""`geadmin infer --print-curl/--print-python` use the server's own endpoints (the core's
`server_urls`: the live stack's stack.json), not Triton's default ports — the CLI keeps no
copy of the URL or top-k helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geadmin.cli import infer as cli_infer
from geadmin.cli.main import main
from geadmin.domain import Ports
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace
from tests.support.apptest import isolate


def grpc_url(server: TritonProcess) -> str:
    return f"grpc://127.0.0.1:{server.ports.grpc}"  # as `geadmin up` writes it in stack.json


def publish_stack(home: Path, server: TritonProcess) -> StackInfo:
    """stack.json of a `geadmin up` whose Triton is `server` (on free ports, not 8000/8001),
    owned by this live process."""
    info = StackInfo(pid=os.getpid(), http_url=server.http_url, grpc_url=grpc_url(server),
                     metrics_url=server.metrics_url,
                     ports=Ports(server.ports.http, server.ports.grpc, server.ports.metrics),
                     dashboard_url="http://127.0.0.1:9", triton_log=server.log_path,
                     repository=server.repository, home=home, triton_pid=server.pid)
    home.mkdir(parents=True, exist_ok=True)
    Workspace(home).write_stack(info)
    return info


def test_print_curl_uses_the_stacks_http_port_when_pointed_at_its_grpc_port(
        triton_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    isolate(monkeypatch, tmp_path / "home")
    publish_stack(tmp_path / "home", triton_server)
    assert triton_server.ports.http != 8000
    monkeypatch.setenv("GEADMIN_TRITON_URL", grpc_url(triton_server))
    monkeypatch.chdir(tmp_path)
    assert main(["infer", "digits_classifier", "--print-curl"]) == 0
    out, err = capsys.readouterr()
    assert f"{triton_server.http_url}/v2/models/digits_classifier/infer" in out
    assert ":8000" not in out and "note: curl speaks HTTP" not in err
    assert main(["infer", "digits_classifier", "--print-python"]) == 0
    assert f"URL = '127.0.0.1:{triton_server.ports.grpc}'" in capsys.readouterr().out


def test_print_python_over_grpc_uses_the_stacks_grpc_port(
        triton_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    isolate(monkeypatch, tmp_path / "home")
    publish_stack(tmp_path / "home", triton_server)
    monkeypatch.chdir(tmp_path)
    assert main(["infer", "digits_classifier", "--protocol", "grpc", "--print-python"]) == 0
    out = capsys.readouterr().out
    assert "tritonclient.grpc" in out and f"URL = '127.0.0.1:{triton_server.ports.grpc}'" in out


def test_the_cli_keeps_no_copy_of_the_core_helpers() -> None:
    for copy in ("_top_k_plan", "_ranked", "_http_url", "client_url"):
        assert not hasattr(cli_infer, copy), f"geadmin.cli.infer.{copy}: call the core instead"
