"""The native programs geadmin starts (tritonserver, perf_analyzer, streamlit): where the
nvidia-pytriton wheel put the server and its libraries, and how a started program's process
group is stopped (TERM, then KILL, then killpg so no child outlives it).

Layer 1: both the stack (`geadmin.stack`, which runs Triton and the dashboard) and the load
test (`geadmin.ops.bench`, which runs perf_analyzer) use it; neither imports the other for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelLayout:
    """Where the nvidia-pytriton wheel put the server, its backends and its libraries."""

    server_dir: Path  # .../pytriton/tritonserver
    libs_dir: Path  # .../nvidia_pytriton.libs

    @property
    def binary(self) -> Path:
        return self.server_dir / "bin" / "tritonserver"

    @property
    def python_backend(self) -> Path:
        return self.server_dir / "backends" / "python"

    @property
    def stubs_dir(self) -> Path:
        return self.server_dir / "python_backend_stubs"


def wheel_layout() -> WheelLayout | None:
    spec = importlib.util.find_spec("pytriton")
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
