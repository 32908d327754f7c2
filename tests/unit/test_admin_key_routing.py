"""The admin key goes only where it must: on Triton's restricted calls, to the server it is
configured for. Proved with a listener posing as Triton (tests/support/
triton_header_recorder_double.py: records every request's headers and answers like Triton
would; why a real Triton cannot serve here is said there), not by reading our own code."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ruamel.yaml import YAML

from geadmin.domain import Ports
from geadmin.errors import ConfigError
from geadmin.stack.target import configured_targets, resolve
from geadmin.stack.tritonserver import RESTRICTED_APIS, TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.client import Tensor, TritonClient
from geadmin.triton.connection import RESTRICTED
from geadmin.triton.servers import ServerSpec, key_warning, load_servers
from tests.support.triton_header_recorder_double import TritonHeaderRecorderDouble

KEY = "key-of-server-a"
OTHER_KEY = "key-of-the-environment"
ROOT = Path(__file__).resolve().parents[2]
@pytest.fixture
def posing() -> Iterator[TritonHeaderRecorderDouble]:
    server = TritonHeaderRecorderDouble()
    yield server
    server.close()


@pytest.fixture
def posing_b() -> Iterator[TritonHeaderRecorderDouble]:
    server = TritonHeaderRecorderDouble()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_METRICS_URL",
                 "HTTP_PORT", "GRPC_PORT", "METRICS_PORT", "TRITON_LOG", "REPOSITORY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))


def every_call(client: TritonClient) -> None:
    """Each kind of call the facade makes: unrestricted first, then restricted."""
    client.is_live()
    client.is_ready()
    client.server_info()
    client.model_ready("m")
    client.model_metadata("m")
    client.model_statistics("m")
    client.infer("m", [Tensor("x", "FP32", np.zeros(1, dtype=np.float32))])
    client.repository_index()
    client.model_config("m")
    client.load("m")
    client.unload("m")
    client.log_settings()


def test_only_restricted_calls_carry_the_key(posing: TritonHeaderRecorderDouble) -> None:
    with TritonClient(posing.url, admin_key=KEY) as client:
        every_call(client)
    restricted = {"/v2/repository/index", "/v2/models/m/config", "/v2/repository/models/m/load",
                  "/v2/repository/models/m/unload", "/v2/logging"}
    assert set(posing.keyed()) == restricted
    unrestricted = [(m, p) for m, p, h in posing.requests if p not in restricted]
    assert {p for _, p in unrestricted} >= {"/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/m",
                                             "/v2/models/m/ready", "/v2/models/m/stats", "/v2/models/m/infer"}
    assert all(h["admin-key"] == KEY for _, p, h in posing.requests if p in restricted)


def test_the_client_and_the_server_flags_name_the_same_restricted_categories() -> None:
    # shared-memory: restricted on every stack, never called through TritonClient (geadmin
    # registers shared memory only through perf_analyzer, which sends the key itself: ops/bench/load_test.py)
    assert set(RESTRICTED_APIS) - set(RESTRICTED) == {"shared-memory"}
    assert set(RESTRICTED) <= set(RESTRICTED_APIS)
    assert not [name for name in dir(TritonClient) if "shared_memory" in name]
    compose = YAML(typ="safe").load((ROOT / "compose.yaml").read_text())
    for argument in compose["services"]["triton"]["command"]:
        if argument.startswith(("--http-restricted-api=", "--grpc-restricted-protocol=")):
            categories = argument.partition("=")[2].partition(":")[0]
            assert set(categories.split(",")) == set(RESTRICTED_APIS), argument


def test_a_server_with_no_key_configured_gets_none_even_when_another_has_one(
        posing: TritonHeaderRecorderDouble, posing_b: TritonHeaderRecorderDouble, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "a"\nurl = "{posing.url}"\nadmin_key = "{KEY}"\n'
                       f'[[server]]\nname = "b"\nurl = "{posing_b.url}"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    monkeypatch.setenv("GEADMIN_TRITON_URL", posing.url)
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", OTHER_KEY)  # belongs to the default server, a: not b's
    for target in [resolve(server="b"), *[t for t in configured_targets(None) if t.spec.name == "b"]]:
        assert target.spec.admin_key is None
        with TritonClient(target.spec.url, admin_key=target.spec.admin_key) as client:
            client.repository_index()
            client.unload("m")
    assert posing_b.requests and posing_b.keyed() == []
    with TritonClient(posing.url, admin_key=resolve(server="a").spec.admin_key) as client:
        client.unload("m")
    assert posing.keyed() == ["/v2/repository/models/m/unload"]
    assert [h["admin-key"] for _, _, h in posing.requests] == [KEY]


def test_the_environment_key_goes_to_the_default_server_only(
        posing: TritonHeaderRecorderDouble, posing_b: TritonHeaderRecorderDouble,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URLS", f"a={posing.url},b={posing_b.url}")
    monkeypatch.setenv("GEADMIN_TRITON_URL", posing.url)
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", OTHER_KEY)
    assert {s.name: s.admin_key for s in load_servers()} == {"a": OTHER_KEY, "b": None}
    elsewhere = resolve(url=posing_b.url)  # --url to another server: not the environment's key
    assert elsewhere.spec.admin_key is None
    assert any("GEADMIN_ADMIN_KEY is not sent" in note for note in elsewhere.notes)
    with TritonClient(elsewhere.spec.url, admin_key=elsewhere.spec.admin_key) as client:
        client.repository_index()
    assert posing_b.keyed() == []
    assert resolve(url=posing_b.url, admin_key="flag").spec.admin_key == "flag"  # --admin-key: explicit


def test_the_stack_key_goes_to_the_stacks_triton_only(
        posing: TritonHeaderRecorderDouble, posing_b: TritonHeaderRecorderDouble, tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "home")
    key = workspace.ensure_admin_key()
    stack = stack_info(workspace, posing.url)
    assert resolve(stack=stack).spec.admin_key == key  # the default server is the stack's Triton
    assert resolve(url=posing.url, stack=stack).spec.admin_key == key
    assert resolve(url=posing_b.url, stack=stack).spec.admin_key is None
    (local,) = configured_targets(stack)
    assert local.spec.admin_key == key
    with TritonClient(posing_b.url, admin_key=resolve(url=posing_b.url, stack=stack).spec.admin_key) as c:
        c.unload("m")
    assert posing_b.keyed() == []


def stack_info(workspace: Workspace, http_url: str) -> StackInfo:
    port = int(http_url.rsplit(":", 1)[1])
    return StackInfo(pid=os.getpid(), http_url=http_url, grpc_url="grpc://127.0.0.1:1",
                     metrics_url="http://127.0.0.1:2/metrics", ports=Ports(port, 1, 2), dashboard_url="",
                     triton_log=workspace.triton_log, repository=workspace.repository, home=workspace.home)


def test_the_workspace_key_is_private_from_its_first_byte(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = Workspace(tmp_path / "home")
    modes: list[int] = []
    real_replace = os.replace

    def watching_replace(src: str, dst: Path, **at: int) -> None:  # the real rename, noting the mode first
        modes.append(stat.S_IMODE(os.stat(src, dir_fd=at.get("src_dir_fd")).st_mode))
        real_replace(src, dst, **at)

    monkeypatch.setattr(os, "replace", watching_replace)
    key = workspace.ensure_admin_key()
    assert modes == [0o600]
    assert stat.S_IMODE(workspace.admin_key_file.stat().st_mode) == 0o600
    assert workspace.ensure_admin_key() == key == workspace.admin_key()  # kept across runs
    assert len(key) >= 32 and not any(c in key for c in ",:= ")
    assert [p.name for p in workspace.home.iterdir()] == ["triton-admin-key"]  # no temporary left


def test_triton_gets_the_key_as_flags_only_and_none_of_geadmins_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", OTHER_KEY)
    monkeypatch.setenv("GEADMIN_OIDC_ROLE_MAP", "ops=admin")
    process = TritonProcess(tmp_path, binary=Path("/bin/true"), backend_dir=tmp_path, log_path=tmp_path / "l",
                            ports=Ports(1, 2, 3), admin_key=KEY)
    command = process.command()
    categories = ",".join(RESTRICTED_APIS)
    assert f"--http-restricted-api={categories}:admin-key={KEY}" in command
    assert f"--grpc-restricted-protocol={categories}:admin-key={KEY}" in command
    environment = process.environment()
    assert not [name for name in environment if name.startswith("GEADMIN_")]
    assert OTHER_KEY not in "".join(environment.values()) and KEY not in "".join(environment.values())
    keyless = TritonProcess(tmp_path, binary=Path("/bin/true"), backend_dir=tmp_path, log_path=tmp_path / "l",
                            ports=Ports(1, 2, 3))
    assert not [a for a in keyless.command() if "restricted" in a]


@pytest.mark.parametrize(("url", "warned"), [
    ("http://10.0.0.5:8000", True), ("grpc://triton:8001", True),
    ("https://10.0.0.5:8000", False), ("grpcs://triton:8001", False),
    ("http://127.0.0.1:8000", False), ("http://localhost:8000", False), ("grpc://[::1]:8001", False),
])
def test_a_key_sent_unencrypted_off_the_host_is_warned_about(url: str, warned: bool) -> None:
    warning = key_warning(ServerSpec("s", url, KEY))
    assert (warning is not None) == warned
    if warning:
        assert url.split("://")[1] in warning and KEY not in warning
    assert key_warning(ServerSpec("s", url, None)) is None  # no key, nothing exposed


def test_the_cli_notes_an_exposed_key(monkeypatch: pytest.MonkeyPatch) -> None:
    target = resolve(url="http://10.0.0.5:8000", admin_key=KEY)
    assert any("sent unencrypted to http://10.0.0.5:8000" in note for note in target.notes)


def test_a_key_never_shows_in_a_repr() -> None:
    assert KEY not in repr(ServerSpec("s", "http://h:8000", KEY))


@pytest.mark.parametrize(("entry", "message"), [
    ('admin_key = "a"\nadmin_key_file = "/k"\n', "both admin_key and admin_key_file"),
    ('admin_key_file = "/nonexistent/key"\n', "cannot read admin_key_file"),
    ('grpc_url = "http://h:8001"\n', "grpc_url must be a grpc URL"),
    ('metrics_url = "ftp://h/metrics"\n', "metrics_url must be an http"),
])
def test_bad_server_entries_say_what_is_wrong(entry: str, message: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nurl = "http://h:8000"\n{entry}')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    with pytest.raises(ConfigError, match=message):
        load_servers()


def test_a_key_file_in_the_servers_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "a.key"
    key_file.write_text(KEY + "\n")
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "a"\nurl = "http://h:8000"\nadmin_key_file = "{key_file}"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    assert [s.admin_key for s in load_servers()] == [KEY]
