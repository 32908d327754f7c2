"""Restoring a version rollout's first step settles its retire step cut short: newest first, in
one command (the retire step's file is put back before the first step's, never after)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import Result
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RetireStep, RolloutPlan
from geadmin.fleet import journal, restore, unresolved
from geadmin.ops.models import rollout_recovery
from geadmin.repository import revisions, store

C0 = b'name: "echo"\nbackend: "python"\n'
C1 = b'name: "echo"\nbackend: "python"\nversion_policy { specific { versions: [1, 2] } }\n'
C2 = b'name: "echo"\nbackend: "python"\nversion_policy { specific { versions: [2] } }\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _both_steps(home: Path, repo: Path) -> tuple[journal.Recorder, journal.Recorder]:
    """Step 1 (X) done on a, the retire step (S) begun: the file is C1 (v1 and v2 serve)."""
    for version in ("1", "2"):
        (repo / "echo" / version).mkdir(parents=True)
        (repo / "echo" / version / "model.py").write_text("")
    (repo / "echo" / "config.pbtxt").write_bytes(C0)
    r0 = revisions.record_revision(repo, "echo", C0, who="t", home=home)
    servers = (PlannedServer("a", "http://127.0.0.1:1", 1, str(repo), True),)
    first = RolloutPlan("lab", "apply", "echo", servers, 1, 1, (Previous(str(repo), r0.sha256, r0.number),),
                        C1.decode(), revisions.sha256_of(C1), 0, RetireStep(2, (1,), C2.decode()))
    x = journal.Recorder(first, audit.Actor("ann"), home)
    x.start()
    x.step("a", 1, rollouts.CHANGING)
    store.write_config(repo, "echo", C1, expected_sha256=r0.sha256, who="t", home=home)
    x.step("a", 1, rollouts.CHANGED)
    x.end(Result.OK, "ROLLOUT DONE")
    r1 = revisions.record_revision(repo, "echo", C1, who="t", home=home)
    retire = RolloutPlan("lab", "apply", "echo", servers, 1, 1, (Previous(str(repo), r1.sha256, r1.number),),
                         C2.decode(), revisions.sha256_of(C2), 0, None, x.id)
    s = journal.Recorder(retire, audit.Actor("ann"), home)
    s.start()
    s.step("a", 1, rollouts.CHANGING)
    return x, s


@pytest.mark.parametrize("cut", ["killed before it wrote", "failed after putting its file back"])
def test_restoring_the_first_step_settles_its_retire_step_cut_short_in_one_command(
    home: Path, tmp_path: Path, cut: str
) -> None:
    repo = tmp_path / "repo"
    x, s = _both_steps(home, repo)
    if cut == "failed after putting its file back":
        store.write_config(repo, "echo", C2, expected_sha256=revisions.sha256_of(C1), who="t", home=home)
        store.write_config(repo, "echo", C1, expected_sha256=revisions.sha256_of(C2), who="t", home=home)
        s.end(Result.FAILED, "ROLLOUT FAILED: a did not reload", ["a"])
    rollout_recovery.close_rollouts(home=home)
    rollout_recovery.close_rollouts(home=home)
    assert {j.id for j in rollouts.unresolved(home=home)} == {x.id, s.id}

    _, _, end = restore.restore(x.id, [], auth=guard.os_user(), home=home, gone=["a"])

    assert end.result == Result.ROLLED_BACK.value, end.headline
    assert (repo / "echo" / "config.pbtxt").read_bytes() == C0
    assert rollouts.unresolved(home=home) == []
    assert unresolved.fleet_reasons("lab", home=home) == []
    retire = rollouts.read(s.id, home=home)
    assert retire.end is not None and retire.end.result == Result.ROLLED_BACK.value
    assert f"before rollout #{x.id}" in retire.end.headline, retire.end.headline
