"""How `make test` shares its tests between pytest-xdist workers (`-n $(TEST_WORKERS)
--dist loadgroup`, three by default; any count works).

Much of the suite waits on other processes (a tritonserver starting, a model loading,
Chromium drawing), so three workers share the two cores (which still idle about a quarter of
a three-worker run; docs/development.md has the figures). Every test is put in a group, and
xdist runs a group on one worker:

- a module is one group, so a module-scoped fixture (a shared tritonserver, one `geadmin up`)
  still starts once;
- every test that uses the Docker engine, wherever it lives, is in the one group `docker`:
  two compose projects at once would fight over the engine's networks and images on this
  2-core machine, and one worker keeps them in order;
- every browser test (`e2e`) joins that group too. Chromium aborts a page load with
  `net::ERR_NETWORK_CHANGED` when compose adds or removes a host network interface under it,
  so browser tests run on the Docker worker, between the Docker tests, never beside one.

A test's nodeid then ends in `@<group>` (that is how xdist shows the group).

Groups are handed out slowest first: the `docker` group, then groups with a test that starts
a real server or browser (`integration`, `e2e`), then the rest, which fill the gaps while the
other worker is still busy. xdist's own order (most tests first) put a one-test module of
minutes, such as the capacity benchmark, behind hundreds of sub-second unit tests: at the end
of the run, on one worker, with the other one idle.

tests/unit/test_parallel_groups.py runs real workers over planted modules to prove it.

Each worker also picks free ports from its own slice of geadmin's pick range
(GEADMIN_FREE_PORT_RANGE, geadmin.stack.processes), one slice per worker of the run: a port
one worker picked and has not bound yet is never another's pick.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geadmin.stack.processes import DEFAULT_PICK_RANGE
from tests.support.tiers import markers_for

DOCKER_GROUP = "docker_and_browser"
SERIAL_MARKERS = ("docker", "e2e")
SLOW_MARKERS = ("docker", "e2e", "integration")  # a real server, browser or engine


def _has_marker(item: pytest.Item, names: tuple[str, ...]) -> bool:
    markers = markers_for(Path(str(item.fspath)), getattr(item, "fixturenames", ()))
    return any(item.get_closest_marker(name) or name in markers for name in names)


def group_of(item: pytest.Item) -> str:
    if _has_marker(item, SERIAL_MARKERS):
        return DOCKER_GROUP
    return item.nodeid.split("::", 1)[0]


def _group_name(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    assert marker is not None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def slowest_groups_first(items: list[pytest.Item]) -> None:
    """Sorts `items` (stably, so a group's tests keep their order) by the rank of their group:
    the Docker group, then groups with a slow test, then the rest; most tests first within a
    rank. The controller hands the groups out in this order (pytest_configure)."""
    size: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        group = _group_name(item)
        size[group] = size.get(group, 0) + 1
        if _has_marker(item, SLOW_MARKERS):
            slow.add(group)

    def rank(item: pytest.Item) -> tuple[int, int]:
        group = _group_name(item)
        tier = 0 if group == DOCKER_GROUP else 1 if group in slow else 2
        return tier, -size[group]

    items.sort(key=rank)


# tryfirst: xdist's worker turns xdist_group markers into the nodeid suffix in its own
# collection hook, which must see the markers given here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group_of(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order workers report is the order handed out
        slowest_groups_first(items)


def worker_port_range(worker: str, workers: int) -> str:
    """`gw0` -> the first of `workers` equal slices of the pick range, `gw1` the second, ..."""
    low, high = DEFAULT_PICK_RANGE
    index = int(worker.removeprefix("gw"))
    if not 0 <= index < workers:
        raise ValueError(f"worker {worker} is not one of {workers} workers")
    size = (high - low + 1) // workers
    return f"{low + index * size}-{low + (index + 1) * size - 1}"


def pytest_configure(config: pytest.Config) -> None:
    # The controller keeps the workers' collection order (slowest_groups_first) instead of
    # re-sorting the groups by their number of tests.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "GEADMIN_FREE_PORT_RANGE" not in os.environ:
        # xdist tells each worker how many there are: -n 3 gives three slices, never two
        workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
        os.environ["GEADMIN_FREE_PORT_RANGE"] = worker_port_range(worker, workers)


_busy: dict[str, list[float]] = {}  # worker -> [seconds in its tests, tests finished]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the controller: each worker's time in setup, call and teardown, summed."""
    node = getattr(report, "node", None)  # xdist's worker that ran it (absent without xdist)
    worker = getattr(getattr(node, "gateway", None), "id", None)
    if worker is not None:
        busy = _busy.setdefault(worker, [0.0, 0])
        busy[0] += report.duration
        busy[1] += report.when == "teardown"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How evenly the workers were loaded: where to look when `make test` grows."""
    if _busy:
        shares = [f"{worker} {seconds:.0f} s over {int(tests)} tests"
                  for worker, (seconds, tests) in sorted(_busy.items())]
        terminalreporter.write_line("worker busy time: " + ", ".join(shares))
