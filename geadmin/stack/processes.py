"""Processes and ports: free ports, pid and health polls (process groups are stopped by
geadmin.binaries)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

from geadmin.domain import Ports
from geadmin.errors import PortInUseError
from geadmin.settings import is_port


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports: all held open while picking, so none is handed out twice."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def ensure_port_free(host: str, port: int, what: str, flag: str) -> None:
    if not is_port(port):
        raise PortInUseError(f"{what} port must be between 1 and 65535, got {port} ({flag})", port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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


def client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to `host` (0.0.0.0: anywhere)."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else host


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
