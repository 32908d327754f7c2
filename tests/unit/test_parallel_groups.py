"""`make test`'s workers (tests/support/parallel.py), run for real on planted modules.

pytest-xdist workers run a planted suite; each planted test writes down which worker ran
it. A module stays on one worker (its module fixture starts once), every Docker and
browser test, from any module, runs on the same worker, and slow groups start first.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geadmin.stack.processes import DEFAULT_PICK_RANGE
from tests.support.parallel import worker_port_range

ROOT = Path(__file__).resolve().parents[2]

RECORD = '''
import os
from pathlib import Path

import pytest

LOG = Path(__file__).parent / "ran.log"


def record(name):
    with LOG.open("a") as out:
        out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {name}\\n")


@pytest.fixture(scope="module")
def shared():
    record("fixture-start " + __name__)
    return 1
'''

MODULES = {
    "test_plain_a.py": "\n".join(f"def test_a{i}(shared):\n    record('a')\n" for i in range(6)),
    "test_plain_b.py": "\n".join(f"def test_b{i}(shared):\n    record('b')\n" for i in range(6)),
    "test_engine_one.py": "pytestmark = pytest.mark.docker\n"
                          + "\n".join(f"def test_d{i}():\n    record('serial')\n" for i in range(3)),
    "test_engine_two.py": "pytestmark = pytest.mark.docker\n"
                          + "\n".join(f"def test_e{i}():\n    record('serial')\n" for i in range(3)),
    "test_chromium.py": "pytestmark = pytest.mark.e2e\n"
                        + "\n".join(f"def test_c{i}():\n    record('serial')\n" for i in range(3)),
    # one slow test (a real server): handed out before the plain modules' many quick ones
    "test_server.py": "pytestmark = pytest.mark.integration\ndef test_s():\n    record('server')\n",
}


# Run from an xdist worker, the planted run must not inherit the worker's identity or its
# port slice: its controller would take itself for that worker and hand the slice down.
PLANTED_ENV = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTEST_XDIST_") and k != "GEADMIN_FREE_PORT_RANGE"}


def run_planted(tmp_path: Path, workers: int = 2
                ) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, str]]]:
    markers = "".join(f"    {name}: x\n" for name in ("docker", "e2e", "integration"))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n" + markers)
    for name, body in MODULES.items():
        (tmp_path / name).write_text(RECORD + "\n" + body)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "tests.support.parallel",
         "-n", str(workers), "--dist", "loadgroup", "-c", str(tmp_path / "pytest.ini"),
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=180, check=False,
        env=PLANTED_ENV)
    lines = (tmp_path / "ran.log").read_text().splitlines() if (tmp_path / "ran.log").exists() else []
    return result, [tuple(line.split(" ", 1)) for line in lines]  # type: ignore[misc]


def test_docker_and_browser_tests_share_one_worker_and_a_module_stays_on_one(tmp_path: Path) -> None:
    result, ran = run_planted(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len([name for _, name in ran if not name.startswith("fixture-start")]) == 22
    serial_workers = {worker for worker, name in ran if name == "serial"}
    assert len(serial_workers) == 1 and serial_workers <= {"gw0", "gw1"}, ran
    for module in ("a", "b"):
        assert len({worker for worker, name in ran if name == module}) == 1, ran
    # one start of each module fixture: the module was not split between the workers
    assert sorted(name for _, name in ran if name.startswith("fixture-start")) == [
        "fixture-start test_plain_a", "fixture-start test_plain_b"]
    assert "test_engine_one.py::test_d0@docker_and_browser" in result.stdout
    assert "test_chromium.py::test_c0@docker_and_browser" in result.stdout
    assert "test_plain_a.py::test_a0@test_plain_a.py" in result.stdout


def test_the_slow_groups_are_handed_out_first(tmp_path: Path) -> None:
    # xdist's own order (most tests first) would start a worker on a plain module of six
    # quick tests and leave the one slow test for the end of the run
    result, ran = run_planted(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    tests = [(worker, name) for worker, name in ran if not name.startswith("fixture-start")]
    first = {worker: next(name for w, name in tests if w == worker) for worker in ("gw0", "gw1")}
    assert sorted(first.values()) == ["serial", "server"], ran


def test_each_of_three_workers_picks_ports_from_its_own_third_of_the_range(tmp_path: Path) -> None:
    # a worker count the slices did not follow gave gw2 the same slice as gw0
    body = "def test_p():\n    record(os.environ['GEADMIN_FREE_PORT_RANGE'])\n"
    # 30, not 6: with the planted modules' groups beside them, six once all went to one worker
    # (a clean run failed on it), and the check below needs two workers' slices
    for i in range(30):
        (tmp_path / f"test_ports_{i}.py").write_text(RECORD + "\n" + body)
    result, ran = run_planted(tmp_path, workers=3)
    assert result.returncode == 0, result.stdout + result.stderr
    ranges = {(worker, name) for worker, name in ran if name[0].isdigit()}
    assert len({worker for worker, _ in ranges}) >= 2, ran
    assert ranges == {(worker, worker_port_range(worker, 3)) for worker, _ in ranges}, ran
    spans = [tuple(int(n) for n in worker_port_range(f"gw{i}", 3).split("-")) for i in range(3)]
    low, high = DEFAULT_PICK_RANGE
    assert spans[0][0] == low and spans[-1][1] <= high
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans)), spans  # disjoint


def test_a_worker_beyond_the_count_gets_no_slice() -> None:
    with pytest.raises(ValueError, match="gw3 is not one of 3 workers"):
        worker_port_range("gw3", 3)


def test_without_workers_the_plugin_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(RECORD + "\ndef test_one(shared):\n    record('one')\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.parallel",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr
