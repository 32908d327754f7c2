"""The one pid-file lock (geadmin.repository.locks.pid_lock) and the locks built on it: a
second holder is refused naming the first, the lock goes with its holder however it ends,
and no other module takes an flock of its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from geadmin.errors import (
    BenchBusyError,
    ConfigLockedError,
    GeAdminError,
    SamplerLockedError,
    StackError,
    TuneBusyError,
)
from geadmin.ops.bench.params import load_test_running, server_lock
from geadmin.ops.tune.trials import tune_lock
from geadmin.repository import locks
from geadmin.repository.locks import holder, pid_lock
from geadmin.stack.workspace import Workspace
from geadmin.telemetry.history.sampler import lock as sampler_lock

ROOT = Path(__file__).resolve().parents[2]
# The trial marker is locked where it is written (repository/trials.py): its file is the
# marker's JSON, not a holder's name.
FLOCK_ALLOWED = {ROOT / "geadmin/repository/locks.py", ROOT / "geadmin/repository/trials.py"}


def refused(holder_text: str) -> GeAdminError:
    return GeAdminError(f"held by {holder_text}")


def test_no_module_takes_an_flock_of_its_own() -> None:
    copies = [f"{path.relative_to(ROOT)}:{number}"
              for path in sorted((ROOT / "geadmin").rglob("*.py")) if path not in FLOCK_ALLOWED
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"\bfcntl\.(flock|lockf)\(", line)]
    assert not copies, f"use geadmin.repository.locks.pid_lock, not a copy: {copies}"


def test_a_second_holder_is_refused_naming_the_first_until_released(tmp_path: Path) -> None:
    path = tmp_path / "new" / "x.lock"
    with pid_lock(path, refused, what="resnet50"):
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
        assert holder(path) == f"resnet50, pid {os.getpid()}"
        with pytest.raises(GeAdminError, match=f"held by resnet50, pid {os.getpid()}"):
            pid_lock(path, refused)
    assert holder(path) == "" and path.read_text() == ""
    with pid_lock(path, refused):  # free again
        assert holder(path) == f"pid {os.getpid()}"


def test_a_waiting_taker_gets_the_lock_when_the_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    first = pid_lock(path, refused)
    timer = threading.Timer(0.3, first.close)
    timer.start()
    started = time.monotonic()
    with pid_lock(path, refused, wait_s=10):
        assert time.monotonic() - started >= 0.25
    timer.join()


def test_the_lock_goes_with_a_holder_killed_by_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib\n"
         "from geadmin.errors import GeAdminError\n"
         "from geadmin.repository.locks import pid_lock\n"
         f"held = pid_lock(pathlib.Path({str(path)!r}), GeAdminError, what='child')\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert holder(path) == f"child, pid {child.pid}"
        with pytest.raises(GeAdminError, match=f"child, pid {child.pid}"):
            pid_lock(path, refused)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert holder(path) == ""  # its name is left behind, its pid is gone
    with pid_lock(path, refused):
        pass


def test_every_lock_is_the_one_lock_with_its_own_refusal(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "home")
    pid = os.getpid()
    with workspace.lock(), pytest.raises(StackError, match=rf"another `geadmin up` \(pid {pid}\) is using"):
        workspace.lock()
    with sampler_lock(tmp_path / "home"), pytest.raises(SamplerLockedError,
                                                        match=rf"another sampler \(pid {pid}\)"):
        sampler_lock(tmp_path / "home")
    busy = rf"another tuning run of m is under way \(tune, pid {pid}\)"
    with tune_lock(tmp_path, "m", purpose="tune"), pytest.raises(TuneBusyError, match=busy), \
            tune_lock(tmp_path, "m"):
        pass
    url = "http://127.0.0.1:8000"
    with server_lock(tmp_path, url, "resnet50"):
        running = load_test_running(tmp_path, url)
        assert running is not None and running.model == "resnet50"
        with pytest.raises(BenchBusyError, match="resnet50, pid"), server_lock(tmp_path, url):
            pass
    assert load_test_running(tmp_path, url) is None


def test_an_unusable_workspace_is_said_by_each_lock(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(StackError, match="cannot use the workspace"):
        Workspace(blocked / "home").lock()
    with pytest.raises(SamplerLockedError, match="cannot use the workspace"):
        sampler_lock(blocked / "home")


def test_an_apply_is_refused_across_workspaces_on_one_repository(tmp_path: Path) -> None:
    """Two geadmin homes (a host CLI beside the compose dashboard) on one repository took their
    apply locks in their own workspaces, and both applied at once."""
    repository = tmp_path / "repo"
    (repository / "m").mkdir(parents=True)
    with locks.edit_lock(repository, "m", "apply", home=tmp_path / "host", wait_s=0):
        refused = r"another geadmin \(of another workspace on this repository, or another user's\) is running"
        with pytest.raises(ConfigLockedError, match=refused), \
                locks.edit_lock(repository, "m", "apply", home=tmp_path / "container", wait_s=0):
            pass
        with locks.edit_lock(repository, "m", "write", home=tmp_path / "host", wait_s=0):
            pass  # the apply's own writes, inside it
    with locks.edit_lock(repository, "m", "apply", home=tmp_path / "container", wait_s=0):
        pass  # released with the first
