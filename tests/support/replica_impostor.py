"""A TEST DOUBLE posing as a Triton replica: not Triton, and nothing of the product uses it.

What an attacker runs to collect a fleet's admin key: a plain HTTP listener on Triton's HTTP
and metrics ports and a TCP listener on its gRPC port, at another loopback address (127.0.0.2,
"another host"), answering just enough for discovery and a fleet poll to take it for a replica
(live, ready, server metadata, empty statistics, a /metrics page for Prometheus to scrape, and
an HTTP 200 to anything else, a repository index or a load included, as an attacker would).
It records every request's headers and every byte sent to the gRPC port, so a test can say
that the key never reached it.

With `flood` set, it answers the repository index with that many bytes of a well-formed JSON
list (announced in Content-Length, or with `flood_announced=False` sent until it closes the
connection, as a stream), and counts in `flood_sent` what the reader took before it hung up.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.http_doubles import QuietHTTPServer

METRICS = b"# HELP impostor_up A replica impostor.\n# TYPE impostor_up gauge\nimpostor_up 1\n"
ANSWERS = {"/v2": {"name": "triton", "version": "2.51.0", "extensions": []},
           "/v2/models/stats": {"model_stats": []}}


@dataclass(frozen=True)
class Seen:
    port: int
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class ReplicaImpostor:
    host: str
    http_port: int
    grpc_port: int
    metrics_port: int
    requests: list[Seen] = field(default_factory=list)
    grpc_bytes: bytearray = field(default_factory=bytearray)
    grpc_connections: int = 0
    flood: int = 0  # bytes of repository index to send; 0: an empty index
    flood_announced: bool = True
    flood_sent: int = 0

    def __post_init__(self) -> None:
        self._servers: list[QuietHTTPServer] = []
        self._grpc: socket.socket | None = None
        self._lock = threading.Lock()

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def carried(self, secret: str) -> list[Seen]:
        """The requests that carried `secret` in any header, name or value."""
        with self._lock:
            return [s for s in self.requests
                    if any(secret in k or secret in v for k, v in s.headers.items())]

    def start(self) -> ReplicaImpostor:
        handler = type("Handler", (_Handler,), {"impostor": self})
        for port in (self.http_port, self.metrics_port):
            server = QuietHTTPServer((self.host, port), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        self._grpc = socket.create_server((self.host, self.grpc_port))
        threading.Thread(target=self._accept_grpc, daemon=True).start()
        return self

    def _accept_grpc(self) -> None:
        assert self._grpc is not None
        while True:
            try:
                conn, _ = self._grpc.accept()
            except OSError:
                return
            with self._lock:
                self.grpc_connections += 1
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                while chunk := conn.recv(65536):
                    with self._lock:
                        self.grpc_bytes.extend(chunk)
            except OSError:
                return

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()
        if self._grpc is not None:
            self._grpc.close()
            self._grpc = None


class _Handler(BaseHTTPRequestHandler):
    impostor: ReplicaImpostor  # set by ReplicaImpostor.start on a subclass of its own

    protocol_version = "HTTP/1.1"  # keep-alive, as tritonclient expects

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with self.impostor._lock:
            self.impostor.requests.append(Seen(self.server.server_address[1], method, self.path,
                                          {k.lower(): v for k, v in self.headers.items()}))
        path = self.path.split("?")[0]
        if self.impostor.flood and path == "/v2/repository/index":
            self._flood()
            return
        if path == "/metrics":
            body, kind = METRICS, "text/plain; version=0.0.4"
        else:
            body, kind = json.dumps(ANSWERS.get(path, {})).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _flood(self) -> None:
        entry = b'{"name":"m","version":"1","state":"READY"},'
        block = entry * (65536 // len(entry))
        blocks = max(1, self.impostor.flood // len(block))
        total = 1 + blocks * len(block) + 3  # "[", the blocks, "{}]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.impostor.flood_announced:
            self.send_header("Content-Length", str(total))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(b"[")
            for _ in range(blocks):
                self.wfile.write(block)
                with self.impostor._lock:
                    self.impostor.flood_sent += len(block)
            self.wfile.write(b"{}]")
        except OSError:  # the reader hung up: what it took is counted
            self.close_connection = True

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def impostor(host: str, http_port: int, grpc_port: int, metrics_port: int, *, flood: int = 0,
             flood_announced: bool = True) -> Iterator[ReplicaImpostor]:
    double = ReplicaImpostor(host, http_port, grpc_port, metrics_port, flood=flood,
                             flood_announced=flood_announced).start()
    try:
        yield double
    finally:
        double.stop()
