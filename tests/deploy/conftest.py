"""Fixtures of the deploy tests (Dockerfile, compose files, the compose stack for real).

- marker `docker`: the test needs a real Docker engine (`-m docker` selects them,
  `-m "not docker"` leaves them out). They never skip: without an engine they fail.
- `docker_engine` (session): runs scripts/docker-engine.sh, which installs docker.io,
  docker-compose and debootstrap when missing, starts dockerd when none answers and makes
  the local base images; the test fails with the script's output when it fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SCRIPT = ROOT / "scripts" / "docker-engine.sh"
# What scripts/docker-engine.sh builds: Debian bookworm plus this host's CA bundle (PyPI's
# TLS is re-signed on this network). Only the tests build FROM it.
TEST_BASE_IMAGE = "local/debian-test:bookworm"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a real Docker engine (scripts/docker-engine.sh)")


def venv_tool(name: str) -> str:
    """A console script of this venv (hadolint, check-jsonschema), else one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


@pytest.fixture(scope="session")
def docker_engine() -> None:
    done = subprocess.run(["bash", str(ENGINE_SCRIPT)], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, (
        f"{ENGINE_SCRIPT} failed (exit {done.returncode}): no Docker engine for these tests\n"
        f"{done.stdout}\n{done.stderr}")
