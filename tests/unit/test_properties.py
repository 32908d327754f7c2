"""Property tests: parsers of untrusted text fail only with our own, clear errors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from geadmin.domain import Endpoint, Transport
from geadmin.errors import ConfigError
from geadmin.triton.logs import model_log_lines, parse_log_line
from geadmin.triton.servers import parse_url_list


@given(st.text())
def test_endpoint_parse_accepts_or_says_why(raw: str) -> None:
    try:
        endpoint = Endpoint.parse(raw)
    except ConfigError as exc:
        assert str(exc)
        return
    assert 0 <= endpoint.port < 65536
    assert Endpoint.parse(endpoint.url) == endpoint  # its own URL reads back the same


@given(st.sampled_from(["http", "grpc"]), st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
       st.integers(min_value=1, max_value=65535))
def test_well_formed_urls_round_trip(scheme: str, host: str, port: int) -> None:
    endpoint = Endpoint.parse(f"{scheme}://{host}:{port}")
    assert (endpoint.transport, endpoint.host, endpoint.port) == (Transport(scheme), host, port)


@given(st.text())
def test_url_lists_accept_or_say_why(raw: str) -> None:
    try:
        specs = parse_url_list(raw)
    except ConfigError:
        return
    assert specs and len({s.name for s in specs}) == len(specs)


@given(st.text(), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True))
def test_log_parsing_never_raises(text: str, name: str) -> None:
    for line in text.splitlines():
        parsed = parse_log_line(line)
        assert parsed.raw == line
    for line in model_log_lines(text, name):
        assert name in line.raw
