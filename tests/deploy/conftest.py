"""Fixtures of the deploy tests (Dockerfile, compose files, the compose stack for real).

- marker `docker` (registered in pyproject.toml; a test using `docker_engine` gets it from
  tests/support/tiers.py): the test needs a real Docker engine (`-m docker` selects them,
  `-m "not docker"` leaves them out). They never skip: without an engine they fail.
- `docker_engine` (session): runs scripts/docker-engine.sh, which installs docker.io,
  docker-compose and debootstrap when missing, starts dockerd when none answers and makes
  the local base images; the test fails with the script's output when it fails.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.deploy import ENGINE_SCRIPT


@pytest.fixture(scope="session")
def docker_engine() -> None:
    done = subprocess.run(["bash", str(ENGINE_SCRIPT)], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, (
        f"{ENGINE_SCRIPT} failed (exit {done.returncode}): no Docker engine for these tests\n"
        f"{done.stdout}\n{done.stderr}")
