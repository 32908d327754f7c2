"""A stack bound to an IPv6 address (`geadmin up --host ::` or `::1`): Triton 2.51's HTTP and
metrics servers need libevhtp's `ipv6:` prefix (a bare `::` binds 255.255.255.255, seen here)
and gRPC the literal in brackets; every URL geadmin builds for it brackets the literal."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.stack.processes import http_ok
from geadmin.triton.client import TritonClient
from tests.support.processes import quick_stopping_triton

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("host", ["::1", "::"])
def test_triton_bound_to_an_ipv6_address_answers_on_every_url_geadmin_builds(
        tmp_path: Path, host: str) -> None:
    (tmp_path / "repo").mkdir()
    triton = quick_stopping_triton(tmp_path / "repo", host=host)
    assert triton.http_url == f"http://[::1]:{triton.ports.http}"
    assert triton.grpc_url == f"[::1]:{triton.ports.grpc}"
    triton.start(timeout_s=60)
    try:
        assert http_ok(triton.metrics_url)
        for url in (triton.http_url, f"grpc://{triton.grpc_url}"):
            with TritonClient(url) as client:
                assert client.is_live(), url
    finally:
        triton.stop()
