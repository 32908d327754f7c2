"""A failed file operation names its real fix: a full disk, a read-only mount, a permission
(geadmin.disk), and the workspace database says "full" when SQLite says "disk I/O error" on a
full disk. The real full filesystem is in tests/integration/test_full_disk.py."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from geadmin import db, disk

PLENTY = 10 << 30


@pytest.fixture
def free(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Set `free["bytes"]` to what the filesystem reports."""
    measured = {"bytes": PLENTY}

    class Stats:
        f_frsize = 4096
        f_blocks = PLENTY // 4096

        @property
        def f_bavail(self) -> int:
            return measured["bytes"] // 4096

    monkeypatch.setattr(disk.os, "statvfs", lambda path: Stats())
    return measured


def test_no_space_is_a_full_disk_with_the_free_space_measured(free: dict[str, int], tmp_path: Path) -> None:
    free["bytes"] = 8192
    step = disk.next_step(OSError(errno.ENOSPC, "No space left on device"), tmp_path, "check it")
    assert step == f"the filesystem of {tmp_path} is full (8 KiB free): free space there, then retry"


def test_any_error_on_a_full_disk_is_the_full_disk(free: dict[str, int], tmp_path: Path) -> None:
    free["bytes"] = 0
    assert "is full (0 KiB free)" in disk.next_step(OSError(errno.EIO, "I/O error"), tmp_path, "check it")
    free["bytes"] = PLENTY
    assert disk.next_step(OSError(errno.EIO, "I/O error"), tmp_path, "check it") == "check it"


def test_read_only_and_permission_are_named(free: dict[str, int], tmp_path: Path) -> None:
    assert "read-only filesystem: remount it read-write" in disk.next_step(
        OSError(errno.EROFS, "Read-only file system"), tmp_path, "x")
    assert disk.next_step(OSError(errno.EACCES, "Permission denied"), tmp_path, "x") == (
        f"this user (uid {os.geteuid()}) may not write in {tmp_path}: fix its owner or mode")


def test_a_path_not_yet_made_is_measured_on_its_nearest_parent(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Path] = []  # two measures of a busy disk differ: the path measured is what matters
    real = disk.os.statvfs
    monkeypatch.setattr(disk.os, "statvfs", lambda path: asked.append(Path(path)) or real(path))
    assert disk.free_bytes(tmp_path / "not" / "yet" / "made") is not None
    assert asked == [tmp_path]


def test_the_database_on_a_full_disk_says_full_not_nfs(free: dict[str, int], tmp_path: Path) -> None:
    path = tmp_path / db.DB_FILE
    free["bytes"] = 0
    error = db.translate_error(sqlite3.OperationalError("disk I/O error"), path, "open")
    assert str(error) == (f"cannot open in the workspace database {path} (disk I/O error): the filesystem "
                          f"of {tmp_path} is full (0 KiB free): free space there, then retry")
    free["bytes"] = PLENTY  # a real I/O failure keeps its own advice
    assert "without proper locking (NFS)" in str(
        db.translate_error(sqlite3.OperationalError("disk I/O error"), path, "open"))
    free["bytes"] = 0  # a locked database is not a full disk, whatever the space
    assert "another geadmin process" in str(
        db.translate_error(sqlite3.OperationalError("database is locked"), path, "open"))


def test_a_pseudo_filesystem_with_no_blocks_is_never_called_full() -> None:
    """`geadmin up --home /sys/x` was told "the filesystem of /sys/x is full (0 KiB free)" when
    the error was "Operation not permitted"."""
    assert not disk.is_full(Path("/sys/x"))
    assert disk.next_step(OSError(errno.EPERM, "Operation not permitted"), Path("/sys/x"), "x") == (
        f"this user (uid {os.geteuid()}) may not write in /sys/x: fix its owner or mode")
