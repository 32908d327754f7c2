"""Test tiers: which markers a test gets, and a guard that fails an unmarked test that
starts a real server.

`make test-fast` runs `-m "not integration and not e2e and not docker"`; a test that starts
a tritonserver, a `geadmin up` stack, the dashboard, Prometheus, Chromium, the native build
or the Docker engine must therefore carry the marker, or the fast tier would start it.

Markers come from three places:
- the directory: tests/integration/, tests/backend/ and tests/e2e/ are `integration`
  (tests/e2e/ also `e2e`);
- the fixtures a test uses (SERVER_FIXTURES, BROWSER_FIXTURES, DOCKER_FIXTURES);
- the module's own `pytestmark` (tests/ui modules that start a server themselves).

The guard watches every process this pytest process starts (`sys.addaudithook`, event
`subprocess.Popen`) during a test's setup and call, and fails the test when it started a
real server that its markers do not allow. It sees what really ran, so a server started
through a helper or a module-scoped fixture is caught as well as a direct one.
tests/conftest.py wires the hooks below; tests/unit/test_test_tiers.py runs the guard on
planted tests (`pytest -p tests.support.tiers`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

SERVER_FIXTURES = frozenset({"triton_server", "triton_factory", "dashboard", "npu_triton", "npu_shared",
                             "restricted_server", "npu_build"})
BROWSER_FIXTURES = frozenset({"browser", "page"})
DOCKER_FIXTURES = frozenset({"docker_engine"})
INTEGRATION_DIRS = frozenset({"integration", "backend", "e2e"})
FAST_EXCLUDES = ("integration", "e2e", "docker")
FAST_MARKEXPR = " and ".join(f"not {m}" for m in FAST_EXCLUDES)

TESTS_ROOT = Path(__file__).resolve().parents[1]


def markers_for(path: Path, fixturenames: Sequence[str]) -> set[str]:
    """The tier markers a test gets from its directory and its fixtures."""
    found: set[str] = set()
    fixtures = set(fixturenames)
    try:
        top = path.resolve().relative_to(TESTS_ROOT).parts[0]
    except (ValueError, IndexError):
        top = ""
    if top in INTEGRATION_DIRS:
        found.add("integration")
    if top == "e2e" or fixtures & BROWSER_FIXTURES:
        found |= {"e2e", "integration"}
    if fixtures & SERVER_FIXTURES:
        found.add("integration")
    if fixtures & DOCKER_FIXTURES:
        found.add("docker")
    return found


# -- what counts as starting a real server ------------------------------------------
def _real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None


def _real_binaries() -> dict[str, str]:
    """realpath -> the marker it needs. Resolved once, from the environment pytest started
    in: a test double named `docker` in a temporary directory is not the engine."""
    found: dict[str, str] = {}
    try:
        from geadmin.stack.triton_install import find_tritonserver

        found[os.path.realpath(find_tritonserver())] = "integration"
    except Exception:  # no tritonserver here: nothing of it can start
        pass
    for name, marker in (("prometheus", "integration"), ("alertmanager", "integration"),
                         ("prometheus-alertmanager", "integration"), ("chromium", "e2e"),
                         ("cmake", "integration"), ("docker", "docker"),
                         ("docker-compose", "docker"), ("dockerd", "docker")):
        real = _real(shutil.which(name))
        if real:
            found[real] = marker
    return found


def needed_marker(args: Sequence[str], executable: str | None, path_env: str | None,
                  binaries: dict[str, str]) -> tuple[str, str] | None:
    """(marker, what) when this command line starts a real server, else None."""
    argv = [os.fsdecode(a) for a in args]
    if not argv:
        return None
    head = executable or argv[0]
    real = _real(head if os.sep in head else shutil.which(head, path=path_env))
    if real in binaries:
        return binaries[real], Path(head).name
    words = argv[1:4]
    if ("geadmin.cli" in argv[:3] or Path(argv[0]).name == "geadmin") and "up" in words:
        return "integration", "geadmin up"
    if "streamlit" in " ".join(argv[:3]) and "run" in words:
        return "integration", "the dashboard (streamlit run)"
    if any(Path(a).name == "build.sh" and "backend_src" in a for a in argv[:2]):
        return "integration", "backend_src/build.sh"
    return None


class ServerGuard:
    """Records the real servers started while a test runs (one audit hook per process)."""

    def __init__(self) -> None:
        self.binaries = _real_binaries()
        self.started: list[tuple[str, str]] | None = None  # None: not recording
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "subprocess.Popen" or self.started is None:
            return
        executable, argv, _cwd, env = args
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        path_env = (env or os.environ).get("PATH") if isinstance(env or os.environ, dict) else None
        found = needed_marker(list(argv), executable, path_env, self.binaries)
        if found:
            self.started.append(found)

    def begin(self) -> None:
        self.started = []

    def end(self, item: pytest.Item) -> None:
        """Fails `item` when it started a real server that its markers do not allow."""
        started, self.started = self.started or [], None
        have = {m.name for m in item.iter_markers()}
        missing = sorted({f"{what} needs @pytest.mark.{marker}" for marker, what in started
                          if marker not in have})
        if missing:
            raise AssertionError(
                f"{item.nodeid} starts a real server but is not marked for it: {'; '.join(missing)}. "
                "Mark the module (`pytestmark = pytest.mark.integration`), or use a server fixture "
                "from tests/conftest.py, so `make test-fast` leaves it out.")


_GUARD: ServerGuard | None = None


def _guard() -> ServerGuard:
    global _GUARD
    if _GUARD is None:
        _GUARD = ServerGuard()
    return _GUARD


# -- hooks: tests/conftest.py imports these; `pytest -p tests.support.tiers` loads them ----
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(markers_for(Path(str(item.fspath)), getattr(item, "fixturenames", ()))):
            item.add_marker(marker)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _watched(item))


def _watched(item: pytest.Item) -> Iterator[None]:
    guard = _guard()
    guard.begin()
    try:
        result = yield
    except BaseException:
        guard.end(item)  # an unmarked server is the first thing to fix
        raise
    guard.end(item)
    return result
