"""Paths and tools of the deploy tests (Dockerfile, compose files, the compose stack)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SCRIPT = ROOT / "scripts" / "docker-engine.sh"
# What scripts/docker-engine.sh builds: Debian bookworm plus this host's CA bundle (PyPI's
# TLS is re-signed on this network). Only the tests build FROM it.
TEST_BASE_IMAGE = "local/debian-test:bookworm"


def venv_tool(name: str) -> str:
    """A console script of this venv (hadolint, check-jsonschema), else one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


def load_models_script() -> ModuleType:
    """deploy/triton-load-models.py (the triton images' start-up loader, a script, not a
    module of geadmin: the image has no geadmin) imported for its functions."""
    path = ROOT / "deploy" / "triton-load-models.py"
    spec = importlib.util.spec_from_file_location("triton_load_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
