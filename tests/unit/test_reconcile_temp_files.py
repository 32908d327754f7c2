"""The start-up reconcile removes the temp files geadmin's atomic write leaves in a model
directory when it is killed between the write and the rename (`.config.pbtxt.<8>.geadmin-tmp`),
says so, and never touches anything else: other names, directories, links, or the temp file of
a write that still runs (its model's edit lock is held)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from geadmin.ops.models import reconcile
from geadmin.ops.models.leftovers import TEMP_FILE_GRACE_S
from geadmin.repository import locks
from geadmin.repository.atomic import atomic_write, is_temp_file_name


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def leftover(directory: Path, name: str = "config.pbtxt", age_s: float = 2 * TEMP_FILE_GRACE_S) -> Path:
    """A temp file named exactly as atomic_write names its own, last written `age_s` ago."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=f".{name}.", suffix=".geadmin-tmp", dir=directory)
    with open(fd, "wb") as handle:
        handle.write(b"half a config")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return Path(path)


def test_atomic_writes_temp_names_match_the_pattern_and_nothing_else_does(tmp_path: Path) -> None:
    assert is_temp_file_name(leftover(tmp_path).name)
    for name in ("config.pbtxt", "notes.geadmin-tmp", ".config.pbtxt.geadmin-tmp",
                 ".config.pbtxt.abc.geadmin-tmp", "config.pbtxt.abcd1234.geadmin-tmp", ".geadmin-tmp"):
        assert not is_temp_file_name(name), name
    clean = tmp_path / "clean"
    clean.mkdir()
    atomic_write(clean / "config.pbtxt", b"x")  # a write that completes leaves none
    assert [p.name for p in clean.iterdir()] == ["config.pbtxt"]


def test_reconcile_removes_geadmins_leftover_temp_files_and_says_so(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text('name: "m"\n')
    planted = [leftover(repo / "m"), leftover(repo / "m" / "1", "model.py")]
    kept = [repo / "m" / "notes.geadmin-tmp", repo / "m" / ".config.pbtxt.geadmin-tmp"]
    for path in kept:
        path.write_text("not ours")
    directory = repo / "m" / ".config.pbtxt.abcd1234.geadmin-tmp"
    directory.mkdir()
    link = repo / "m" / ".config.pbtxt.efgh5678.geadmin-tmp"
    link.symlink_to(repo / "m" / "config.pbtxt")
    lines = reconcile.at_start(repo, home=home)
    assert [p for p in planted if p.exists()] == []
    assert all(p.exists() for p in kept) and directory.is_dir() and link.is_symlink()
    for path in planted:
        assert any(str(path) in line and "temp file" in line for line in lines), lines


def test_the_temp_file_of_a_write_that_still_runs_is_kept(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "m").mkdir(parents=True)
    running = leftover(repo / "m")
    with locks.edit_lock(repo, "m", "apply", home=home, wait_s=0):
        reconcile.at_start(repo, home=home)
    assert running.exists()
    # a plain write holds only the "write" lock: a temp file younger than the grace is its own
    young = leftover(repo / "m", age_s=1)
    reconcile.at_start(repo, home=home)
    assert young.exists() and not running.exists()
