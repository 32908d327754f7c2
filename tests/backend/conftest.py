"""Fixtures for the npu_ge backend tests (helpers: tests/support/npu_ge.py).

- `npu_build` (session): builds the backend, the ACL runtime test double and the unit
  tests with backend_src/build.sh (incremental: nothing is rebuilt when nothing changed).
- `npu_triton`: starts private tritonservers with libtriton_npu_ge.so in the backend
  directory and (unless told otherwise) the test double on LD_LIBRARY_PATH; every server
  writes the double's resource counts to its own state file. For tests that need their
  own flags, environment, build, or a whole server's life (start-up, shutdown, leaks).
- `npu_shared` (module): ONE such server per test module, default flags, no model loaded,
  over the module's own repository. A test writes its models into `npu_shared.repo` and
  loads them (`load(...)`, `load_all()`); after it they are unloaded, the double is
  checked to hold nothing, and the repository is emptied: tests of one module share the
  process (about 2 s per test saved), never a model. Tests that read the whole log, the
  whole metrics page or the process's life keep `npu_triton`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.support.npu_ge import (
    BackendBuild,
    NpuServer,
    SharedNpuServer,
    StartServer,
    build_backend,
    npu_process,
)


@pytest.fixture(scope="session")
def npu_build() -> BackendBuild:
    return build_backend()


@pytest.fixture
def npu_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    return repo


@pytest.fixture
def npu_triton(tmp_path: Path, npu_build: BackendBuild) -> Iterator[StartServer]:
    started: list[NpuServer] = []

    def start(
        repo: Path,
        *,
        models: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        with_double: bool = True,
        build: BackendBuild | None = None,
        name: str = "triton",
    ) -> NpuServer:
        server = npu_process(tmp_path / name, repo, build or npu_build, models=models, env=env,
                             extra_args=extra_args, with_double=with_double)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.process.stop()


@pytest.fixture(scope="module")
def npu_shared_server(tmp_path_factory: pytest.TempPathFactory,
                      npu_build: BackendBuild) -> Iterator[SharedNpuServer]:
    root = tmp_path_factory.mktemp("npu_shared")
    repo = root / "repo"
    repo.mkdir()
    server = SharedNpuServer(npu_process(root, repo, npu_build, models=[]), repo)
    server.server.start()
    yield server
    server.server.process.stop()


@pytest.fixture
def npu_shared(npu_shared_server: SharedNpuServer) -> Iterator[SharedNpuServer]:
    assert npu_shared_server.server.process.alive(), "the module's shared npu_ge server has died"
    yield npu_shared_server
    npu_shared_server.reset()
