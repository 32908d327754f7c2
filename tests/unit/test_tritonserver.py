from __future__ import annotations

import collections
import dataclasses
import socket
from pathlib import Path

import pytest

from geadmin.binaries import WheelLayout, wheel_layout
from geadmin.domain import Ports
from geadmin.errors import ConfigError, PortInUseError, PythonStubMissingError, TritonBinaryNotFoundError
from geadmin.stack import processes
from geadmin.stack.processes import free_ports, free_triton_ports
from geadmin.stack.triton_install import find_tritonserver, prepare_backend_directory, python_stub
from geadmin.stack.tritonserver import TritonProcess, http_bind_address


def test_explicit_binary_that_does_not_exist_names_path_and_fix(tmp_path: Path) -> None:
    with pytest.raises(TritonBinaryNotFoundError, match=r"not found at .*nope.*GEADMIN_TRITONSERVER"):
        find_tritonserver(tmp_path / "nope")


def test_explicit_binary_that_is_not_executable(tmp_path: Path) -> None:
    binary = tmp_path / "tritonserver"
    binary.write_text("#!/bin/sh\n")
    with pytest.raises(TritonBinaryNotFoundError, match="chmod"):
        find_tritonserver(binary)


def test_default_binary_is_the_wheels() -> None:
    layout = wheel_layout()
    assert layout is not None, "nvidia-pytriton must be installed for the tests"
    assert find_tritonserver() == layout.binary


def test_missing_stub_for_this_python_lists_what_exists(tmp_path: Path) -> None:
    (tmp_path / "python_backend_stubs" / "3.10").mkdir(parents=True)
    (tmp_path / "python_backend_stubs" / "3.12").mkdir(parents=True)
    layout = WheelLayout(tmp_path, tmp_path / "libs")
    with pytest.raises(PythonStubMissingError, match=r"Python 3\.99 .*has: 3\.10, 3\.12"):
        python_stub(layout, (3, 99))


def test_backend_directory_has_python_backend_with_matching_stub(tmp_path: Path) -> None:
    backends = prepare_backend_directory(tmp_path / "b", extra={"npu_ge": tmp_path})
    assert (backends / "python" / "libtriton_python.so").exists()
    stub = backends / "python" / "triton_python_backend_stub"
    assert stub.is_file() and not stub.is_symlink()
    assert (backends / "npu_ge").resolve() == tmp_path.resolve()
    # Preparing again (a restart) replaces links instead of failing.
    prepare_backend_directory(tmp_path / "b", extra={"npu_ge": tmp_path})


def test_port_in_use_is_named_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = TritonProcess(tmp_path, ports=Ports(port, port + 1, port + 2))
        tmp_path.mkdir(exist_ok=True)
        with pytest.raises(PortInUseError, match=rf"port {port} \(Triton HTTP\).*--http-port") as err:
            process.start()
        assert err.value.port == port
        assert process.pid is None


def test_command_uses_explicit_mode_local_binding_and_summaries(tmp_path: Path) -> None:
    process = TritonProcess(tmp_path, models=["a", "b"], extra_args=["--log-verbose=1"])
    cmd = process.command()
    assert "--model-control-mode=explicit" in cmd
    assert "--http-address=127.0.0.1" in cmd
    assert "--metrics-config=summary_latencies=true" in cmd
    assert [a for a in cmd if a.startswith("--load-model")] == ["--load-model=a", "--load-model=b"]
    assert cmd[-1] == "--log-verbose=1"
    env = process.environment()
    assert "nvidia_pytriton.libs" in env["LD_LIBRARY_PATH"]
    process.stop()  # removes its scratch directory


def test_free_ports_are_distinct() -> None:
    # Picked one at a time, a just-closed port can come back: Triton then refuses to start
    # ("cannot listen to HTTP requests and GRPC requests at the same address and port").
    for _ in range(50):
        ports = free_ports(4)
        assert len(set(ports)) == 4
        triple = free_triton_ports()
        assert len({triple.http, triple.grpc, triple.metrics}) == 3


def test_servers_picked_before_either_starts_never_share_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fleet lab picks two servers' ports, then starts them: the second pick cannot see the
    # first's unbound ports, so in a range of 8 two unremembered picks of 3 overlap 82 % of the time.
    low = processes.pick_range()[0]
    monkeypatch.setenv("GEADMIN_FREE_PORT_RANGE", f"{low}-{low + 7}")
    for _ in range(20):  # each a fresh process's first two picks
        monkeypatch.setattr(processes, "_recent_picks", collections.deque(maxlen=processes.RECENT_PICKS_KEPT))
        first, second = (dataclasses.astuple(free_triton_ports()) for _ in range(2))
        assert not set(first) & set(second), (first, second)
    picked = [p for _ in range(10) for p in free_ports(3)]  # the range is never left for recents
    assert all(low <= p <= low + 7 for p in picked), picked


def test_free_ports_come_from_the_pick_range_never_the_kernels_ephemeral_ones(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    monkeypatch.delenv("GEADMIN_FREE_PORT_RANGE", raising=False)
    picked = [p for _ in range(20) for p in free_ports(3)]
    assert all(20000 <= p <= 32767 and not low <= p <= high for p in picked), picked
    monkeypatch.setenv("GEADMIN_FREE_PORT_RANGE", "24000-24009")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 24000))  # in use: never picked
        picked = [p for _ in range(20) for p in free_ports(3)]
    assert all(24001 <= p <= 24009 for p in picked), picked
    monkeypatch.setenv("GEADMIN_FREE_PORT_RANGE", "9-5")
    with pytest.raises(ConfigError, match="LOW-HIGH"):
        free_ports(1)


def test_a_failed_construction_leaves_no_scratch_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import geadmin.stack.triton_install as module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def no_stub(layout: object, version: object = None) -> Path:
        raise PythonStubMissingError("no stub for this Python")

    monkeypatch.setattr(module, "python_stub", no_stub)
    with pytest.raises(PythonStubMissingError):
        TritonProcess(tmp_path)
    assert not list(tmp_path.glob("geadmin-triton-*"))


def test_regions_left_by_a_killed_launcher_are_removed_and_live_ones_kept() -> None:
    import os
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()  # reaped: its pid is gone
    dead_pid = child.pid
    shm = Path("/dev/shm")
    stale = shm / f"geadmin_{dead_pid}_abcd1234_region"
    live = shm / f"geadmin_{os.getpid()}_abcd1234_region"
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    try:
        removed = TritonProcess.remove_stale_shm_regions()
        assert stale.name in removed and not stale.exists()
        assert live.exists()
    finally:
        for path in (stale, live):
            path.unlink(missing_ok=True)


def test_the_shm_prefix_names_the_launching_process(tmp_path: Path) -> None:
    import os

    process = TritonProcess(tmp_path)
    assert process.shm_prefix.startswith(f"geadmin_{os.getpid()}_")
    process.stop()


@pytest.mark.parametrize(("bound", "reached", "in_url", "triton_http"), [
    ("127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"),
    ("0.0.0.0", "127.0.0.1", "127.0.0.1", "0.0.0.0"),
    ("::", "::1", "[::1]", "ipv6:::"),
    ("::1", "::1", "[::1]", "ipv6:::1"),
    ("fd00::5", "fd00::5", "[fd00::5]", "ipv6:fd00::5"),
])
def test_an_ipv6_host_is_bound_with_its_family_and_bracketed_in_every_url(
        bound: str, reached: str, in_url: str, triton_http: str) -> None:
    assert processes.client_host(bound) == reached
    assert processes.client_url_host(bound) == in_url
    assert http_bind_address(bound) == triton_http
    assert processes.family(bound) == (socket.AF_INET6 if ":" in bound else socket.AF_INET)


def test_free_ports_on_an_ipv6_loopback_are_bindable_there() -> None:
    (port,) = free_ports(1, "::1")
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", port))
