"""Rollouts are journaled, against three real tritonservers (tests/support/fleet_lab.py: a and
b read one repository, c its own).

`geadmin fleet apply` runs in a child process that SIGKILLs itself at each step of the
rollout (GEADMIN_FAULT_POINT): before the first server, inside the first server's apply (the
file written, Triton not asked), after server 1 changed, mid-wave 2 (b's step journaled, b not
touched), before the end row. The next start (`geadmin fleet status`, `geadmin status`, the
Fleet page) reports it DEGRADED with what changed where; `geadmin fleet restore ID` (or the
page's button) puts every config back byte-identical and reloads; `geadmin fleet resume ID`
finishes it instead. In one process: any exception, not only geadmin's, puts back the servers
already changed and ends the journal `failed`; a pause longer than the bound expires by
restoring. A version rollout killed between its two steps (v2 beside v1, v1 not retired) is
reported the same way, and resumed to its end or restored (v1 serving alone again: the file put
back pins it, as 2/ is there); one whose first gate fails leaves v1 serving alone the same way.
An ad-hoc (`--source`) rollout is restored and resumed from its journal alone, with no key for
a server the servers file no longer lists."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.access import guard
from geadmin.diagnose import rollouts
from geadmin.errors import RepositoryError
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.rollout import Change, rollout
from geadmin.fleet.versions import roll_version
from geadmin.fleet.wave import Control
from geadmin.repository.knobs import set_policy
from geadmin.repository.modelconfig import parse_pbtxt
from tests.support.apptest import APP, button, isolate, run
from tests.support.fleet_lab import BASE, HOSTS, MODEL, FleetLab, config, fleet_lab
from tests.support.processes import wait_for
from tests.support.stack import GEADMIN, geadmin, in_process

pytestmark = pytest.mark.integration

NEW = config("v1.1")
LOOSE = GateSettings(requests=0, latency_slack_ms=10_000)  # READY only: the cores are shared in CI
APPLY_FLAGS = ("--fleet", "lab", "--wave-size", "1", "--gate-requests", "0", "--latency-slack-ms", "10000")


class ScriptRerun(BaseException):
    """What Streamlit raises inside a page's `st.*` call when a click asks for a rerun."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetLab]:
    with fleet_lab(tmp_path_factory.mktemp("journal"), export=True) as started:
        yield started


@pytest.fixture
def fresh(lab: FleetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FleetLab]:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))  # a journal of its own
    monkeypatch.delenv("GEADMIN_FAULT_POINT", raising=False)
    yield lab
    lab.put_back()


def killed_apply(home: Path, new_file: Path, fault: str, *where: str) -> subprocess.CompletedProcess[str]:
    """`geadmin fleet apply` killed at `fault`; `where`: the servers (default: `--fleet lab`)."""
    flags = [*where, *APPLY_FLAGS[2:]] if where else APPLY_FLAGS
    return killed(home, fault, "apply", MODEL, str(new_file), *flags)


def killed(home: Path, fault: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_FAULT_POINT": fault}
    return subprocess.run([*GEADMIN, "fleet", *args], env=env, text=True, capture_output=True, timeout=300,
                          check=False)


# fault point -> (what the journal says each server went through, the shared and the own file new?)
STEPS = {
    "rollout.started": ({"a": "not reached", "b": "not reached", "c": "not reached"}, False, False),
    "apply.written": ({"a": "changing", "b": "not reached", "c": "not reached"}, True, False),
    "rollout.changed.1": ({"a": "changed", "b": "not reached", "c": "not reached"}, True, False),
    "rollout.changing.2": ({"a": "changed", "b": "changing", "c": "not reached"}, True, False),
    "rollout.ending": ({"a": "changed", "b": "changed", "c": "changed"}, True, True),
}


def servers_file_without_c(lab: FleetLab, tmp_path: Path) -> Path:
    """The lab's servers file with server c gone from it (its repository is still there)."""
    text = lab.servers_file.read_text()
    start = text.index('[[server]]\nname = "c"')
    without_c = tmp_path / "servers.toml"
    without_c.write_text(text[:start] + text[text.index("[[fleet]]"):])
    return without_c


@pytest.mark.parametrize("fault", list(STEPS))
def test_a_rollout_killed_at_each_step_is_reported_at_the_next_start_and_restored_byte_identical(
    fresh: FleetLab, tmp_path: Path, fault: str
) -> None:
    home = tmp_path / "home"
    before = fresh.files()
    (tmp_path / "new.pbtxt").write_text(NEW)
    steps, shared_new, own_new = STEPS[fault]

    killed = killed_apply(home, tmp_path / "new.pbtxt", fault)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    assert fresh.files() == ((NEW.encode() if shared_new else before[0]),
                             (NEW.encode() if own_new else before[1]))
    (journal,) = rollouts.journals(home=home)  # the plan was journaled before any server was touched
    assert journal.open and [s.name for s in journal.plan.servers] == list(HOSTS)
    assert {s.name: journal.outcome(s.name) for s in journal.plan.servers} == steps
    repositories = {str(fresh.shared.resolve()), str(fresh.own.resolve())}
    assert {p.repository for p in journal.plan.previous} == repositories

    # The next start: DEGRADED, naming what changed where, with the command that restores it.
    status = geadmin("fleet", "status", "--fleet", "lab", home=home)
    assert status.returncode == 4, status.stdout + status.stderr
    headline = status.stdout.splitlines()[0]
    assert headline.startswith(f"FLEET DEGRADED: an interrupted fleet apply of {MODEL!r}"), status.stdout
    assert f"rollout #{journal.id}" in headline and "was cut short" in headline
    for name, state in steps.items():
        shown = "cut short while being changed" if state == "changing" else state
        assert f"{name} {shown}" in headline, (name, headline)
    assert f"restore: geadmin fleet restore {journal.id}" in status.stdout
    assert f"restore it with `geadmin fleet restore {journal.id}`" in status.stderr  # said once, when closed
    document = json.loads(in_process("fleet", "status", "--fleet", "lab", "--json", home=home).stdout)
    assert [r["rule"] for r in document["interrupted"]] == ["interrupted-change"]
    assert document["headline"].startswith("FLEET DEGRADED")
    verdicts = in_process("status", "--fleet", "lab", "--json", home=home)  # each server's verdict: that rule
    assert verdicts.returncode == 4
    levels = {d["server"]: d["verdict"] for d in json.loads(verdicts.stdout)}
    assert levels == dict.fromkeys(HOSTS, "DEGRADED")
    assert all("interrupted-change" in d["rules"] for d in json.loads(verdicts.stdout))
    refused = in_process("fleet", "reload", MODEL, "--fleet", "lab", home=home)  # not over a mixed fleet
    assert refused.returncode == 2
    assert f"restore it first (`geadmin fleet restore {journal.id}`" in refused.stderr

    restored = in_process("fleet", "restore", str(journal.id), home=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert restored.stdout.startswith(f"RESTORED rollout #{journal.id}"), restored.stdout
    assert fresh.files() == before  # byte-identical
    assert {fresh.mode_served(n) for n in HOSTS} == {"v1"}  # and reloaded
    after = rollouts.read(journal.id, home=home)
    assert not after.unresolved and after.end is not None and after.end.result == "rolled_back"
    assert in_process("fleet", "status", "--fleet", "lab", home=home).returncode == 0
    again = in_process("fleet", "restore", str(journal.id), home=home)
    assert again.returncode == 2 and "nothing to restore" in again.stderr


def test_an_interrupted_rollout_resumed_finishes_as_planned(fresh: FleetLab, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "new.pbtxt").write_text(NEW)
    assert killed_apply(home, tmp_path / "new.pbtxt", "rollout.changing.2").returncode == -signal.SIGKILL
    (journal,) = rollouts.journals(home=home)
    resumed = in_process("fleet", "resume", str(journal.id), "--gate-requests", "0",
                         "--latency-slack-ms", "10000", home=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.startswith(f"ROLLOUT DONE: apply {MODEL} on 3 server(s)"), resumed.stdout
    assert fresh.files() == (NEW.encode(), NEW.encode())
    assert {fresh.mode_served(n) for n in HOSTS} == {"v1.1"}  # b too, whose file was already new
    old = rollouts.read(journal.id, home=home)
    assert not old.unresolved and old.resumed_by > journal.id
    newer = rollouts.read(old.resumed_by, home=home)  # its restore would put back the original configs
    assert newer.plan.previous == journal.plan.previous and newer.plan.resume_of == journal.id
    assert in_process("fleet", "status", "--fleet", "lab", home=home).returncode == 0


def test_a_resume_never_overwrites_a_config_edited_since_and_the_rollout_it_failed_stays_unresolved(
    fresh: FleetLab, tmp_path: Path
) -> None:
    """A resume wrote its config over a hand edit made after the crash, and the rollout it resumed
    counted as resolved once any resume had started, even one that was stopped and put back."""
    home = tmp_path / "home"
    (tmp_path / "new.pbtxt").write_text(NEW)
    assert killed_apply(home, tmp_path / "new.pbtxt", "rollout.changed.1").returncode == -signal.SIGKILL
    (journal,) = rollouts.journals(home=home)
    own = fresh.own / MODEL / "config.pbtxt"
    own.write_text(config("by hand"))  # c's own file, edited after the crash
    resumed = in_process("fleet", "resume", str(journal.id), "--gate-requests", "0",
                         "--latency-slack-ms", "10000", home=home)
    assert resumed.returncode != 0, resumed.stdout
    assert "changed since the rollout" in resumed.stdout + resumed.stderr
    assert "not overwritten by the resume" in resumed.stdout + resumed.stderr
    assert own.read_text() == config("by hand")
    original = rollouts.read(journal.id, home=home)
    assert original.unresolved and not original.resumed_by  # what it changed is still to put right
    status = in_process("fleet", "status", "--fleet", "lab", home=home)
    assert status.returncode == 4 and f"rollout #{journal.id}" in status.stdout, status.stdout


def test_a_server_gone_for_good_is_restored_by_its_file_when_the_operator_says_so(
    fresh: FleetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica scaled in after a crash blocked the fleet for good: every restore failed naming
    it, every new rollout was refused, and its repository was never put back."""
    home = tmp_path / "home"
    before = fresh.files()
    (tmp_path / "new.pbtxt").write_text(NEW)
    assert killed_apply(home, tmp_path / "new.pbtxt", "rollout.ending").returncode == -signal.SIGKILL
    (journal,) = rollouts.journals(home=home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers_file_without_c(fresh, tmp_path)))  # c left
    refused = in_process("fleet", "restore", str(journal.id), home=home)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "c is not a member of fleet 'lab' now" in refused.stdout and "`--gone c`" in refused.stdout
    assert fresh.files() == (before[0], NEW.encode())  # a and b back; c's file still new
    restored = in_process("fleet", "restore", str(journal.id), "--gone", "c", home=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert fresh.files() == before
    assert not rollouts.read(journal.id, home=home).unresolved


def test_a_rollout_by_another_name_over_the_same_servers_is_the_fleets_concern(
    fresh: FleetLab, tmp_path: Path
) -> None:
    """Killed as an ad-hoc `--source servers` rollout, it left `a` changed while `fleet status
    --fleet lab` read OK and a rollout of lab ran over the mixed servers."""
    home = tmp_path / "home"
    (tmp_path / "new.pbtxt").write_text(NEW)
    env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_FAULT_POINT": "rollout.changed.1"}
    flags = [f for f in APPLY_FLAGS if f not in ("--fleet", "lab")]
    command = [*GEADMIN, "fleet", "apply", MODEL, str(tmp_path / "new.pbtxt"), "--source", "servers", *flags]
    killed = subprocess.run(command, env=env, text=True, capture_output=True, timeout=300, check=False)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    (journal,) = rollouts.journals(home=home)
    assert journal.plan.fleet != "lab"
    status = in_process("fleet", "status", "--fleet", "lab", home=home)
    assert status.returncode == 4 and f"rollout #{journal.id}" in status.stdout, status.stdout
    refused = in_process("fleet", "reload", MODEL, "--fleet", "lab", home=home)
    assert refused.returncode == 2 and f"rollout #{journal.id}" in refused.stderr, refused.stderr
    restored = in_process("fleet", "restore", str(journal.id), "--source", "servers", home=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr


def test_a_repository_without_the_model_is_refused_before_any_server_changes(fresh: FleetLab,
                                                                             tmp_path: Path) -> None:
    members = fresh.members()
    empty = tmp_path / "empty"
    empty.mkdir()
    lacking = [members[0], replace(members[2], repository=empty)]
    with pytest.raises(RepositoryError, match=f"no config.pbtxt in {empty / MODEL}"):
        rollout(lacking, Change.APPLY, MODEL, new_config=NEW.encode(), gate=LOOSE, auth=guard.os_user(),
                fleet="lab")
    assert fresh.files() == (BASE.encode(), BASE.encode()) and fresh.mode_served("a") == "v1"


def test_a_config_that_vanishes_from_the_second_server_restores_the_first_and_ends_failed(
    fresh: FleetLab
) -> None:
    members = [m for m in fresh.members() if m.name in ("a", "c")]  # c, with its own repository, second
    own = fresh.own / MODEL / "config.pbtxt"

    def progress(line: str) -> None:
        if line.startswith("wave 2: apply"):  # a changed; c's config taken away before c is touched
            own.rename(own.with_name("moved.pbtxt"))

    try:
        result = rollout(members, Change.APPLY, MODEL, new_config=NEW.encode(), gate=LOOSE,
                         auth=guard.os_user(), fleet="lab", progress=progress)
    finally:
        own.with_name("moved.pbtxt").rename(own)
    assert not result.ok and result.headline.startswith("ROLLOUT FAILED at wave 2 of 2: c: "), result.headline
    assert "no config.pbtxt" in result.headline and "1 changed server(s) put back" in result.headline
    assert {r.server: r.outcome for r in result.rows} == {"a": "restored", "c": "failed"}
    assert fresh.files() == (BASE.encode(), BASE.encode()) and fresh.mode_served("a") == "v1"
    end = audit.query(action="fleet apply")[0]
    assert (end.id, end.result) == (result.audit_id, "failed")
    journal = rollouts.read(result.journal_id or 0)
    assert [(r.server, audit.facts(r.message)["outcome"]) for r in journal.steps] == [
        ("a", "changing"), ("a", "changed"), ("c", "changing"), ("c", "failed"), ("a", "restored")]
    assert not journal.unresolved  # everything it changed is back: nothing left to restore


def test_any_exception_puts_back_the_servers_changed_and_ends_the_journal_failed(fresh: FleetLab) -> None:
    def progress(line: str) -> None:
        if line.startswith("wave 2: apply"):  # a changed: a Streamlit rerun raised from the page's callback
            raise ScriptRerun

    with pytest.raises(ScriptRerun):
        rollout(fresh.members(), Change.APPLY, MODEL, new_config=NEW.encode(), gate=LOOSE,
                auth=guard.os_user(), fleet="lab", progress=progress)
    assert fresh.files() == (BASE.encode(), BASE.encode())
    assert fresh.mode_served("a") == "v1"
    (journal,) = rollouts.journals()
    assert journal.end is not None and journal.end.result == "failed" and not journal.unresolved
    assert journal.end.headline.startswith("ROLLOUT FAILED: cut short by ScriptRerun; "
                                           "1 changed server(s) put back")
    assert journal.outcome("a") == "restored" and journal.outcome("b") == "not reached"


def test_a_pause_longer_than_the_bound_expires_by_restoring(fresh: FleetLab,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_ROLLOUT_PAUSE_MAX_S", "2")
    control = Control()

    def progress(line: str) -> None:
        if line.startswith("wave 1: health gate"):  # a changed; paused before wave 2, and forgotten
            control.paused.set()

    result = rollout(fresh.members(), Change.APPLY, MODEL, new_config=NEW.encode(), gate=LOOSE,
                     auth=guard.os_user(), fleet="lab", progress=progress, control=control)
    assert not result.ok
    assert result.headline.startswith("ROLLOUT STOPPED at wave 2 of 3: paused for longer than 2 s "
                                      "(GEADMIN_ROLLOUT_PAUSE_MAX_S): the pause expired; 1 changed server(s) "
                                      "put back"), result.headline
    assert fresh.files() == (BASE.encode(), BASE.encode()) and fresh.mode_served("a") == "v1"
    end = audit.query(action="fleet apply")[0]
    assert end.result == "rolled_back" and "the pause expired" in end.message
    again = rollout(fresh.members(), Change.RELOAD, MODEL, gate=LOOSE, auth=guard.os_user(), fleet="lab")
    assert again.ok, again.headline


def test_a_load_stopped_midway_leaves_serving_what_served_before(fresh: FleetLab,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A `fleet load` of a model every server serves is a reload: stopped after a, the put back
    undid it as a load, unloading it from a and taking a serving model down. Each server goes
    back to its state before, journaled with the plan."""
    monkeypatch.setenv("GEADMIN_ROLLOUT_PAUSE_MAX_S", "2")
    control = Control()

    def progress(line: str) -> None:
        if line.startswith("wave 1: health gate"):  # a reloaded; paused before wave 2, and forgotten
            control.paused.set()

    result = rollout(fresh.members(), Change.LOAD, MODEL, gate=LOOSE, auth=guard.os_user(), fleet="lab",
                     progress=progress, control=control)
    assert not result.ok and "1 changed server(s) put back" in result.headline, result.headline
    assert {r.server: r.outcome for r in result.rows}["a"] == "restored"
    for name in fresh.servers:
        with fresh.client(name) as client:
            assert client.model_ready(MODEL), f"{name} no longer serves {MODEL}"
    plan = rollouts.read(result.journal_id or 0).plan
    assert [(s.name, s.ready) for s in plan.servers] == [("a", True), ("b", True), ("c", True)]

    # a model loaded where it was not loaded before is unloaded again there
    with fresh.client("a") as client:
        client.unload(MODEL)
    control = Control()
    result = rollout(fresh.members(), Change.LOAD, MODEL, gate=LOOSE, auth=guard.os_user(), fleet="lab",
                     progress=progress, control=control)
    assert not result.ok and {r.server: r.outcome for r in result.rows}["a"] == "restored"
    with fresh.client("a") as client:
        assert not client.model_ready(MODEL)
    with fresh.client("b") as client:
        assert client.model_ready(MODEL)


def test_the_fleet_page_shows_an_interrupted_rollout_and_restores_it(
    fresh: FleetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    before = fresh.files()
    (tmp_path / "new.pbtxt").write_text(NEW)
    assert killed_apply(home, tmp_path / "new.pbtxt", "rollout.changed.1").returncode == -signal.SIGKILL
    isolate(monkeypatch, home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(fresh.servers_file))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    next(s for s in at.selectbox if s.label == "Fleet").set_value("lab")
    run(at)
    (journal,) = rollouts.journals(home=home)
    errors = [e.value for e in at.error]
    assert any(e.startswith("FLEET DEGRADED: an interrupted fleet apply") for e in errors), errors
    assert any(e.startswith(f"Interrupted rollout #{journal.id}") and "a changed (wave 1); b not reached" in e
               for e in errors), errors
    button(at, f"Restore rollout #{journal.id}").click()
    run(at)  # asked first, with what it puts back: nothing changed yet
    assert any(w.value.startswith(f"Restore rollout #{journal.id}: put back a (") for w in at.warning), \
        [w.value for w in at.warning]
    assert fresh.files() != before
    button(at, "Yes").click()
    run(at)
    assert any(s.value.startswith(f"RESTORED rollout #{journal.id}") for s in at.success), \
        [e.value for e in at.error]
    assert fresh.files() == before and fresh.mode_served("a") == "v1"
    restored = rollouts.read(journal.id, home=home)
    assert restored.end is not None and restored.end.result == "rolled_back" and restored.end.who != ""


@pytest.fixture
def version_2(fresh: FleetLab) -> Iterator[FleetLab]:
    """Version 2 of the model copied into both repositories, not served yet; removed after."""
    for repo in (fresh.shared, fresh.own):
        shutil.copytree(repo / MODEL / "1", repo / MODEL / "2")
    yield fresh
    for repo in (fresh.shared, fresh.own):
        shutil.rmtree(repo / MODEL / "2", ignore_errors=True)


def served(lab: FleetLab) -> dict[str, set[str]]:
    """The versions of the model READY on each server."""
    found = {}
    for name in HOSTS:
        with lab.client(name) as client:
            found[name] = {e.version for e in client.repository_index()
                           if e.name == MODEL and e.state.value == "READY"}
    return found


def killed_between_steps(lab: FleetLab, home: Path) -> rollouts.Journal:
    """`geadmin fleet version MODEL 2` killed after v2 was loaded beside v1 everywhere, before the
    retire step started: its first step's journal."""
    cut = killed(home, "version.between_steps", "version", MODEL, "2", *APPLY_FLAGS)
    assert cut.returncode == -signal.SIGKILL, (cut.stdout, cut.stderr)
    assert served(lab) == {name: {"1", "2"} for name in HOSTS}  # both serve: the state to report
    (journal,) = rollouts.journals(home=home)  # the retire step never journaled
    return journal


def test_a_version_rollout_killed_between_its_steps_is_reported_and_resumed_to_the_end(
    version_2: FleetLab, tmp_path: Path
) -> None:
    """Killed after v2 was loaded beside v1 and before v1 was retired, both versions served and
    nothing said so: the first step's journal had ended `ok`, the second had none, and `fleet
    status`, the verdict, restore and resume were silent."""
    home = tmp_path / "home"
    journal = killed_between_steps(version_2, home)

    status = geadmin("fleet", "status", "--fleet", "lab", home=home)
    assert status.returncode == 4, status.stdout + status.stderr
    headline = status.stdout.splitlines()[0]
    assert headline.startswith(f"FLEET DEGRADED: an unfinished version rollout of {MODEL!r} on fleet 'lab' "
                               f"(rollout #{journal.id}"), headline
    assert "was cut short between its two steps: v2 serves beside v1 on a, b, c" in headline, headline
    assert f"`geadmin fleet resume {journal.id}` retires v1" in headline, headline
    assert f"restore: geadmin fleet restore {journal.id}" in status.stdout
    verdicts = in_process("status", "--fleet", "lab", "--json", home=home)  # each server: DEGRADED
    levels = {d["server"]: d["verdict"] for d in json.loads(verdicts.stdout)}
    assert levels == dict.fromkeys(HOSTS, "DEGRADED")
    refused = in_process("fleet", "reload", MODEL, "--fleet", "lab", home=home)
    assert refused.returncode == 2 and f"rollout #{journal.id}" in refused.stderr, refused.stderr

    resumed = in_process("fleet", "resume", str(journal.id), "--gate-requests", "0",
                         "--latency-slack-ms", "10000", home=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    done = f"VERSION ROLLOUT DONE: v2 of {MODEL} serves on 3 server(s), v1 retired"
    assert resumed.stdout.startswith(done), resumed.stdout
    assert served(version_2) == {name: {"2"} for name in HOSTS}
    assert not rollouts.read(journal.id, home=home).unresolved
    assert settled(home)


def test_a_version_rollout_killed_between_its_steps_is_restored_to_v1_serving_alone(
    version_2: FleetLab, tmp_path: Path
) -> None:
    """The config before pins no version (Triton's default: the latest), and 2/ is there: putting
    that file back byte-identical served v2, not v1, and the restore said RESTORED. The file put
    back pins v1, and what serves is read, not assumed."""
    home = tmp_path / "home"
    journal = killed_between_steps(version_2, home)
    restored = in_process("fleet", "restore", str(journal.id), home=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert pinned_to_v1(version_2.files())
    assert not rollouts.read(journal.id, home=home).unresolved
    first = restored.stdout.splitlines()[0]
    assert first.startswith(f"RESTORED rollout #{journal.id}: 3 server(s) put back (a, b, c); the config put "
                            "back pins v1 (version_policy `versions: [1]`): "
                            f"{MODEL}/2/ is in the repository"), first
    assert "NOT v1" not in restored.stdout, restored.stdout
    assert served(version_2) == {name: {"1"} for name in HOSTS}
    assert settled(home)


def test_a_version_rollout_whose_first_gate_fails_leaves_v1_serving_alone(version_2: FleetLab,
                                                                           tmp_path: Path) -> None:
    """v2 loads and answers the apply's test request, then fails: the first wave's health gate fails
    and a is put back. The config before pins no version, so putting it back as it was served v2
    (the failing one) on a; the file put back pins v1."""
    (version_2.shared / MODEL / "2" / "model.py").write_text(FAILS_AFTER_ONE.format(
        marker=version_2.shared / MODEL / "2" / "answered"))
    lines: list[str] = []
    gate = GateSettings(requests=2, latency_slack_ms=10_000)  # v1 answers before, v2 fails after
    result = roll_version(version_2.members(), MODEL, 2, gate=gate, auth=guard.os_user(), fleet="lab",
                          home=tmp_path / "home", progress=lines.append)
    assert not result.ok
    assert result.headline.startswith("VERSION ROLLOUT STOPPED loading v2 beside v1: a: "), result.headline
    assert "smoke requests failed" in result.headline, result.headline  # the gate's, not the apply's
    assert "1 changed server(s) put back; the config put back pins v1 (version_policy `versions: [1]`): " \
        f"{MODEL}/2/ is in the repository" in result.headline, result.headline
    assert any("if this step stops, the config put back pins v1" in line for line in lines), lines
    shared, own = version_2.files()
    assert pinned_to_v1((shared,)) and own == BASE.encode()  # c's repository never written
    assert served(version_2) == {name: {"1"} for name in HOSTS}


# A version whose first request is answered (the apply's test request), every later one failed.
FAILS_AFTER_ONE = '''import os
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        if os.path.exists("{marker}"):
            raise RuntimeError("v2 fails after its first request")
        open("{marker}", "w").close()
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
'''


def pinned_to_v1(files: tuple[bytes, ...]) -> bool:
    """Each file is the lab's config with version_policy `specific { versions: [1] }` added."""
    return all(parse_pbtxt(f.decode()) == with_versions(BASE, "1") for f in files)


def with_versions(text: str, versions: str) -> object:
    config = parse_pbtxt(text)
    set_policy(config, versions)
    return config


def settled(home: Path) -> bool:
    """`fleet status --fleet lab` exits 0 within a bound: a retired version is UNLOADING for a while,
    and Triton says it is not ready until it is gone."""
    return wait_for(lambda: in_process("fleet", "status", "--fleet", "lab", home=home).returncode == 0,
                    60, 0.5)


def test_a_version_rollout_whose_retire_step_fails_leaves_it_unresolved_with_both_ways_out(
    version_2: FleetLab
) -> None:
    """The retire step cut short in its process puts back what it changed (both versions serve):
    the version rollout is left between its steps, said as such, never OK."""
    def progress(line: str) -> None:
        if line.startswith("[retire v1] wave 2: apply"):  # a retired; then a Streamlit rerun
            raise ScriptRerun

    with pytest.raises(ScriptRerun):
        roll_version(version_2.members(), MODEL, 2, gate=LOOSE, auth=guard.os_user(), fleet="lab",
                     progress=progress)
    assert served(version_2) == {name: {"1", "2"} for name in HOSTS}
    first, retire = sorted(rollouts.journals(), key=lambda j: j.id)
    assert retire.plan.follows == first.id and not retire.unresolved  # it put back what it changed
    assert first.unresolved and first.left_changed == list(HOSTS)
    reason = first.reason()
    assert reason.startswith(f"an unfinished version rollout of {MODEL!r} on fleet 'lab' "
                             f"(rollout #{first.id}"), reason
    assert "stopped between its two steps: v2 serves beside v1 on a, b, c" in reason, reason
    assert "ScriptRerun" in reason and f"`geadmin fleet resume {first.id}` retires v1" in reason, reason


def test_an_ad_hoc_rollout_is_restored_and_resumed_from_its_journal_alone(fresh: FleetLab,
                                                                          tmp_path: Path) -> None:
    """`geadmin fleet restore ID` of a `--source servers` rollout failed with "no fleet named 'ad
    hoc'" unless `--source` was given again: the journal names every server it touched."""
    home = tmp_path / "home"
    before = fresh.files()
    (tmp_path / "new.pbtxt").write_text(NEW)
    cut = killed_apply(home, tmp_path / "new.pbtxt", "rollout.changed.1", "--source", "servers")
    assert cut.returncode == -signal.SIGKILL, (cut.stdout, cut.stderr)
    (journal,) = rollouts.journals(home=home)
    assert journal.plan.fleet == "ad hoc"
    restored = in_process("fleet", "restore", str(journal.id), home=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert restored.stdout.startswith(f"RESTORED rollout #{journal.id}"), restored.stdout
    assert fresh.files() == before and fresh.mode_served("a") == "v1"

    cut = killed_apply(home, tmp_path / "new.pbtxt", "rollout.changing.2", "--source", "servers")
    assert cut.returncode == -signal.SIGKILL, (cut.stdout, cut.stderr)
    second = max(rollouts.journals(home=home), key=lambda j: j.id)
    resumed = in_process("fleet", "resume", str(second.id), "--gate-requests", "0",
                         "--latency-slack-ms", "10000", home=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert fresh.files() == (NEW.encode(), NEW.encode())
    assert {fresh.mode_served(n) for n in HOSTS} == {"v1.1"}
    assert rollouts.unresolved(home=home) == []


def test_an_ad_hoc_restore_gives_no_key_to_a_server_the_servers_file_no_longer_lists(
    fresh: FleetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal names c's address, but no servers file vouches for it now: c is not touched
    (no key goes to an address only a journal names), and the output says what to pass."""
    home = tmp_path / "home"
    before = fresh.files()
    (tmp_path / "new.pbtxt").write_text(NEW)
    cut = killed_apply(home, tmp_path / "new.pbtxt", "rollout.ending", "--source", "servers")
    assert cut.returncode == -signal.SIGKILL, (cut.stdout, cut.stderr)
    (journal,) = rollouts.journals(home=home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers_file_without_c(fresh, tmp_path)))
    refused = in_process("fleet", "restore", str(journal.id), home=home)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    first = refused.stdout.splitlines()[0]
    assert first.startswith(f"RESTORE INCOMPLETE for rollout #{journal.id}: NOT put back on c"), first
    assert f"c ({fresh.servers['c'].http_url}) is no configured server now" in first, first
    assert "--source" in first and "`--gone c`" in first, first
    assert fresh.files() == (before[0], NEW.encode())  # a and b back; c untouched
    assert fresh.mode_served("c") == "v1.1"
