"""The embedded stack's own rows (geadmin.stack.stack_audit): each end of Triton with its real
origin and result. The same rows against a real `geadmin up`: tests/integration/test_stack_audit.py,
test_supervisor.py and test_up.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from geadmin import audit
from geadmin.audit import Actor, Origin
from geadmin.stack.stack_audit import STACK_PAGE_SERVER, StackAudit, origin_of_signal
from geadmin.stack.supervisor import START_FAILED, exit_record


def rows(home: Path) -> list[tuple[str, str, str]]:
    return [(r.action, r.result, r.message) for r in reversed(audit.query(model="tritonserver", home=home))]


def stack_audit(home: Path) -> StackAudit:
    said: list[str] = []
    return StackAudit(home, "http://127.0.0.1:8000", said.append, origin_wait_s=0.3)


def test_a_crash_is_a_failed_exit_and_the_restart_after_it_has_its_own_result(tmp_path: Path) -> None:
    log = stack_audit(tmp_path)
    log.exit(exit_record(-9, 300.0, restarted=True))
    log.restart(True, "tritonserver is live again (restart 1)")
    log.exit(exit_record(-11, 2.0, restarted=True))
    log.exit(exit_record(None, 0.0, True, f"{START_FAILED}: port 8000 is taken"))
    assert rows(tmp_path) == [
        ("exit", "failed", "tritonserver killed by SIGKILL after 5 min; geadmin up restarts it (the next row "
                           "says whether it came back)"),
        ("restart", "ok", "tritonserver is live again (restart 1)"),
        ("exit", "failed", "tritonserver killed by SIGSEGV after 2 s; geadmin up restarts it (the next row "
                           "says whether it came back)"),
        ("restart", "failed", f"tritonserver did not start again: {START_FAILED}: port 8000 is taken"),
    ]


def test_a_requested_stop_is_stopped_as_asked_not_its_exit_code(tmp_path: Path) -> None:
    log = stack_audit(tmp_path)
    log.exit(exit_record(1, 60.0, False, "stopped from the Stack page by alice (dashboard)", requested=True))
    log.exit(exit_record(-9, 60.0, False, "stopped by signal SIGUSR1", requested=True))
    log.exit(exit_record(1, 60.0, True, "restart asked", requested=True))  # its row: when the restart ends
    assert rows(tmp_path) == [
        ("stop", "ok", "stopped from the Stack page by alice (dashboard): tritonserver stopped as asked "
                       "after 1 min"),
        ("stop", "ok", "stopped by signal SIGUSR1: tritonserver killed by SIGKILL (it did not stop in time "
                       "when asked) after 1 min"),
    ]


def test_the_whole_stack_stopping_is_one_row_with_its_signal(tmp_path: Path) -> None:
    assert origin_of_signal(signal.SIGINT) == "stopped by Ctrl-C (SIGINT)"
    assert origin_of_signal(signal.SIGTERM) == "stopped by signal SIGTERM"
    log = stack_audit(tmp_path)
    record = exit_record(1, 10.0, False, origin_of_signal(signal.SIGTERM), requested=True)
    log.stack_stopped(origin_of_signal(signal.SIGTERM), record, "running")
    log.stack_stopped(origin_of_signal(signal.SIGTERM), None, "stopped")  # a second stop() writes nothing
    (row,) = audit.query(model="tritonserver", home=tmp_path)
    assert (row.action, row.result, row.origin) == ("stop", "ok", "cli")
    assert row.message == ("stopped by signal SIGTERM: `geadmin up` ended; tritonserver stopped as asked "
                           "after 10 s")


def test_a_stop_signal_names_the_stack_pages_user_only_when_the_page_sent_it(tmp_path: Path) -> None:
    log = stack_audit(tmp_path)
    asked_at = time.time()
    started = time.monotonic()
    shell = log.origin_of("stop", asked_at)
    assert 0.3 <= time.monotonic() - started < 3  # it waits a moment for the page's row, no longer
    assert shell == (f"stopped by signal SIGUSR1 to `geadmin up` (pid {os.getpid()}), not from the "
                     "Stack page or `geadmin stack`")
    actor = Actor("alice", Origin.DASHBOARD)  # what the Stack page's perform() records
    audit.record_action("stop", "triton", True, "asked the local stack to stop triton",
                        server=STACK_PAGE_SERVER, actor=actor, home=tmp_path)
    assert log.origin_of("stop", asked_at) == "stopped from the Stack page by alice (dashboard)"
    restart = log.origin_of("restart", asked_at)
    assert restart.startswith("restart asked by signal SIGHUP")  # a stop is no restart
    audit.record_action("start", "triton", True, "asked", server=STACK_PAGE_SERVER, actor=actor,
                        home=tmp_path)
    assert log.origin_of("restart", asked_at) == "restart asked from the Stack page by alice (dashboard)"
    later = log.origin_of("stop", time.time() + 60)
    assert later.startswith("stopped by signal")  # an older row is not this stop's


def test_models_a_restart_left_out_are_recorded_unless_the_log_already_says_why(tmp_path: Path) -> None:
    audit.record("unload", "parked", audit.Result.OK, actor=Actor("alice"), home=tmp_path)
    audit.record("load", "broken", audit.Result.FAILED, message="bad dims", home=tmp_path)
    audit.record("load", "pipe", audit.Result.OK, home=tmp_path)
    stack_audit(tmp_path).left_out({"parked": "unloaded", "broken": "bad dims", "pipe": "unloaded",
                                    "never_audited": "unloaded"})
    written = {r.model: r for r in audit.query(action="side_effect", home=tmp_path)}
    assert sorted(written) == ["never_audited", "pipe"]
    assert written["pipe"].result == "failed" and written["pipe"].message.startswith(
        "pipe was not serving when Triton went (its index said: unloaded); the restart loads only")


def test_a_model_unloaded_then_only_written_by_an_apply_is_not_recorded_as_left_out(tmp_path: Path) -> None:
    """`config apply` without --load writes the file of an unloaded model: its row says nothing of
    whether it serves, so the operator's unload before it still stands."""
    audit.record("unload", "parked", audit.Result.OK, actor=Actor("alice"), home=tmp_path)
    audit.record("apply", "parked", audit.Result.OK, message="written; not loaded", home=tmp_path)
    stack_audit(tmp_path).left_out({"parked": "unloaded"})
    assert audit.query(action="side_effect", home=tmp_path) == []
