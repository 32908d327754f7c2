"""Processes and ports: free ports, pid and health polls (process groups are stopped by
geadmin.binaries)."""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import random
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

from geadmin import settings
from geadmin.domain import Ports, url_host
from geadmin.errors import PortInUseError
from geadmin.settings import is_port


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


# Free ports are picked below Linux's ephemeral range (32768-60999 by default): a port the
# kernel handed out for bind(0) can be taken as the source port of any outgoing connection
# between our pick and the server's bind. GEADMIN_FREE_PORT_RANGE narrows it (make test gives
# each of its workers a slice, so they never pick the same port).
DEFAULT_PICK_RANGE = (20000, 32767)
PICK_ATTEMPTS = 500


def pick_range() -> tuple[int, int]:
    raw = settings.FREE_PORT_RANGE.get()
    return raw if raw else DEFAULT_PICK_RANGE


# Ports this process handed out lately, bound or not yet: a pick is free only to bind(), so two
# servers picked before either starts (a fleet of two) could otherwise get the same port (a
# `make test` run: "port 27730 (Triton metrics) on 127.0.0.1 is already in use").
RECENT_PICKS_KEPT = 64
_recent_picks: collections.deque[int] = collections.deque(maxlen=RECENT_PICKS_KEPT)
_picks_lock = threading.Lock()


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports: all held open while picking, so none is handed out twice;
    random in `pick_range()`, none handed out lately while the range has others; else (that
    range full) any the kernel gives."""
    low, high = pick_range()
    with _picks_lock, contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(family(host), socket.SOCK_STREAM))
            if not _bind_in_range(sock, host, low, high, avoid={*ports, *_recent_picks}) and \
                    not _bind_in_range(sock, host, low, high, avoid=set(ports)):
                sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        _recent_picks.extend(ports)
        return ports


def _bind_in_range(sock: socket.socket, host: str, low: int, high: int, avoid: set[int]) -> bool:
    chooser = random.SystemRandom()
    for _attempt in range(PICK_ATTEMPTS):
        port = chooser.randint(low, high)
        if port in avoid:
            continue
        try:
            sock.bind((host, port))
            return True
        except OSError:
            continue
    return False


def ensure_port_free(host: str, port: int, what: str, flag: str) -> None:
    if not is_port(port):
        raise PortInUseError(f"{what} port must be between 1 and 65535, got {port} ({flag})", port)
    with socket.socket(family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"port {port} ({what}) on {host} is already in use — is another "
                    f"`geadmin up` or Triton running? Stop it, or pick another port with {flag}",
                    port,
                ) from exc
            raise PortInUseError(f"cannot bind {what} port {port} on {host}: {exc}", port) from exc


def free_triton_ports(host: str = "127.0.0.1") -> Ports:
    http, grpc, metrics = free_ports(3, host)
    return Ports(http, grpc, metrics)


def ensure_ports_free(host: str, ports: Ports) -> None:
    ensure_port_free(host, ports.http, "Triton HTTP", "--http-port")
    ensure_port_free(host, ports.grpc, "Triton gRPC", "--grpc-port")
    ensure_port_free(host, ports.metrics, "Triton metrics", "--metrics-port")


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def family(host: str) -> socket.AddressFamily:
    """The socket family that binds `host`: IPv6 for an IPv6 literal (`::`, `::1`), else IPv4."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to `host` (0.0.0.0 or ::: anywhere)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return "::1" if host == "::" else host


def client_url_host(host: str) -> str:
    """`client_host` as a URL takes it (an IPv6 literal in brackets)."""
    return url_host(client_host(host))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
