"""The HTTP doubles' server is quiet when a client resets its connection (a test that runs
geadmin in process reads stderr as geadmin's), and still loud about anything else; the stock
ThreadingHTTPServer, the control, prints the reset."""

from __future__ import annotations

import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.http_doubles import QuietHTTPServer


class Broken(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        raise ValueError("a bug in the double")

    def log_message(self, *args: object) -> None:
        pass


def served_errors(base: type[ThreadingHTTPServer], send: bytes, reset: bool,
                  capfd: pytest.CaptureFixture[str]) -> str:
    accepted = threading.Event()

    class Server(base):  # type: ignore[valid-type,misc]
        daemon_threads = False  # server_close joins the handler threads: their output is in

        def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:
            super().process_request(request, client_address)
            accepted.set()

    server = Server(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = socket.create_connection(server.server_address[:2])
        client.sendall(send)
        assert accepted.wait(10)
        if reset:  # a close with SO_LINGER 0 sends RST, as a client dropping its pool may
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            client.recv(1)  # the handler raised: the server closes
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    return capfd.readouterr().err


def test_a_reset_mid_request_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    assert served_errors(QuietHTTPServer, b"GET /v2 HT", True, capfd) == ""
    assert "ConnectionResetError" in served_errors(ThreadingHTTPServer, b"GET /v2 HT", True, capfd)


def test_a_bug_in_the_handler_still_prints_its_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    assert "ValueError: a bug in the double" in served_errors(
        QuietHTTPServer, b"GET /v2 HTTP/1.1\r\n\r\n", False, capfd)
