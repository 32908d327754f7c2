"""Changes cut short, reconciled at the next start (geadmin.ops.models.reconcile), without Triton: the
rows an apply or a create writes before it touches the disk are planted as their process would
have left them, then `reconcile` runs as a fresh start does. The same in a real subprocess
killed at each step, with a real tritonserver: tests/integration/test_cut_short.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.audit import Actor, Result
from geadmin.diagnose import interrupted
from geadmin.errors import ConfigLockedError
from geadmin.ops.models import leftovers, reconcile
from geadmin.ops.models.create import create_model
from geadmin.repository import locks, revisions, store
from geadmin.repository.revisions import sha256_of
from tests.support.auth import admin_auth

OLD = b'name: "m"\nbackend: "python"\nmax_batch_size: 4\n'
NEW = b'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "m" / "1").mkdir(parents=True)
    (root / "m" / "1" / "model.py").write_text("# the model\n")
    (root / "m" / "config.pbtxt").write_bytes(OLD)
    return root


def start_apply(repo: Path, who: str = "ann") -> audit.AuditEntry:
    """What `apply_config` writes before the file: the started row (and, with the write, the
    previous config kept as a revision)."""
    path = repo / "m" / "config.pbtxt"
    message = reconcile.started_message("apply: started", repo, path, sha256_of(OLD), sha256_of(NEW))
    return audit.record("apply", "m", Result.STARTED, actor=Actor(who), server="http://t:8000",
                        message=message)


def test_an_apply_killed_after_the_write_is_flagged_with_the_revision_to_roll_back_to(repo: Path) -> None:
    start_apply(repo)
    store.write_config(repo, "m", NEW, expected_sha256=sha256_of(OLD), who="ann", note="before apply")
    report = reconcile.reconcile(repo, actor=Actor("bob"))
    (found,) = report.interrupted
    assert (found.model, found.action, found.on_disk) == ("m", "apply", "new")
    kept = revisions.revision_with_hash(repo, "m", sha256_of(OLD))
    assert kept is not None and found.previous_revision == kept.number
    assert found.rollback_command == f"geadmin config rollback m {kept.number}"
    assert "the new config.pbtxt of 'm' is on disk, whole; it validates" in found.message
    assert "started at" in found.message and "by ann" in found.message
    (row, started) = audit.query(model="m")
    assert (row.result, row.who, row.server) == ("interrupted", "bob", "http://t:8000")
    assert started.result == "started"
    # flagged until someone acts: the notice and `geadmin status` read it from the audit log
    (flag,) = interrupted.unresolved(repo)
    assert flag.previous_revision == kept.number and "roll back" in flag.reason()
    assert interrupted.reasons(repo) == [flag.reason()]
    assert interrupted.unresolved(repo.parent / "another_repository") == []
    assert reconcile.reconcile(repo).interrupted == ()  # closed once
    audit.record("rollback", "m", Result.OK, message="rollback to revision 1: applied")
    assert interrupted.unresolved(repo) == []


def test_an_apply_killed_before_the_write_leaves_the_old_config_and_no_flag(repo: Path) -> None:
    start_apply(repo)
    (found,) = reconcile.reconcile(repo).interrupted
    assert found.on_disk == "previous" and "nothing was written" in found.message
    assert (repo / "m" / "config.pbtxt").read_bytes() == OLD
    assert interrupted.unresolved(repo) == []  # nothing to act on; the audit log still says it happened


def test_a_config_on_disk_that_does_not_validate_is_named(repo: Path) -> None:
    start_apply(repo)
    (repo / "m" / "config.pbtxt").write_bytes(b'name: "m"\nbackend: "python"\nmax_batch_size: -3\n')
    (found,) = reconcile.reconcile(repo).interrupted
    assert found.on_disk == "other" and "does not validate" in found.message


def test_an_apply_still_running_is_left_alone(repo: Path, home: Path) -> None:
    start_apply(repo)
    with locks.edit_lock(repo, "m", "apply", home=home, wait_s=0):  # as the running apply holds it
        report = reconcile.reconcile(repo)
    assert report.interrupted == () and report.in_progress == ("apply of 'm'",)
    assert [r.result for r in audit.query(model="m")] == ["started"]


def test_a_finished_apply_is_not_reconciled(repo: Path) -> None:
    start_apply(repo)
    audit.record("apply", "m", Result.OK, message="applied")
    assert reconcile.reconcile(repo).interrupted == ()


def test_rows_of_another_repository_are_left_to_it(repo: Path, tmp_path: Path) -> None:
    start_apply(repo)
    assert reconcile.reconcile(tmp_path / "elsewhere").interrupted == ()
    assert len(reconcile.reconcile(repo).interrupted) == 1


def test_staging_of_an_interrupted_create_is_removed_unless_a_create_holds_it(repo: Path, home: Path) -> None:
    dead = repo / ".geadmin-staging-new-abcd1234"
    (dead / "new" / "1").mkdir(parents=True)
    (dead / "new" / "config.pbtxt").write_text("half")
    empty = repo / ".geadmin-staging-a-b-c-zz99yy88"  # killed right after mkdtemp
    empty.mkdir()
    running = repo / ".geadmin-staging-busy-qqqqqqqq"
    (running / "busy").mkdir(parents=True)
    with locks.edit_lock(repo.resolve(), "busy", "create", home=home, wait_s=0):
        removed = leftovers.remove_staging(repo)
    assert sorted(removed) == sorted([dead, empty])
    assert not dead.exists() and not empty.exists() and running.is_dir()
    assert (repo / "m").is_dir()  # models are never touched


def test_a_create_killed_after_its_rename_is_closed_and_the_model_kept(repo: Path) -> None:
    destination = repo / "fresh"
    audit.record("create", "fresh", Result.STARTED,
                 message=reconcile.started_message("started", repo, destination, ""))
    (destination / "1").mkdir(parents=True)
    (found,) = reconcile.reconcile(repo).interrupted
    assert found.on_disk == "created" and "in place, whole" in found.message and destination.is_dir()


def test_a_create_refused_after_its_started_row_is_finished_not_interrupted(repo: Path) -> None:
    with pytest.raises(Exception, match="would not load"):
        create_model(None, repo, "bad", "npu_ge_om", None, {}, load=False,
                     auth=admin_auth())  # no model.om: refused
    refused, started = audit.query(model="bad")
    assert (refused.result, started.result) == ("refused", "started")
    assert refused.message.endswith(f"\n{reconcile.STARTED_ROW}: {started.id}")
    assert reconcile.reconcile(repo).interrupted == ()


def test_a_refusal_by_another_process_does_not_hide_an_interrupted_create(repo: Path) -> None:
    """A create's own refusals and its success name its started row; another's refusal (the
    name being created right now) closed the killed create's row, and its notice was lost."""
    destination = repo / "fresh"
    audit.record("create", "fresh", Result.STARTED,
                 message=reconcile.started_message("started", repo, destination, ""))
    (destination / "1").mkdir(parents=True)  # then killed
    audit.record("create", "fresh", Result.REFUSED, actor=Actor("bob"),
                 message="another geadmin (pid 1) is running a create of 'fresh' right now")
    (found,) = reconcile.reconcile(repo).interrupted
    assert (found.model, found.on_disk) == ("fresh", "created")


def test_a_create_started_by_an_older_geadmin_is_closed_by_its_unlinked_refusal(repo: Path) -> None:
    """Rows written before outcomes named their start: the create's own refusal is unlinked,
    and must still close it (else every upgrade reports old refused creates as cut short)."""
    started = reconcile.started_message("started", repo, repo / "old", "")
    audit.record("create", "old", Result.STARTED, message="\n".join(
        line for line in started.splitlines() if not line.startswith(reconcile.OUTCOMES_LINKED)))
    audit.record("create", "old", Result.REFUSED, message="the validator found errors")
    assert reconcile.reconcile(repo).interrupted == ()


def test_a_created_models_rows_name_its_started_row(repo: Path) -> None:
    create_model(None, repo, "fine", "python", None, {"1/model.py": b"class TritonPythonModel: pass\n"},
                 load=False, auth=admin_auth())
    done, started = audit.query(model="fine")
    assert (done.result, started.result) == ("ok", "started")
    assert done.message.endswith(f"\n{reconcile.STARTED_ROW}: {started.id}")
    assert reconcile.reconcile(repo).interrupted == ()


def test_the_users_file_is_changed_under_its_lock(tmp_path: Path) -> None:
    from geadmin.access.roles import Role
    from geadmin.access.users import UsersFile

    users = UsersFile(tmp_path / "users.toml")
    users.add("ann", Role.parse("admin"), "a long password 1", auth=admin_auth())
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with locks.file_lock(tmp_path / ".users.toml.lock", "a test", wait_s=0):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(ConfigLockedError, match="change of the users file"), users.changing(wait_s=0):
            pass
    finally:
        release.set()
        holder.join()
    users.set_role("ann", Role.parse("viewer"), auth=admin_auth())  # free again
    assert users.load()["ann"].role is Role.parse("viewer")


def test_an_unreadable_workspace_database_is_one_start_note(home: Path, repo: Path) -> None:
    home.mkdir()
    (home / "geadmin.db").write_bytes(b"\x8f" * 5000)
    notes = reconcile.at_start(repo, home=home)
    assert len(notes) == 1
    assert notes[0].startswith("interrupted changes and rollouts not checked: cannot read or write in "
                               "the workspace database")
    assert "not a SQLite database: move it aside" in notes[0]


def test_a_refusal_by_another_process_does_not_hide_an_interrupted_apply(repo: Path) -> None:
    start_apply(repo)
    store.write_config(repo, "m", NEW, expected_sha256=sha256_of(OLD), who="ann", note="before apply")
    # another dashboard's apply of the same model, refused while ann's held the lock; then ann's is killed
    audit.record("apply", "m", Result.REFUSED, actor=Actor("bob"), server="http://t:8000",
                 message="another geadmin (pid 1) is running a config apply of 'm' right now")
    audit.record("apply", "m", Result.OK, actor=Actor("eve"), server="http://other:8000",
                 message="applied")  # another server's apply of a model of the same name
    (found,) = reconcile.reconcile(repo).interrupted
    assert (found.model, found.on_disk) == ("m", "new")


def test_an_outcome_linked_to_its_started_row_closes_that_one_only(repo: Path) -> None:
    first = reconcile.parse_started(start_apply(repo))
    second = reconcile.parse_started(start_apply(repo, who="bob"))
    assert first is not None and second is not None
    audit.record("apply", "m", Result.REFUSED, server="http://t:8000",  # the apply's own refusal
                 message=reconcile.outcome_message("cannot write: disk full", second))
    (found,) = reconcile.reconcile(repo).interrupted
    assert "by ann" in found.message and found.on_disk == "previous"


def test_the_commands_a_flag_offers_are_one_word_per_name_in_a_shell() -> None:
    """A model or repository path with a space or a `;` was pasted unquoted into the command the
    flag offers; "apply it again" is offered only when the revision it replaced is known (without
    it, the apply says "unchanged" and the flag stays)."""
    import shlex

    flag = interrupted.Interrupted(model="m; rm -rf ~", action="apply", at="", server="", on_disk="new",
                                   message="cut short", repository="/srv/my models", previous_revision=3)
    assert shlex.split(flag.rollback_command) == ["geadmin", "config", "rollback", "m; rm -rf ~", "3"]
    assert shlex.split(flag.apply_again_command) == ["geadmin", "config", "apply", "m; rm -rf ~",
                                                     "/srv/my models/m; rm -rf ~/config.pbtxt"]
    unknown = interrupted.Interrupted(model="m", action="apply", at="", server="", on_disk="new",
                                      message="cut short", repository="/srv/models")
    assert unknown.apply_again_command == "" and unknown.rollback_command == ""
