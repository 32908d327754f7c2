"""The native programs geadmin starts (tritonserver, perf_analyzer, streamlit): where the
nvidia-pytriton wheel put the server and its libraries, and how a started program's process
group is stopped (TERM, then KILL, then killpg so no child outlives it), and how a helper
program is tied to the process that started it (`dies_with_parent`).

Layer 1: both the stack (`geadmin.stack`, which runs Triton and the dashboard) and the load
test (`geadmin.ops.bench.load_test`, which runs perf_analyzer) use it; neither imports the other for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib.machinery
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h


TRITON_BINARY = "tritonserver"  # the server's executable, in the wheel and in Triton's images


@dataclass(frozen=True)
class WheelLayout:
    """Where the nvidia-pytriton wheel put the server, its backends and its libraries."""

    server_dir: Path  # .../pytriton/tritonserver
    libs_dir: Path  # .../nvidia_pytriton.libs

    @property
    def binary(self) -> Path:
        return self.server_dir / "bin" / TRITON_BINARY

    @property
    def python_backend(self) -> Path:
        return self.server_dir / "backends" / "python"

    @property
    def stubs_dir(self) -> Path:
        return self.server_dir / "python_backend_stubs"


def wheel_layout() -> WheelLayout | None:
    """Where the wheel is, searched on a copy of sys.path: Streamlit inserts and removes its
    script's directory at sys.path[0] around every script run, and importlib's search walks
    the live list, so a search from another thread (a load test) skipped one entry — often
    site-packages, so a dashboard's first load test found no wheel and no libb64."""
    module = sys.modules.get("pytriton")
    spec = getattr(module, "__spec__", None) if module is not None else None
    if spec is None:
        spec = importlib.machinery.PathFinder.find_spec("pytriton", list(sys.path))
    if spec is None or not spec.submodule_search_locations:
        return None
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    layout = WheelLayout(package_dir / "tritonserver", package_dir.parent / "nvidia_pytriton.libs")
    return layout if layout.binary.exists() else None


def signal_group(process: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> None:
    """Signal the process's whole group (it was started in a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def terminate_group(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """SIGTERM the group, SIGKILL it after `timeout_s`; returns the leader's exit code."""
    signal_group(process, signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        return process.wait(timeout=5)
    finally:
        signal_group(process, signal.SIGKILL)  # children in the group must not outlive it


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up before any fork (the child may not load a library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def dies_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGKILL the child when the thread that started it
    dies — with its whole process, however it dies (SIGKILL included): a killed dashboard or
    CLI then leaves no perf_analyzer loading a server behind. The starting thread must wait for
    the child (Linux ties the signal to it). None off Linux. The function does one system call
    after fork, and only an exit if the parent is already gone; no lock, no import."""
    prctl, parent = _PRCTL, os.getpid()
    if prctl is None:
        return None

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the tie was made
            os._exit(1)

    return tie
