"""Which extra backends the embedded Triton gets beside python: `--backend-dir NAME=DIR`,
GEADMIN_BACKEND_DIRS, else npu_ge from a source checkout's build (`make backend`); and which
backends a target's server can load when it is this machine's embedded Triton (`served_backends`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from geadmin import settings
from geadmin.diagnose.impact import process_backends
from geadmin.errors import ConfigError
from geadmin.stack.target import Target, is_stack_server, live_stack

SOURCE_ROOT = Path(__file__).resolve().parents[2]
BUILT_NPU_GE = SOURCE_ROOT / "build" / "backend" / "npu_ge"
NPU_GE_HOWTO = ("npu_ge is not built, so Ascend models will not load in this stack: install cmake and "
                "a C++17 compiler (e.g. `apt-get install cmake g++`) and run `make backend`, or "
                "pass a prebuilt one with --backend-dir npu_ge=DIR")


def library(name: str, directory: Path) -> Path:
    return directory / f"libtriton_{name}.so"


def parse_backend_dirs(items: Sequence[str]) -> dict[str, Path]:
    """`["npu_ge=/opt/npu_ge", ...]` -> {name: dir}; each dir must hold libtriton_<name>.so."""
    found: dict[str, Path] = {}
    for item in items:
        name, sep, directory = item.partition("=")
        name = name.strip()
        if not sep or not name or not directory.strip():
            raise ConfigError(f"--backend-dir {item!r}: expected NAME=DIR, e.g. npu_ge=build/backend/npu_ge")
        if name == "python":
            raise ConfigError("--backend-dir python=...: the python backend always comes from the "
                              "nvidia-pytriton wheel")
        path = Path(directory.strip()).expanduser().resolve()
        if not library(name, path).is_file():
            raise ConfigError(f"--backend-dir {item!r}: {library(name, path)} does not exist — "
                              f"build the backend (`make backend` for npu_ge) or name the directory "
                              f"that holds libtriton_{name}.so")
        found[name] = path
    return found


def backend_dirs(flags: Sequence[str] | None, say: Callable[[str], None]) -> dict[str, Path]:
    """Flags over GEADMIN_BACKEND_DIRS over the built npu_ge; says how to get npu_ge if absent."""
    raw = settings.BACKEND_DIRS.get()
    items = list(flags) if flags else [part for part in (raw or "").split(",") if part.strip()]
    found = parse_backend_dirs(items)
    if "npu_ge" not in found:
        if library("npu_ge", BUILT_NPU_GE).is_file():
            found["npu_ge"] = BUILT_NPU_GE
        else:
            say(NPU_GE_HOWTO)
    return found


def served_backends(target: Target) -> frozenset[str] | None:
    """The backends the target's server can load when it is this machine's embedded stack
    (read from its command line), else None: unknown, and the validator's backend rule stays quiet."""
    stack = live_stack()
    pid = stack.triton_pid if stack is not None and is_stack_server(target.spec.url, stack) else None
    return process_backends(pid)
