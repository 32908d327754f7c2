"""The background-run registry (geadmin.ops.runs) behind the Load test page and the Fleet
page's rollouts: a run starts, reports, is refused while one of its kind and key runs, is
aborted or paused by an authorized user, and however its work ends — a result, a
GeAdminError, an abort, a crash in the worker — it ends in a state the page shows, with its
started and outcome rows in the audit log. Workers are steered with events, never sleeps."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access.roles import GuardedAction, Role
from geadmin.audit import Actor, Origin, Result
from geadmin.errors import (
    BenchBusyError,
    GeAdminError,
    NotAuthorizedError,
    WorkspaceDatabaseError,
    WorkspaceLockError,
)
from geadmin.ops import runs
from geadmin.ops.runs import Ending, Run, RunKind
from tests.support.auth import auth_as
from tests.support.processes import killed_mid_run

WAIT_S = 30
TESTING = RunKind("test run", "server", "the test page", BenchBusyError, GuardedAction.BENCH, "test_run")
PAUSING = RunKind("pausing run", "fleet", "the test page", BenchBusyError, GuardedAction.RELOAD, "pausing",
               pausable=True)
ADA = Actor("ada", Origin.DASHBOARD)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def key() -> str:
    """A key no other test uses: the registry is per process."""
    return f"http://127.0.0.1:8000/{uuid.uuid4().hex}"


def rows(home: Path) -> list[audit.AuditEntry]:
    return list(reversed(audit.query(action=runs.ACTION, home=home)))


def test_a_run_reports_its_progress_finishes_and_is_audited_from_start_to_end(home: Path) -> None:
    go_on = threading.Event()

    def work(run: Run[int]) -> int:
        run.progress(1, 3, "measuring at concurrency 4")
        run.say("one point measured")
        go_on.wait(WAIT_S)
        return 42

    run = runs.start(TESTING, key(), "test of m", ADA, work, subject="m",
                     ending=lambda n: Ending(True, f"answer {n}"), home=home)
    assert run.running and run.state == "running"
    (started,) = rows(home)
    assert (started.result, started.who, started.origin) == ("started", "ada", "dashboard")
    assert (started.model, started.server) == ("m", run.key)
    go_on.set()
    assert run.wait(WAIT_S)
    assert run.state == "done" and run.result == 42 and run.error == ""
    assert (run.status.done, run.status.total, run.status.text) == (1, 3, "measuring at concurrency 4")
    assert run.lines == ["one point measured"]
    assert [(r.result, r.message) for r in rows(home)] == [
        ("started", f"test run: test of m\nrun: {run.token}"),
        ("ok", f"test run done: test of m: answer 42\nrun: {run.token}")]
    assert runs.latest(TESTING, run.key) is run


def test_a_second_run_of_the_same_kind_and_key_is_refused_naming_who_runs_the_first(home: Path) -> None:
    go_on = threading.Event()
    where = key()
    first = runs.start(TESTING, where, "the first", ADA, lambda run: go_on.wait(WAIT_S), home=home)
    try:
        refusal = (rf"a test run of server '{where}' is running \(the first, started by ada\): wait for it, "
                   "or abort it on the test page")
        with pytest.raises(BenchBusyError, match=refusal):
            runs.start(TESTING, where, "the second", Actor("bob"), lambda run: True, home=home)
        other = runs.start(TESTING, key(), "elsewhere", Actor("bob"), lambda run: True, home=home)
        assert other.wait(WAIT_S) and other.state == "done"  # another key is another run
    finally:
        go_on.set()
    assert first.wait(WAIT_S)
    again = runs.start(TESTING, where, "the second", Actor("bob"), lambda run: True, home=home)
    assert again.wait(WAIT_S) and runs.latest(TESTING, where) is again  # ended: a new one may start


def test_an_abort_reaches_the_work_and_the_run_ends_aborted_and_audited(home: Path) -> None:
    started = threading.Event()

    def work(run: Run[None]) -> None:
        started.set()
        assert run.aborted.wait(WAIT_S)
        raise StoppedError("cancelled: perf_analyzer was killed")

    run = runs.start(TESTING, key(), "test of m", ADA, work, subject="m", home=home)
    assert started.wait(WAIT_S)
    runs.steer(run, "abort", auth_as("bob", Role.OPERATOR), home=home)
    assert run.wait(WAIT_S)
    assert run.state == "aborted" and isinstance(run.failure, StoppedError)
    assert run.lines == ["abort by bob"]
    (steered,) = audit.query(action="test_run abort", home=home)
    assert (steered.who, steered.model, steered.server) == ("bob", "m", run.key)
    assert rows(home)[-1].result == "failed" and "test run aborted: test of m" in rows(home)[-1].message


class StoppedError(GeAdminError):
    """What a work raises when it honours an abort (a test double of BenchCancelledError)."""


def test_a_geadmin_error_in_the_work_is_a_failed_run_with_its_error(home: Path) -> None:
    def work(run: Run[None]) -> None:
        raise BenchBusyError("another load test runs against this server")

    run = runs.start(TESTING, key(), "test of m", ADA, work, home=home)
    assert run.wait(WAIT_S)
    assert run.state == "failed" and isinstance(run.failure, BenchBusyError) and not run.crash
    assert run.error == "another load test runs against this server"
    assert rows(home)[-1].result == "failed"


def test_a_crash_in_the_worker_is_a_failed_run_not_a_silent_thread_death(
        home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    def work(run: Run[int]) -> int:
        return {"points": 1}["point"]  # a bug: not an error geadmin raises on purpose

    run = runs.start(TESTING, key(), "test of m", ADA, work, home=home)
    assert run.wait(WAIT_S)
    assert not run.running and run.state == "failed" and run.failure is None
    assert run.error.startswith("the test run crashed: KeyError: 'point' (a bug in geadmin")
    assert "Traceback" in run.crash and "work" in run.crash
    assert "crashed" in capfd.readouterr().err  # the traceback is in the process's log too
    (_, ended) = rows(home)
    assert ended.result == "failed" and "KeyError" in ended.message


def test_a_judged_ending_that_is_not_ok_stops_the_run(home: Path) -> None:
    run = runs.start(PAUSING, key(), "rollout", ADA, lambda run: "gate", home=home,
                     ending=lambda why: Ending(False, f"stopped by the {why}"))
    assert run.wait(WAIT_S)
    assert run.state == "stopped" and run.error == ""
    assert rows(home)[-1].message == f"pausing run stopped: rollout: stopped by the gate\nrun: {run.token}"


def test_a_pausable_run_is_paused_and_resumed_by_an_operator_only(home: Path) -> None:
    seen: list[str] = []
    resumed = threading.Event()

    def work(run: Run[None]) -> None:
        assert run.paused.wait(WAIT_S)
        seen.append("paused")
        resumed.wait(WAIT_S)
        seen.append("resumed" if not run.paused.is_set() else "still paused")

    run = runs.start(PAUSING, key(), "rollout", ADA, work, home=home)
    with pytest.raises(NotAuthorizedError):
        runs.steer(run, "pause", auth_as("vera", Role.VIEWER), home=home)
    assert not run.paused.is_set() and audit.query(action="pausing pause", home=home) == []
    runs.steer(run, "pause", auth_as("ada", Role.OPERATOR), home=home)
    assert run.state == "paused"
    runs.steer(run, "resume", auth_as("ada", Role.OPERATOR), home=home)
    resumed.set()
    assert run.wait(WAIT_S) and seen == ["paused", "resumed"] and run.state == "done"
    assert run.lines == ["pause by ada", "resume by ada"]


def test_a_run_that_cannot_pause_refuses_pause_and_unknown_commands(home: Path) -> None:
    run = runs.start(TESTING, key(), "test", ADA, lambda run: None, home=home)
    assert run.wait(WAIT_S)
    with pytest.raises(ValueError, match="a test run cannot pause"):
        runs.steer(run, "pause", auth_as("ada"), home=home)
    with pytest.raises(ValueError, match="unknown command 'explode'"):
        runs.steer(run, "explode", auth_as("ada"), home=home)


def test_a_run_whose_started_row_cannot_be_written_does_not_start_and_holds_no_lock(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args: object, **kwargs: object) -> audit.AuditEntry:
        raise WorkspaceDatabaseError("database or disk is full")

    monkeypatch.setattr(audit, "record", full_disk)
    ran = threading.Event()
    where = key()
    with pytest.raises(WorkspaceDatabaseError):
        runs.start(TESTING, where, "test", ADA, lambda run: ran.set(), home=home)
    assert runs.latest(TESTING, where) is None and not ran.is_set()
    assert list((home / "locks" / "runs").iterdir()) == []


def test_a_run_whose_lock_cannot_be_created_does_not_start(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("a file where the workspace should be")
    ran = threading.Event()
    where = key()
    with pytest.raises(WorkspaceLockError, match=r"cannot start the test run: its lock file .* cannot be "
                                                 r"created \(Not a directory\) — check that the workspace"):
        runs.start(TESTING, where, "test", ADA, lambda run: ran.set(), home=not_a_dir)
    assert runs.latest(TESTING, where) is None and not ran.is_set()


def test_each_row_of_a_run_names_its_token_and_its_lock_goes_when_it_ends(home: Path) -> None:
    run = runs.start(TESTING, key(), "test of m", ADA, lambda run: 1, subject="m", home=home)
    assert run.wait(WAIT_S)
    started, ended = rows(home)
    assert audit.facts(started.message) == {runs.RUN: run.token} == audit.facts(ended.message)
    assert list((home / "locks" / "runs").iterdir()) == []
    assert runs.close_interrupted(home=home) == []  # ended: nothing to close


def test_a_run_whose_process_was_killed_is_closed_as_interrupted_once_and_a_live_one_never(
        home: Path) -> None:
    where = key()

    def while_it_runs() -> None:
        assert runs.close_interrupted(home=home) == []  # its process holds the lock
        assert [r.result for r in rows(home)] == ["started"]

    killed_mid_run(home, where, then=while_it_runs)
    (started,) = rows(home)
    (closed,) = runs.close_interrupted(home=home, actor=Actor("olga"))
    assert (closed.result, closed.model, closed.server, closed.who) == ("interrupted", "m", where, "olga")
    when = started.at.isoformat(timespec="seconds")
    assert closed.message.startswith("test run: test of m: interrupted — the process that ran it ended "
                                     f"before its outcome (started at {when} by ada)"), closed.message
    assert audit.facts(closed.message) == audit.facts(started.message)
    assert runs.close_interrupted(home=home) == []  # closed once
    assert list((home / "locks" / "runs").iterdir()) == []


def test_the_next_start_closes_what_a_killed_process_left(home: Path) -> None:
    where = key()
    killed_mid_run(home, where)
    run = runs.start(TESTING, where, "test of m", ADA, lambda run: 1, subject="m", home=home)
    assert run.wait(WAIT_S)
    assert [r.result for r in rows(home)] == ["started", "interrupted", "started", "ok"]


def test_an_outcome_row_that_cannot_be_written_is_said_and_the_run_still_ends(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = audit.record

    def full_disk(action: str, model: str, result: object, **kwargs: object) -> audit.AuditEntry:
        if result is not Result.STARTED:
            raise WorkspaceDatabaseError("database or disk is full")
        return written(action, model, result, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(audit, "record", full_disk)
    run = runs.start(TESTING, key(), "test", ADA, lambda run: 1, home=home)
    assert run.wait(WAIT_S) and run.state == "done" and run.result == 1
    assert run.audit_problem == "the audit row could not be written: database or disk is full"
