"""What the wheel's `tritonserver` needs to run here: its binary, and a backend directory with the stub.

Used by `TritonProcess` (geadmin.stack.tritonserver), `geadmin up` and the test fixtures. The
wheel's server runs the python backend on a fresh machine (FACTS.md) only from a backend
directory holding `python/` with the stub built for the running Python
(`python_backend_stubs/3.X/`); `prepare_backend_directory` builds it, with any extra backend
(npu_ge) linked beside it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from geadmin.binaries import TRITON_BINARY, WheelLayout, wheel_layout
from geadmin.errors import PythonStubMissingError, TritonBinaryNotFoundError

_INSTALL_HINT = "install it with `pip install nvidia-pytriton`, or name a binary with " \
    "--tritonserver PATH / GEADMIN_TRITONSERVER"


def find_tritonserver(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The binary to run: `explicit` if given, else the wheel's, else one on PATH."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise TritonBinaryNotFoundError(f"tritonserver not found at {path}: {_INSTALL_HINT}")
        if not os.access(path, os.X_OK):
            raise TritonBinaryNotFoundError(f"{path} is not executable: run `chmod +x {path}`")
        return path
    layout = wheel_layout()
    if layout is not None:
        return layout.binary
    on_path = shutil.which(TRITON_BINARY)
    if on_path:
        return Path(on_path)
    raise TritonBinaryNotFoundError(f"no tritonserver binary found: {_INSTALL_HINT}")


def python_stub(layout: WheelLayout, version: tuple[int, int] | None = None) -> Path:
    major, minor = version or sys.version_info[:2]
    stub = layout.stubs_dir / f"{major}.{minor}" / "triton_python_backend_stub"
    if not stub.is_file():
        available = sorted(p.name for p in layout.stubs_dir.iterdir()) if layout.stubs_dir.is_dir() else []
        raise PythonStubMissingError(
            f"the nvidia-pytriton wheel has no python-backend stub for Python {major}.{minor} "
            f"(it has: {', '.join(available) or 'none'}); create the venv with one of those "
            "Python versions (e.g. `python3.11 -m venv .venv`)"
        )
    return stub


def prepare_backend_directory(
    dest: Path, extra: Mapping[str, Path] | None = None, layout: WheelLayout | None = None
) -> Path:
    """Build a `--backend-directory` at `dest`: the python backend plus `extra` backends.

    `extra` maps a backend name to a directory holding `libtriton_<name>.so`; it is linked,
    not copied, so a rebuilt library is picked up by the next server start.
    """
    layout = layout or wheel_layout()
    if layout is None:
        raise TritonBinaryNotFoundError(f"the nvidia-pytriton wheel is not installed: {_INSTALL_HINT}")
    stub = python_stub(layout)
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for source in layout.python_backend.iterdir():
        if source.name in ("__pycache__", "triton_python_backend_stub"):
            continue
        _replace_link(python_dir / source.name, source)
    # A copy, not a link: the stub locates its libraries relative to its real path.
    shutil.copy2(stub, python_dir / "triton_python_backend_stub")
    for name, directory in (extra or {}).items():
        _replace_link(dest / name, Path(directory).resolve())
    return dest


def _replace_link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(target)
