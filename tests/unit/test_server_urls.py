"""One rule for a server's HTTP, gRPC and metrics URLs (geadmin.stack.target.server_urls),
used by every command's `--protocol`, by `geadmin npu` and by the NPU page."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from geadmin.cli.common import client_for, protocol_url, triton_metrics
from geadmin.domain import Ports
from geadmin.stack.target import configured_targets, resolve, server_urls
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.servers import ServerSpec

STACK_PORTS = Ports(18000, 18001, 18002)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_METRICS_URL",
                 "HTTP_PORT", "GRPC_PORT", "METRICS_PORT", "TRITON_LOG", "REPOSITORY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))


def stack(tmp_path: Path) -> StackInfo:
    workspace = Workspace(tmp_path / "home")
    return StackInfo(pid=os.getpid(), http_url=f"http://127.0.0.1:{STACK_PORTS.http}",
                     grpc_url=f"grpc://127.0.0.1:{STACK_PORTS.grpc}",
                     metrics_url=f"http://127.0.0.1:{STACK_PORTS.metrics}/metrics", ports=STACK_PORTS,
                     dashboard_url="", triton_log=workspace.triton_log, repository=workspace.repository,
                     home=workspace.home)


def publish(info: StackInfo) -> None:
    """As a running `geadmin up` does: stack.json in the workspace, naming a live pid (ours)."""
    info.home.mkdir(parents=True, exist_ok=True)
    Workspace(info.home).write_stack(info)


def test_the_stacks_triton_gets_the_stacks_urls_over_either_protocol(tmp_path: Path) -> None:
    info = stack(tmp_path)
    for url in (info.http_url, info.grpc_url):
        urls = server_urls(ServerSpec("local", url), info)
        assert (urls.http, urls.grpc, urls.metrics) == (info.http_url, info.grpc_url, info.metrics_url)
        assert urls.guessed == frozenset()


def test_another_server_gets_the_settings_ports_on_its_host_as_a_guess(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_GRPC_PORT", "9101")
    urls = server_urls(ServerSpec("b", "https://triton-b:9100"), stack(tmp_path))
    assert (urls.http, urls.grpc, urls.metrics) == ("https://triton-b:9100", "grpcs://triton-b:9101",
                                                    "http://triton-b:8002/metrics")
    assert urls.guessed == {"grpc", "metrics"}


def test_the_servers_file_names_a_servers_other_endpoints(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text('[[server]]\nname = "b"\nurl = "http://triton-b:9100"\n'
                       'grpc_url = "grpc://triton-b:9200"\nmetrics_url = "http://triton-b:9300/metrics"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    (target,) = configured_targets(None)
    urls = target.urls()
    assert (urls.grpc, urls.metrics) == ("grpc://triton-b:9200", "http://triton-b:9300/metrics")
    assert urls.guessed == frozenset()
    assert urls.given == {"grpc", "metrics"}


def test_the_metrics_variable_belongs_to_the_default_server_only(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://triton:8000")
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", "http://metrics-proxy:9000/metrics")
    assert resolve().urls().metrics == "http://metrics-proxy:9000/metrics"
    assert "metrics" in resolve().urls().given
    assert resolve(url="http://other:8000").urls().metrics == "http://other:8002/metrics"


def args(**values: object) -> argparse.Namespace:
    base = {"url": None, "server": None, "protocol": None, "admin_key": None, "timeout": 1.0}
    return argparse.Namespace(**{**base, **values})


def test_protocol_grpc_without_url_uses_the_live_stacks_grpc_port(tmp_path: Path) -> None:
    info = stack(tmp_path)
    publish(info)
    target = resolve(stack=info)
    assert protocol_url(target, "grpc", None) == info.grpc_url
    assert protocol_url(target, "http", None) == info.http_url
    assert protocol_url(target, None, None) == info.http_url
    with client_for(target, args(protocol="grpc")) as client:
        assert client.url == info.grpc_url


def test_protocol_with_an_explicit_url_keeps_that_address(tmp_path: Path) -> None:
    target = resolve(url="127.0.0.1:9001")
    assert protocol_url(target, "grpc", "127.0.0.1:9001") == "grpc://127.0.0.1:9001"


def test_geadmin_npu_and_the_npu_page_find_the_same_metrics_url(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    info = stack(tmp_path)
    publish(info)
    page_target = configured_targets(info)[0]  # what the page's selected server is by default
    assert triton_metrics(argparse.Namespace(metrics_url=None)) == (info.metrics_url, False)
    assert page_target.urls().metrics == info.metrics_url
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://triton:8000")  # the compose dashboard's settings
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", "http://triton:8002/metrics")
    assert triton_metrics(argparse.Namespace(metrics_url=None)) == ("http://triton:8002/metrics", True)
    assert configured_targets(info)[0].urls().metrics == "http://triton:8002/metrics"
    flag = argparse.Namespace(metrics_url="http://x:1/metrics")
    assert triton_metrics(flag) == ("http://x:1/metrics", True)


def test_an_unused_bad_port_setting_breaks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_METRICS_PORT", "not-a-port")
    info = stack(tmp_path)
    assert server_urls(ServerSpec("local", info.http_url), info).metrics == info.metrics_url
