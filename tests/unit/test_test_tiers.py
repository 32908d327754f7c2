"""The test suite's own rules: tiers and helpers.

- A test that starts a real server (tritonserver, `geadmin up`, the dashboard, Prometheus,
  Chromium, Docker, the native build) carries its marker, so `make test-fast` never starts
  one: the guard in tests/support/tiers.py is run here on planted tests, and the fast
  selection is checked to hold no test of a real-server directory or fixture.
- Test modules import helpers from tests/support/, never from another test module or a
  conftest (importing one runs its module code and ties the tiers together).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from geadmin.stack.triton_install import find_tritonserver
from tests.support.tiers import FAST_MARKEXPR, INTEGRATION_DIRS, SERVER_FIXTURES, markers_for

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
FAST_PATHS = ("tests/unit", "tests/deploy", "tests/ui")  # what `make test-fast` runs
FAST_MINIMUM = 600


# -- tiers ---------------------------------------------------------------------------
def run_planted(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """pytest with only the tier plugin on one planted module."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_planted.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.tiers",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_planted.py")],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)


PLANTED = '''
import subprocess
import pytest

TRITONSERVER = {binary!r}

{mark}
def test_starts_tritonserver():
    subprocess.run([TRITONSERVER, "--help"], capture_output=True, timeout=30)

{mark}
def test_starts_geadmin_up():
    subprocess.run([{python!r}, "-m", "geadmin.cli", "up", "--help"], capture_output=True, timeout=60)

def test_runs_a_plain_program():
    subprocess.run(["true"], timeout=30)
'''


def test_the_guard_fails_an_unmarked_test_that_starts_tritonserver_or_geadmin_up(tmp_path: Path) -> None:
    done = run_planted(tmp_path, PLANTED.format(binary=str(find_tritonserver()), python=sys.executable,
                                                mark=""))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout, done.stdout
    assert "test_starts_tritonserver starts a real server but is not marked for it: " \
           "tritonserver needs @pytest.mark.integration" in done.stdout
    assert "geadmin up needs @pytest.mark.integration" in done.stdout


def test_the_guard_lets_a_marked_test_start_them(tmp_path: Path) -> None:
    done = run_planted(tmp_path, PLANTED.format(binary=str(find_tritonserver()), python=sys.executable,
                                                mark="@pytest.mark.integration"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_directories_and_fixtures_give_the_markers() -> None:
    assert markers_for(TESTS / "backend" / "test_x.py", []) == {"integration"}
    assert markers_for(TESTS / "e2e" / "test_x.py", []) == {"integration", "e2e"}
    assert markers_for(TESTS / "unit" / "test_x.py", []) == set()
    assert markers_for(TESTS / "ui" / "test_x.py", ["triton_server"]) == {"integration"}
    assert markers_for(TESTS / "ui" / "test_x.py", ["page"]) == {"integration", "e2e"}
    assert markers_for(TESTS / "deploy" / "test_x.py", ["docker_engine"]) == {"docker"}
    for fixture in SERVER_FIXTURES:
        assert "integration" in markers_for(TESTS / "unit" / "test_x.py", [fixture]), fixture


def test_the_fast_selection_holds_no_real_server_test_and_enough_tests() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", "-m", FAST_MARKEXPR, *FAST_PATHS],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(ids) >= FAST_MINIMUM, done.stdout[-3000:] + done.stderr[-3000:]
    leaked = [i for i in ids if Path(i.split("::")[0]).parts[1] in INTEGRATION_DIRS]
    assert not leaked, leaked


# -- helpers live in tests/support ---------------------------------------------------
def forbidden_imports(source: str) -> list[str]:
    """Imports (at any depth, under TYPE_CHECKING too) of a test module or a conftest."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests" and any(p.startswith("test_") or p == "conftest" for p in parts[1:]):
                found.append(f"line {node.lineno}: {name}")
                break
    return found


def test_the_import_check_sees_a_planted_cross_import() -> None:
    planted = (
        "from tests.integration.test_up import running_up\n"
        "def f():\n    import tests.backend.test_inference\n"
        "from tests.conftest import SAMPLE_MODELS\n"
        "from tests.support.stack import running_up\n"
        "from tests.unit import test_validate\n"
    )
    assert sorted(forbidden_imports(planted)) == [
        "line 1: tests.integration.test_up", "line 3: tests.backend.test_inference",
        "line 4: tests.conftest", "line 6: tests.unit.test_validate"]


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        found = forbidden_imports(path.read_text())
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, f"import helpers from tests/support/ instead: {offenders}"
