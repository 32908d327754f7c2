"""Processes in tests: bounded waits, the tree below a pid, a subprocess's output read on a
thread, /proc look-ups."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from geadmin.domain import Ports
from geadmin.errors import PortInUseError
from geadmin.stack.processes import ensure_ports_free, free_triton_ports
from geadmin.stack.tritonserver import TritonProcess

# Test servers' --exit-timeout-secs: how long Triton's shutdown waits for models to unload and
# requests to end. The sample python models' stubs never finish within a second (stop took
# 1.8 s at 1 and 0.8 s at 0 on the 2-core VM, exit status 1 either way), and a test server is
# stopped with TERM, then KILL of its process group, its shm regions removed, whatever Triton
# did. Tests of shutdown itself (the ASan leak check at finalize, `geadmin up` stopping) run
# servers with their own settings.
TEST_EXIT_TIMEOUT_S = 0


def quick_stopping_triton(repository: Path, **kwargs: Any) -> TritonProcess:
    """A test's TritonProcess, stopped without Triton's 5 s shutdown wait (TEST_EXIT_TIMEOUT_S)
    unless the test names its own `exit_timeout_s`."""
    kwargs.setdefault("exit_timeout_s", TEST_EXIT_TIMEOUT_S)
    return TritonProcess(repository, **kwargs)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


class OutputCollector:
    """Reads a subprocess's stdout on a thread, so tests can wait for a line (bounded)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.process = process
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, marker: str, timeout_s: float) -> str:
        if wait_for(lambda: marker in self.text or self.process.poll() is not None, timeout_s):
            self._thread.join(timeout=1) if self.process.poll() is not None else None
            if marker in self.text:
                return self.text
        raise AssertionError(f"{marker!r} not printed within {timeout_s}s; output so far:\n{self.text}")


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def cmdline(pid: int) -> bytes:
    """The NUL-separated command line of `pid` (b"" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


KILLED_RUN_WAIT_S = 30
# A dashboard that runs a background run and is then SIGKILLed (argv: home, key).
KILLED_DASHBOARD = """
import sys, threading
from pathlib import Path
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor
from geadmin.errors import BenchBusyError
from geadmin.ops import runs
kind = runs.RunKind("test run", "server", "the test page", BenchBusyError, GuardedAction.BENCH, "test_run")
runs.start(kind, sys.argv[2], "test of m", Actor("ada"), lambda run: threading.Event().wait(), subject="m",
           home=Path(sys.argv[1]))
print("started", flush=True)
threading.Event().wait()
"""


def killed_mid_run(home: Path, where: str, *, then: Callable[[], None] = lambda: None) -> None:
    """Runs KILLED_DASHBOARD until its run has started, calls `then` while it runs, SIGKILLs it."""
    process = subprocess.Popen([sys.executable, "-c", KILLED_DASHBOARD, str(home), where],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "started\n"
        then()
    finally:
        process.kill()
        process.wait(KILLED_RUN_WAIT_S)


def triton_ports_free_on(*hosts: str, attempts: int = 50) -> Ports:
    """Triton's three ports, free on every one of `hosts` (replicas on 127.0.0.1, .2 and .3 share
    their ports): picked on the first, checked on the rest. A pick on .2 alone once gave a port a
    server of an earlier module held on .1 (a `make test` run: "port 30226 (Triton metrics) on
    127.0.0.1 is already in use")."""
    for _ in range(attempts):
        ports = free_triton_ports(hosts[0])
        try:
            for host in hosts[1:]:
                ensure_ports_free(host, ports)
        except PortInUseError:
            continue
        return ports
    raise AssertionError(f"no three ports free on all of {hosts} in {attempts} picks")
