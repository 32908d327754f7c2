from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.domain import Endpoint, Transport
from geadmin.errors import ConfigError
from geadmin.triton.servers import load_servers, parse_servers_file, parse_url_list


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def test_default_is_one_local_server() -> None:
    (spec,) = load_servers()
    assert (spec.name, spec.url) == ("local", "http://127.0.0.1:8000")


def test_url_list_with_and_without_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URLS", "prod=grpc://10.0.0.5:8001, 10.0.0.6:8000")
    specs = load_servers()
    assert [(s.name, s.url) for s in specs] == [
        ("prod", "grpc://10.0.0.5:8001"),
        ("10.0.0.6:8000", "http://10.0.0.6:8000"),
    ]


def test_servers_file_wins_over_url_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nname = "a"\nurl = "http://h1:8000"\nadmin_key = "k"\n'
                    '[[server]]\nurl = "grpc://h2:9001"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    monkeypatch.setenv("GEADMIN_TRITON_URLS", "http://ignored:8000")
    specs = load_servers()
    assert [(s.name, s.url, s.admin_key) for s in specs] == [
        ("a", "http://h1:8000", "k"),
        ("h2:9001", "grpc://h2:9001", None),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[server]]\nname = 'x'\n", "needs a url"),
        ("title = 'no servers'\n", r"no \[\[server\]\] tables"),
        ("[[server\n", "cannot read servers file"),
        ("[[server]]\nname='a'\nurl='http://h:1'\n[[server]]\nname='a'\nurl='http://h:2'\n", "unique"),
        ("[[server]]\nurl = 'ftp://h:1'\n", "unsupported Triton URL scheme"),
    ],
)
def test_bad_servers_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "servers.toml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=message):
        parse_servers_file(file)


def test_missing_servers_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        parse_servers_file(Path("/nonexistent/servers.toml"))


def test_bad_url_in_list_is_named() -> None:
    with pytest.raises(ConfigError, match="'http://h:notaport'"):
        parse_url_list("http://h:notaport")


@pytest.mark.parametrize(
    ("url", "transport", "address"),
    [
        ("http://127.0.0.1:8000", Transport.HTTP, "127.0.0.1:8000"),
        ("grpc://triton:8001", Transport.GRPC, "triton:8001"),
        ("localhost:9000", Transport.HTTP, "localhost:9000"),
        ("grpc://triton", Transport.GRPC, "triton:8001"),
        ("http://triton", Transport.HTTP, "triton:8000"),
    ],
)
def test_endpoint_parsing(url: str, transport: Transport, address: str) -> None:
    endpoint = Endpoint.parse(url)
    assert (endpoint.transport, endpoint.address) == (transport, address)
