"""The rollout journal without a server: the plan's round trip, rows read back, the next
start closing an open journal only when no process holds the fleet's lock, the verdict's
interrupted-change rule for a fleet, a pause that expires, a version rollout left between its
steps, and the servers a restore of an ad-hoc rollout finds (a key only where one is proven)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import Result
from geadmin.diagnose import interrupted, rollouts
from geadmin.diagnose.health import ServerSnapshot, triage
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RetireStep, RolloutPlan
from geadmin.diagnose.verdict import VerdictRule, judge
from geadmin.errors import RepositoryError, RolloutJournalError, RolloutRefusedError, TritonError
from geadmin.fleet import journal, restore, unresolved
from geadmin.fleet.members import Member, Trust
from geadmin.fleet.versions import roll_version
from geadmin.fleet.wave import Control
from geadmin.ops.models import rollout_recovery
from geadmin.stack.processes import free_ports
from geadmin.triton.servers import ServerSpec

PLAN = RolloutPlan("lab", "apply", "echo", (PlannedServer("a", "http://127.0.0.1:1", 1, "/r/shared"),
                                     PlannedServer("b", "http://127.0.0.2:1", 2, "/r/shared"),
                                     PlannedServer("c", "http://127.0.0.3:1", 3, "/r/own")),
            3, 1, (Previous("/r/shared", "ab" * 32, 1), Previous("/r/own", "cd" * 32, 1)),
            'name: "echo"\nparameters { key: "x" value { string_value: "a: b" } }\n', "ef" * 32)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def cut_short_at_b(home: Path) -> journal.Recorder:
    """A journal as a process killed while changing b leaves it: started, a done, b begun."""
    recorder = journal.Recorder(PLAN, audit.Actor("ann"), home)
    recorder.start()
    recorder.step("a", 1, rollouts.CHANGING)
    recorder.step("a", 1, rollouts.CHANGED)
    recorder.step("b", 2, rollouts.CHANGING)
    return recorder


RETIRE = RetireStep(2, (1,), 'name: "echo"\nversion_policy { specific { versions: [2] } }\n')


def test_the_plan_survives_its_row_and_a_row_that_is_no_plan_is_refused() -> None:
    assert RolloutPlan.from_json(PLAN.to_json()) == PLAN
    for version_step in (replace(PLAN, retire=RETIRE), replace(PLAN, follows=7)):
        assert RolloutPlan.from_json(version_step.to_json()) == version_step
    known = replace(PLAN, servers=tuple(replace(s, ready=s.name != "b") for s in PLAN.servers))
    assert [s.ready for s in RolloutPlan.from_json(known.to_json()).servers] == [True, False, True]
    older = json.loads(PLAN.to_json())  # journaled before the state was kept: None, undone as before
    for server in older["servers"]:
        del server["ready"]
    assert [s.ready for s in RolloutPlan.from_json(json.dumps(older)).servers] == [None, None, None]
    for junk in ("{", "[]", '{"fleet": "x"}', '{"fleet": "l", "change": "rm -rf", "model": "m", '
                 '"servers": [], "waves": 0}', "[" * 5000,
                 '{"fleet": "l", "change": "load", "model": "m", "waves": 1, '
                 '"servers": [{"name": "a", "url": "u", "wave": 1, "repository": "", "ready": "yes"}]}'):
        with pytest.raises(RolloutJournalError, match="rollout plan"):
            RolloutPlan.from_json(junk)


def test_an_open_journal_is_closed_at_the_next_start_only_when_no_process_holds_its_lock(home: Path) -> None:
    recorder = cut_short_at_b(home)
    (found,) = rollouts.journals(home=home)
    assert found.open and not found.unresolved and found.touched == ["a", "b"]
    assert found.where() == "a changed (wave 1); b cut short while being changed (wave 2); c not reached"
    with rollout_recovery.rollout_lock("lab", home=home):  # the rollout still runs (in this process, say)
        assert rollout_recovery.close_rollouts(home=home) == []
    assert rollouts.journals(home=home)[0].open
    (line,) = rollout_recovery.close_rollouts(home=home)
    assert f"rollout #{recorder.id}" in line and f"geadmin fleet restore {recorder.id}" in line
    (closed,) = rollouts.journals(home=home)
    assert closed.end is not None and closed.end.result == Result.INTERRUPTED.value
    assert closed.unresolved and closed.left_changed == ["a", "b"]
    assert "on disk /r/shared: /r/shared/echo/config.pbtxt cannot be read" in closed.end.message
    assert rollout_recovery.close_rollouts(home=home) == []  # once


def test_an_interrupted_rollout_is_the_verdict_s_interrupted_change_for_the_servers_it_planned(
    home: Path
) -> None:
    recorder = cut_short_at_b(home)
    rollout_recovery.close_rollouts(home=home)
    snapshot = ServerSnapshot("b", "http://127.0.0.2:1", "http", datetime.now(timezone.utc), live=True,
                              ready=True)
    flagged = interrupted.unresolved(home=home, url="http://127.0.0.2:1/")
    assert [item.restore_command for item in flagged] == [f"geadmin fleet restore {recorder.id}"]
    verdict = judge(snapshot, triage(snapshot), cut_short=flagged)
    assert verdict.rules == [VerdictRule.INTERRUPTED_CHANGE] and verdict.level.value == "DEGRADED"
    assert verdict.reasons[0].fix == f"geadmin fleet restore {recorder.id}"
    assert "b cut short while being changed (wave 2)" in verdict.headline
    assert interrupted.unresolved(home=home, url="http://127.0.0.9:1") == []  # not one of its servers
    reasons = unresolved.fleet_reasons("lab", home=home)
    assert unresolved.fleet_headline("FLEET OK: 3 servers, 1 model", reasons).startswith(
        "FLEET DEGRADED: an interrupted fleet apply of 'echo' on fleet 'lab'")
    assert unresolved.fleet_reasons("other", home=home) == []


def test_a_journal_ended_with_every_server_put_back_is_resolved(home: Path) -> None:
    recorder = cut_short_at_b(home)
    recorder.end(Result.FAILED, "ROLLOUT FAILED: cut short by ScriptRerun; 2 changed server(s) put back")
    assert rollouts.unresolved(home=home) == []
    other = journal.Recorder(PLAN, audit.Actor("bob"), home)
    other.start()
    other.step("a", 1, rollouts.CHANGING)
    other.end(Result.FAILED, "ROLLOUT FAILED: ...; NOT put back on a", ["a"])
    (left,) = rollouts.unresolved(home=home)
    assert left.id == other.id and left.left_changed == ["a"]


def test_a_pause_expires_after_its_bound_and_a_resume_before_it_does_not() -> None:
    control = Control(max_pause_s=1)
    control.paused.set()
    started = time.monotonic()
    assert "the pause expired" in control.wait_while_paused()
    assert 1 <= time.monotonic() - started < 5
    control = Control(max_pause_s=60)
    assert control.wait_while_paused() == ""  # not paused: no wait


def test_a_version_rollout_refusal_keeps_its_cause(home: Path, tmp_path: Path) -> None:
    """Unreadable config: a RepositoryError, never a bare OSError; a server that does not answer:
    a RolloutRefusedError whose cause is Triton's error (not dropped)."""
    repository = tmp_path / "repo"
    (repository / "echo" / "2").mkdir(parents=True)
    (repository / "echo" / "config.pbtxt").mkdir()  # a directory where the file should be: unreadable
    port = free_ports(1)[0]
    member = Member(ServerSpec("a", f"http://127.0.0.1:{port}"), "test", repository=repository,
                    trust=Trust(True, "the test's own listener"))
    with pytest.raises(RepositoryError, match=r"config of 'echo'.*not a regular file") as raised:
        roll_version([member], "echo", 2, auth=guard.os_user(), home=home, timeout_s=1)
    assert isinstance(raised.value.__cause__, RepositoryError)  # the one reader's refusal, kept
    (repository / "echo" / "config.pbtxt").rmdir()
    (repository / "echo" / "config.pbtxt").write_text('name: "echo"\nbackend: "python"\n')
    with pytest.raises(RolloutRefusedError, match="cannot read what a serves") as raised:
        roll_version([member], "echo", 2, auth=guard.os_user(), home=home, timeout_s=1)
    assert isinstance(raised.value.__cause__, TritonError)
    assert rollouts.journals(home=home) == []  # refused before anything: nothing journaled


def first_step_done(home: Path) -> journal.Recorder:
    """A version rollout's first step as it ends: every server changed (v2 beside v1), `ok`."""
    recorder = journal.Recorder(replace(PLAN, retire=RETIRE), audit.Actor("ann"), home)
    recorder.start()
    for server in PLAN.servers:
        recorder.step(server.name, server.wave, rollouts.CHANGING)
        recorder.step(server.name, server.wave, rollouts.CHANGED)
    recorder.end(Result.OK, "ROLLOUT DONE: apply echo on 3 server(s) in 3 wave(s), every gate passed")
    return recorder


def test_a_version_rollout_left_between_its_steps_is_closed_at_the_next_start_and_degrades_the_fleet(
    home: Path
) -> None:
    """Killed after its first step ended `ok` and before the retire step journaled anything: both
    versions served, and nothing reported it (the first step's journal looked done)."""
    first = first_step_done(home)
    (found,) = rollouts.journals(home=home)
    assert found.between_steps and found.open and not found.unresolved
    with rollout_recovery.rollout_lock("lab", home=home):  # its process moves on to the retire step
        assert rollout_recovery.close_rollouts(home=home) == []
    (line,) = rollout_recovery.close_rollouts(home=home)
    assert f"rollout #{first.id}" in line, line
    assert "was cut short between its two steps: v2 serves beside v1 on a, b, c" in line, line
    (closed,) = rollouts.journals(home=home)
    assert closed.unresolved and not closed.open and closed.left_changed == ["a", "b", "c"]
    assert closed.end is not None and "between the two steps of a version rollout" in closed.end.headline
    (reason,) = unresolved.fleet_reasons("lab", home=home)
    assert reason.text.startswith(f"an unfinished version rollout of 'echo' on fleet 'lab' "
                                  f"(rollout #{first.id},"), reason.text
    assert f"`geadmin fleet resume {first.id}` retires v1" in reason.text
    assert reason.fix == f"geadmin fleet restore {first.id}"
    assert rollout_recovery.close_rollouts(home=home) == []  # once


def test_a_retire_step_settles_the_first_while_it_runs_or_once_done_never_once_put_back(home: Path) -> None:
    first = first_step_done(home)
    retire = journal.Recorder(replace(PLAN, follows=first.id), audit.Actor("ann"), home)
    retire.start()
    running = rollouts.read(first.id, home=home)
    assert running.resumed_by == retire.id and not running.open and not running.between_steps
    retire.end(Result.ROLLED_BACK, "ROLLOUT STOPPED at wave 1 of 3: ...; 1 changed server(s) put back")
    assert rollouts.read(first.id, home=home).between_steps  # both serve again: still to finish
    again = journal.Recorder(replace(PLAN, follows=first.id), audit.Actor("ann"), home)
    again.start()
    again.end(Result.OK, "ROLLOUT DONE")
    done = rollouts.read(first.id, home=home)
    assert done.resumed_by == again.id and not done.open and not done.unresolved
    assert rollout_recovery.close_rollouts(home=home) == []


def test_an_ad_hoc_rollouts_servers_get_a_key_only_as_configured_servers_at_the_url_it_names(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL in a journal proves nothing: the key a servers file binds to that URL goes there,
    under the plan's name; a server named in the file at another URL keeps its key away."""
    servers = tmp_path / "servers.toml"
    servers.write_text('[[server]]\nname = "first"\nurl = "http://127.0.0.1:8000"\nadmin_key = "key-a"\n\n'
                       '[[server]]\nname = "c"\nurl = "http://127.0.0.9:8000"\nadmin_key = "key-c"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    plan = RolloutPlan("ad hoc", "reload", "echo", (PlannedServer("a", "http://127.0.0.1:8000/", 1),
                                                    PlannedServer("b", "http://127.0.0.2:8000", 2),
                                                    PlannedServer("c", "http://127.0.0.3:8000", 3)), 3)
    found = restore.journal_servers(plan)
    assert [(m.name, m.url, m.spec.admin_key, m.trust.trusted) for m in found] == [
        ("a", "http://127.0.0.1:8000", "key-a", True)]
    clients, absent = restore.clients_for(plan, found, 1.0)
    for client in clients.values():
        client.close()
    assert set(clients) == {"a"} and set(absent) == {"b", "c"}
    assert absent["c"].startswith("c (http://127.0.0.3:8000) is no configured server now"), absent["c"]
    assert "pass `--source SRC` or `--fleet NAME`" in absent["b"]
    untrusted = [replace(found[0], trust=Trust(False, "outside the trusted networks"))]
    clients, absent = restore.clients_for(plan, untrusted, 1.0)
    assert clients == {} and absent["a"] == "a is not proven to belong now: outside the trusted networks"
    given = restore.journal_servers(plan, sources=["servers"])  # what the operator names: as discovered
    assert [(m.name, m.spec.admin_key) for m in given] == [("first", "key-a"), ("c", "key-c")]
