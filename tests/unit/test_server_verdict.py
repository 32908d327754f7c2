"""The verdict with the embedded stack's account of its Triton (geadmin.stack.server_verdict),
assembled once for `geadmin status`, the Overview's banner and the sidebar: why a stack's
Triton does not answer, a recent crash while it serves again, its process; nothing of the
kind for a server the stack did not start."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from geadmin.diagnose.evidence import EvidenceSources
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Level
from geadmin.domain import ModelEntry, ModelState, Ports, ServerInfo
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.server_verdict import server_verdict
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.servers import DEFAULT_TRITON_URL

STACK_URL = "http://127.0.0.1:18000"
READY = ModelEntry("good", "1", ModelState.READY, "")


def snapshot(url: str = STACK_URL, *, reachable: bool = True) -> ServerSnapshot:
    if not reachable:
        return ServerSnapshot("s", url, "http", datetime.now(timezone.utc), live=False, ready=False,
                              error=f"Triton at {url} does not answer: connection refused")
    return ServerSnapshot("s", url, "http", datetime.now(timezone.utc), live=True, ready=True,
                          info=ServerInfo("triton", "2.51.0", ()), models=(READY,))


def stack(home: Path, state: str, exits: tuple[ExitRecord, ...], pid: int | None = None) -> StackInfo:
    return StackInfo(os.getpid(), STACK_URL, "grpc://127.0.0.1:18001", "http://127.0.0.1:18002/metrics",
                     Ports(18000, 18001, 18002), "http://127.0.0.1:18501", home / "t.log", home / "repo",
                     home, triton_pid=pid, triton_state=state, exits=exits,
                     triton_started_at=time.time() - 600 if pid else None)


def killed(ago_s: float) -> ExitRecord:
    return ExitRecord(time.time() - ago_s, None, "SIGKILL", 2100.0, True)


def test_a_stack_triton_that_is_restarting_is_down_with_why_not_is_the_url_right(tmp_path: Path) -> None:
    found = server_verdict(snapshot(reachable=False), EvidenceSources(),
                           stack(tmp_path, "restarting", (killed(5),)))
    assert found.verdict.level is Level.DOWN
    assert found.outage.startswith("Triton is restarting (attempt 1)")
    assert found.headline == f"DOWN: {found.outage}"
    assert found.crash == ""  # the outage says it
    document = found.to_json()
    assert document["headline"] == found.headline  # it was the verdict's "check liveness: ..."
    assert document["outage"] == found.outage and document["recent_crash"] == ""
    assert document["verdict"] == "DOWN" and document["triton"] == {
        "pid": None, "state": "restarting", "started_at": None, "restarts": 1, "stack_pid": os.getpid()}


def test_a_stack_triton_back_from_a_crash_is_ok_and_says_the_crash(tmp_path: Path) -> None:
    found = server_verdict(snapshot(), EvidenceSources(),
                           stack(tmp_path, "running", (killed(600),), pid=4321))
    assert found.verdict.level is Level.OK and found.outage == ""
    assert found.crash.startswith("Triton crashed and was restarted: ")
    assert found.headline == found.verdict.headline
    assert found.to_json()["triton"]["pid"] == 4321  # type: ignore[index]


def test_a_server_the_stack_did_not_start_has_no_account(tmp_path: Path) -> None:
    elsewhere = "http://127.0.0.2:8000"
    found = server_verdict(snapshot(elsewhere, reachable=False), EvidenceSources(),
                           stack(tmp_path, "restarting", (killed(5),)))
    assert found.history is None and found.process is None and found.outage == ""
    assert found.headline == found.verdict.headline and "does not answer" in found.headline
    assert server_verdict(snapshot(), None, None).to_json()["triton"] is None


def test_a_geadmin_up_killed_without_stopping_is_named_as_the_outage_not_the_url(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    Workspace(tmp_path).write_stack(replace(stack(tmp_path, "running", ()), pid=gone.pid))
    for url, where in ((STACK_URL, ""), (DEFAULT_TRITON_URL, f" (its Triton was at {STACK_URL}, not ")):
        found = server_verdict(snapshot(url, reachable=False), EvidenceSources(home=tmp_path), None)
        assert found.headline.startswith(f"DOWN: `geadmin up` of {tmp_path} (pid {gone.pid}) is gone without "
                                         "stopping — killed, or the machine restarted; its Triton and "
                                         f"dashboard ended with it{where}"), found.headline
    elsewhere = server_verdict(snapshot("http://127.0.0.2:8000", reachable=False),
                               EvidenceSources(home=tmp_path), None)
    assert elsewhere.outage == ""
