"""Local HTTP endpoints for tests of fetch failures: a real server on 127.0.0.1 answering
every GET with a chosen body and status, and a port that nothing listens on; and
`QuietHTTPServer`, the threading server every HTTP double here runs on."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that says nothing when a client hangs up mid-request (a closed
    keep-alive connection): its default prints a traceback to stderr, which a test that runs
    geadmin in process reads as geadmin's own output."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def serve(body: bytes | Callable[[], bytes], *, status: int = 200) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering every GET with `body` (or what `body()` returns
    at that request: a page a test changes while it serves); yields its /metrics URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = body() if callable(body) else body
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JsonServiceDouble:
    """A loopback HTTP service that answers GET and POST with JSON, `answer(path) -> (status,
    body)`, and records (method, path, headers) of each request: a double of whatever service
    the test names (never of Triton itself unless its module says why and how strictly)."""

    def __init__(self, answer: Callable[[str], tuple[int, object]]) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?")[0]
                recorded.append((self.command, path, {k.lower(): v for k, v in self.headers.items()}))
                status, payload = answer(path)
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
