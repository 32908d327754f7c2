"""Both transports of a real tritonserver, for tests parametrized over HTTP and gRPC."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geadmin.stack.tritonserver import TritonProcess

TRANSPORTS = ["http", "grpc"]


def url_for(server: TritonProcess, transport: str) -> str:
    return server.http_url if transport == "http" else "grpc://" + server.grpc_url
