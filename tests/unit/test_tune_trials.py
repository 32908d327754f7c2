"""Tuning trials on disk, without a server: a trial is a directory with its run's marker; a
name alone proves nothing; the copy of a run that died is removed at the next start (and
journaled), the copy of a run still going and anything without our marker are left alone;
compose's start-up loader skips marked directories; a winner applies only to the server the
run measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import Result
from geadmin.cli.tune import limits
from geadmin.errors import RepositoryError, TuneBusyError, TuneRefusedError
from geadmin.ops.tune import trials as tune_trials
from geadmin.ops.tune.apply import apply_winner, winner_refusal
from geadmin.ops.tune.search import unstable
from geadmin.ops.tune.trials import journal_row, make_trial, remove_left, remove_trial
from geadmin.repository import trials
from geadmin.triton.client import TritonClient
from tests.support.deploy import load_models_script

ROOT = Path(__file__).resolve().parents[2]
MODEL = "resnet"
CONFIG = f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 4\n'
SERVER = "http://127.0.0.1:8000"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / MODEL / "1").mkdir(parents=True)
    (repo / MODEL / "config.pbtxt").write_text(CONFIG)
    (repo / MODEL / "1" / "model.py").write_text("# the live model\n")
    return repo


def stranger(repository: Path, name: str) -> Path:
    """An operator's model that merely looks like a trial."""
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n')
    return repository / name


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def trial_in_child(repository: Path, home: Path, *, linger: bool) -> tuple[subprocess.Popen[str], str]:
    """A process that journals and makes a trial, then dies without removing it (or lingers,
    holding its marker's lock, until its stdin closes); returns the process and the run id."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from geadmin.audit import Actor
        from geadmin.ops.tune.trials import journal_row, make_trial
        from geadmin.repository import trials
        repo, home, run = Path({str(repository)!r}), Path({str(home)!r}), trials.new_run_id()
        marker = trials.new_marker({MODEL!r}, run, {SERVER!r}, home)
        journal_row({MODEL!r}, marker, repo / marker.trial, {SERVER!r}, Actor.os_user(), home)
        copy = make_trial(repo, {MODEL!r}, run, server={SERVER!r}, home=home)
        print(run, flush=True)
        if {linger!r}:
            sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def test_a_trial_is_named_for_its_run_and_carries_its_marker(repository: Path, tmp_path: Path) -> None:
    run = trials.new_run_id()
    copy = make_trial(repository, MODEL, run, server=SERVER, home=tmp_path)
    try:
        assert copy.path == repository / f"{MODEL}__tune_{run}"
        assert trials.parse_name(copy.name) == (MODEL, run)
        marker = json.loads((copy.path / trials.MARKER).read_text())
        assert {k: marker[k] for k in ("run", "model", "trial", "server")} == \
            {"run": run, "model": MODEL, "trial": copy.name, "server": SERVER}
        assert marker["pid"] > 0 and marker["created_at"] and marker["workspace"] == str(tmp_path)
        assert f'name: "{copy.name}"' in (copy.path / "config.pbtxt").read_text()
        assert (copy.path / "1").is_symlink() and (copy.path / "1").resolve() == (repository / MODEL / "1")
        assert trials.is_trial(repository, copy.name)
        with trials.held(copy.path) as free:
            assert not free  # the run holds its marker's lock
        assert not any(p.name.startswith(trials.STAGING_PREFIX) for p in repository.iterdir())
    finally:
        remove_trial(None, copy)
    assert not copy.path.exists() and (repository / MODEL / "1" / "model.py").exists()


def test_a_name_alone_is_no_trial(repository: Path) -> None:
    old = stranger(repository, f"{MODEL}__tune")
    lookalike = stranger(repository, f"{MODEL}__tune_0123abcd")
    assert trials.parse_name(old.name) is None and not trials.is_trial(repository, old.name)
    assert trials.parse_name(lookalike.name) == (MODEL, "0123abcd")
    assert not trials.is_trial(repository, lookalike.name)  # its directory has no marker
    (lookalike / trials.MARKER).write_text(json.dumps(
        {"run": "ffffffff", "model": MODEL, "trial": f"{MODEL}__tune_ffffffff", "created_at": "x", "pid": 1,
         "host": "h", "server": SERVER, "workspace": "/w"}))
    assert not trials.is_trial(repository, lookalike.name)  # a marker for another name is not its marker


def test_a_trial_never_replaces_a_directory_it_did_not_make(repository: Path, tmp_path: Path) -> None:
    taken = stranger(repository, f"{MODEL}__tune_0123abcd")
    before = files(taken)
    with pytest.raises(RepositoryError, match="did not make it"):
        make_trial(repository, MODEL, "0123abcd", server=SERVER, home=tmp_path)
    assert files(taken) == before
    assert not any(p.name.startswith(trials.STAGING_PREFIX) for p in repository.iterdir())


def test_a_trial_whose_marker_was_replaced_is_not_removed(repository: Path, tmp_path: Path) -> None:
    copy = make_trial(repository, MODEL, trials.new_run_id(), server=SERVER, home=tmp_path)
    (copy.path / trials.MARKER).unlink()
    (copy.path / trials.MARKER).write_text("{}")
    with pytest.raises(RepositoryError, match="no longer carries"):
        remove_trial(None, copy)
    assert copy.path.is_dir()


def test_a_dead_runs_trial_is_removed_and_journaled_a_live_runs_and_strangers_are_not(
        repository: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    dead, dead_run = trial_in_child(repository, home, linger=False)
    dead.wait(30)
    alive, alive_run = trial_in_child(repository, home, linger=True)
    old, lookalike = stranger(repository, f"{MODEL}__tune"), stranger(repository, f"{MODEL}__tune_0123abcd")
    kept = {old: files(old), lookalike: files(lookalike)}
    try:
        found = remove_left(repository, home=home)
        assert not (repository / trials.trial_name(MODEL, dead_run)).exists()
        assert (repository / trials.trial_name(MODEL, alive_run)).is_dir()
        assert [f"tuning run {dead_run}" in line for line in found.removed] == [True], found
        assert len(found.running) == 1 and alive_run in found.running[0] and not found.problems
        assert all(files(path) == content for path, content in kept.items())
        rows = audit.query(model=MODEL, action=tune_trials.ACTION, home=home)
        closed = [r for r in rows if r.result == Result.INTERRUPTED.value]
        assert len(closed) == 1 and trials.trial_name(MODEL, dead_run) in closed[0].message
        # the journal is closed: the next start finds nothing more to do
        assert remove_left(repository, home=home).removed == ()
    finally:
        assert alive.stdin is not None
        alive.stdin.close()
        alive.wait(30)
    # once the lingering run is gone, its trial is left over too
    assert [alive_run in line for line in remove_left(repository, home=home).removed] == [True]


def test_the_journal_finds_a_dead_runs_trial_when_the_repository_is_not_known(
        repository: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    child, run = trial_in_child(repository, home, linger=False)
    child.wait(30)
    lines = tune_trials.at_start(None, home=home)
    assert len(lines) == 1 and run in lines[0], lines
    assert not (repository / trials.trial_name(MODEL, run)).exists()


def test_a_journaled_run_is_closed_even_before_its_trial_was_made(repository: Path, tmp_path: Path) -> None:
    marker = trials.new_marker(MODEL, trials.new_run_id(), SERVER, tmp_path)
    journal_row(MODEL, marker, repository / marker.trial, SERVER, audit.Actor.os_user(), tmp_path)
    remove_left(repository, home=tmp_path)
    rows = audit.query(model=MODEL, action=tune_trials.ACTION, home=tmp_path)
    assert [r.result for r in rows] == [Result.INTERRUPTED.value, Result.STARTED.value]


def test_the_compose_loader_skips_marked_directories_only(repository: Path, tmp_path: Path) -> None:
    script = load_models_script()
    copy = make_trial(repository, MODEL, trials.new_run_id(), server=SERVER, home=tmp_path)
    old = stranger(repository, f"{MODEL}__tune")
    other = tmp_path / "other"
    other.mkdir()
    assert script.TRIAL_MARKER == trials.MARKER
    assert script.trial(copy.name, [str(other), str(repository)])
    assert not script.trial(old.name, [str(repository)]) and not script.trial(MODEL, [str(repository)])
    assert not script.trial(copy.name, [str(other)])
    remove_trial(None, copy)


def test_a_winner_goes_only_to_the_server_and_file_the_run_measured(repository: Path, tmp_path: Path) -> None:
    run = {"id": 7, "model": MODEL, "server": SERVER, "best": {"ok": True}, "best_text": CONFIG + "# w\n",
           "live_sha256": "0" * 64}
    assert winner_refusal(run, "http://localhost:8000") != ""
    assert winner_refusal(run, "127.0.0.1:8000") == ""  # the same server, written another way
    assert "tune again" in winner_refusal({**run, "live_sha256": ""}, SERVER)
    assert "no winner" in winner_refusal({**run, "best": None}, SERVER)
    with TritonClient("http://127.0.0.2:8000") as client, \
            pytest.raises(TuneRefusedError, match=r"measured http://127.0.0.1:8000, not http://127.0.0.2:8000"):
        apply_winner(client, repository, run, auth=guard.os_user(), home=tmp_path)
    assert (repository / MODEL / "config.pbtxt").read_text() == CONFIG


def test_the_words_for_no_limit_and_an_unstable_trial() -> None:
    nothing = {"max_p99_ms": None, "min_throughput": None}
    assert limits(nothing) == "max p99: no limit; min throughput: no minimum"
    assert limits({"max_p99_ms": 50.0, "min_throughput": 800.0}) == "max p99: 50 ms; min throughput: 800/s"
    assert "--window-ms 2000" in unstable(1000)


def test_a_copy_cut_short_while_staged_is_removed_too(repository: Path, tmp_path: Path) -> None:
    run = trials.new_run_id()
    staged = repository / f"{trials.STAGING_PREFIX}{run}-x1y2z3"
    staged.mkdir()
    os.close(trials.write_marker(staged, trials.new_marker(MODEL, run, SERVER, tmp_path)))
    found = remove_left(repository, home=tmp_path)
    assert not staged.exists() and len(found.removed) == 1 and not found.problems


@pytest.mark.parametrize(("exc", "said"), [
    (TuneBusyError("another tuning run of m holds its lock\nsecond line"),
     "another tuning run of m holds its lock"),
    (KeyboardInterrupt(), "KeyboardInterrupt"),
])
def test_a_run_cut_short_is_audited_as_failed_with_its_first_line_and_its_run(
        tmp_path: Path, exc: BaseException, said: str) -> None:
    tune_trials.record_cut_short("capacity sweep", "m", "r1", exc, server="http://127.0.0.1:1",
                                 actor=audit.Actor("ann"), home=tmp_path)
    (row,) = audit.query(home=tmp_path)
    assert (row.action, row.model, row.result) == ("tune", "m", "failed")
    assert row.message == f"capacity sweep r1 ended without a result: {said}\nrun: r1"
