"""Fixtures for the npu_ge backend tests.

- `npu_build` (session): builds the backend, the ACL runtime test double and the unit
  tests with backend_src/build.sh (incremental).
- `npu_triton`: starts real tritonservers with libtriton_npu_ge.so in the backend
  directory and (unless told otherwise) the test double on LD_LIBRARY_PATH; every server
  writes the double's resource counts to its own state file. Servers stop at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin.stack.tritonserver import TritonProcess, prepare_backend_directory
from tests.backend.support import BackendBuild, build_backend


@dataclass
class NpuServer:
    process: TritonProcess
    state_file: Path  # the ACL double's resource counts (JSON)
    log_path: Path

    @property
    def url(self) -> str:
        return self.process.http_url

    @property
    def metrics_url(self) -> str:
        return self.process.metrics_url

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


StartServer = Callable[..., NpuServer]


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
    started: list[TritonProcess] = []

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
        b = build or npu_build
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        bdir = prepare_backend_directory(root / "backends", extra={"npu_ge": b.lib_dir})
        state_file = root / "acl_double_state.json"
        full_env = {"NPU_GE_DOUBLE_STATE_FILE": str(state_file), **(env or {})}
        process = TritonProcess(
            repository=repo,
            backend_dir=bdir,
            log_path=root / "triton.log",
            models=models,
            ld_library_path=[b.double_dir] if with_double else [],
            env=full_env,
            extra_args=["--backend-config=npu_ge,telemetry_interval_ms=100", *extra_args],
        )
        process.start(timeout_s=120)
        started.append(process)
        return NpuServer(process, state_file, root / "triton.log")

    yield start
    for process in started:
        process.stop()
