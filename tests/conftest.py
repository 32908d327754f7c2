"""Shared fixtures: real tritonservers (nvidia-pytriton wheel) on free 127.0.0.1 ports.

- `sample_repository`: a private copy of the packaged sample repository (per test module).
- `triton_server`: one server per test session over its own copy; tests that change
  server state (unload, config overrides) must put it back, or use `triton_factory`.
- `triton_factory`: start a private server (about 2 s) with any repository / flags; name
  the models the test needs (`models=[...]`, `[]` for none): the default loads every
  sample, three of them python models with a stub process each.
- `dashboard`: the Streamlit dashboard served against `triton_server`.

Markers are applied here, from what a test really uses, so `-m integration` / `-m e2e` /
`-m docker` select the right tests (tests/support/tiers.py): a test that needs a real
tritonserver (a fixture above, a directory of real-server tests, or a module that starts
one itself and says so with `pytestmark`) is `integration`; one that drives Chromium is
`e2e`; one that needs the Docker engine is `docker`. A test that starts a real server
without its marker fails, so `make test-fast` never starts one.

The session never writes to the user's workspace: GEADMIN_HOME and XDG_DATA_HOME point at a
throwaway directory for this process and every child it starts (tests/support/workspace.py);
a test that needs its own workspace sets GEADMIN_HOME itself.

HYPOTHESIS_PROFILE=fast (set by `make test-fast`) runs fewer property examples
(tests/support/hypothesis_profiles.py); the default profile keeps the full counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit import config as streamlit_config

from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.tritonserver import TritonProcess
from tests.support import hypothesis_profiles, workspace
from tests.support.apptest import scan_components_once
from tests.support.processes import quick_stopping_triton
from tests.support.samples import SAMPLE_MODELS as SAMPLE_MODELS
from tests.support.samples import copy_samples, samples_triton

# Tier markers from directory and fixtures, and the guard that fails an unmarked test that
# starts a real server (tests/support/tiers.py): hooks of this conftest.
from tests.support.tiers import pytest_collection_modifyitems as pytest_collection_modifyitems
from tests.support.tiers import pytest_runtest_call as pytest_runtest_call
from tests.support.tiers import pytest_runtest_setup as pytest_runtest_setup

hypothesis_profiles.load()
workspace.isolate()  # before any test runs: no row, file or stack in the user's workspace

# `make test`'s workers: which tests share one (tests/support/parallel.py).
pytest_plugins = ["tests.support.parallel"]

# AppTest runs the app in this process, where Streamlit's `server.address` is unset (which
# means every interface, so sign-in would be required): give it the address `geadmin up`
# binds (Streamlit reads STREAMLIT_* variables only under `streamlit run`). Access tests that
# need another address set it themselves (tests/ui/test_access_pages.py).
streamlit_config.set_option("server.address", "127.0.0.1")
scan_components_once()

# With no users, a loopback dashboard asks for a token (geadmin/access/token.py). Page and
# browser tests that are not about sign-in say so, here, once: no sign-in, by name (the
# dashboards they start, in process or as children, inherit it). Sign-in tests choose their
# mode themselves (GEADMIN_AUTH=auto, token, local or oidc), and `running_up` runs `geadmin
# up` with its real default: the token (tests/support/stack.py).
os.environ["GEADMIN_AUTH"] = "open"

@pytest.fixture
def sample_repository(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "model_repository")


@pytest.fixture(scope="session")
def triton_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    yield from samples_triton(tmp_path_factory.mktemp("triton_session"))


@pytest.fixture
def triton_factory(tmp_path: Path) -> Iterator[Callable[..., TritonProcess]]:
    started: list[TritonProcess] = []

    def start(repository: Path | None = None, **kwargs: Any) -> TritonProcess:
        repo = repository or copy_samples(tmp_path / f"repo{len(started)}")
        kwargs.setdefault("log_path", tmp_path / f"tritonserver{len(started)}.log")
        # Triton's shutdown waits up to --exit-timeout-secs for open HTTP connections (the
        # pages' cached clients keep theirs) and live models: 5 s per server at teardown by
        # default; a test server need not wait at all (tests/support/processes.py).
        server = quick_stopping_triton(repo, **kwargs)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def dashboard(
    triton_server: TritonProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DashboardProcess]:
    home = tmp_path_factory.mktemp("dashboard_home")
    process = DashboardProcess(triton_url=triton_server.http_url, home=home,
                               triton_log=triton_server.log_path,
                               repository=triton_server.repository)
    process.start()
    yield process
    process.stop()


