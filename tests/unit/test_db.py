"""The workspace SQLite: migrations (from an empty file and from every older version),
refusals, the sqlite3 translation table, and two processes writing at once."""

from __future__ import annotations

import inspect
import os
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import db
from geadmin.db import (
    MIGRATIONS,
    SQLITE_ERRORS,
    DatabaseBusyError,
    Migration,
    WorkspaceDatabaseError,
    translate_error,
)

ROOT = Path(__file__).resolve().parents[2]


def schema(home: Path) -> list[tuple[str, str, str]]:
    """Every table and index, as SQLite stores their definitions."""
    conn = sqlite3.connect(db.db_path(home))
    try:
        return sorted(conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall())
    finally:
        conn.close()


def test_an_empty_workspace_gets_the_latest_schema_in_wal_mode(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"  # created on first use
    with db.connect(home) as conn:
        assert db.schema_version(conn) == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(db.BUSY_TIMEOUT_S * 1000)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"audit", "config_revisions"} <= tables
    assert db.db_path(home) == home / "geadmin.db"


def test_an_existing_empty_file_is_migrated(tmp_path: Path) -> None:
    (tmp_path / db.DB_FILE).write_bytes(b"")
    with db.connect(tmp_path) as conn:
        assert db.schema_version(conn) == len(MIGRATIONS)


@pytest.mark.parametrize("older", range(len(MIGRATIONS)))
def test_a_database_of_each_older_version_migrates_to_the_same_schema_and_keeps_its_rows(
    tmp_path: Path, older: int
) -> None:
    fresh, old = tmp_path / "fresh", tmp_path / "old"
    with db.connect(fresh):
        pass
    with db.connect(old, migrations=MIGRATIONS[:older]) as conn:
        assert db.schema_version(conn) == older
        if older >= 1:  # the audit table exists from version 1 on
            conn.execute("INSERT INTO audit (at, who, origin, server, model, action, result) "
                         "VALUES ('2025-01-01T00:00:00.000000Z', 'ann', 'cli', '', 'm', 'apply', 'ok')")
    with db.connect(old) as conn:
        assert db.schema_version(conn) == len(MIGRATIONS)
        kept = conn.execute("SELECT who FROM audit").fetchall()
    assert schema(old) == schema(fresh)
    assert kept == ([("ann",)] if older >= 1 else [])


def test_a_database_from_a_newer_geadmin_is_refused_untouched(tmp_path: Path) -> None:
    with db.connect(tmp_path) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    before = schema(tmp_path)
    with pytest.raises(WorkspaceDatabaseError, match=r"newer than this geadmin knows.*upgrade geadmin"), \
            db.connect(tmp_path):
        pass
    assert schema(tmp_path) == before


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    with db.connect(tmp_path):
        pass
    broken = (*MIGRATIONS, Migration("half", ("CREATE TABLE half_done (x)", "THIS IS NOT SQL")))
    with pytest.raises(WorkspaceDatabaseError, match="syntax error"), db.connect(tmp_path, migrations=broken):
        pass
    with db.connect(tmp_path) as conn:
        assert db.schema_version(conn) == len(MIGRATIONS)
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone() == (0,)


def test_a_file_that_is_not_a_database_says_move_it_aside(tmp_path: Path) -> None:
    (tmp_path / db.DB_FILE).write_bytes(b"this is a text file, not SQLite" * 100)
    with pytest.raises(WorkspaceDatabaseError, match=r"not a (SQLite )?database.*move it aside"), \
            db.connect(tmp_path):
        pass


def test_a_workspace_that_is_a_file_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    with pytest.raises(WorkspaceDatabaseError, match=re.escape(str(home))), db.connect(home):
        pass


def test_a_writer_held_past_the_busy_timeout_is_a_busy_error(tmp_path: Path) -> None:
    with db.connect(tmp_path) as holder, db.transaction(holder):
        holder.execute("INSERT INTO audit (at, who, origin, server, model, action, result) "
                       "VALUES ('x', 'a', 'cli', '', 'm', 'apply', 'ok')")
        started = time.monotonic()
        with pytest.raises(DatabaseBusyError, match="another geadmin process"), \
                db.connect(tmp_path, busy_timeout_s=0.3) as other, db.transaction(other):
            pass
        assert time.monotonic() - started >= 0.25  # it waited before giving up
        # Readers are not blocked by the writer (WAL).
        with db.connect(tmp_path) as reader:
            assert reader.execute("SELECT count(*) FROM audit").fetchone() == (0,)


def test_a_transaction_rolls_back_when_its_block_raises(tmp_path: Path) -> None:
    with db.connect(tmp_path) as conn:
        with pytest.raises(RuntimeError), db.transaction(conn):
            conn.execute("INSERT INTO audit (at, who, origin, server, model, action, result) "
                         "VALUES ('x', 'a', 'cli', '', 'm', 'apply', 'ok')")
            raise RuntimeError("boom")
        assert conn.execute("SELECT count(*) FROM audit").fetchone() == (0,)


# -- the translation table --------------------------------------------------------------
def sqlite_exception_classes() -> set[type[BaseException]]:
    return {obj for _, obj in inspect.getmembers(sqlite3, inspect.isclass) if issubclass(obj, BaseException)}


def test_every_sqlite3_exception_class_has_a_row_in_the_table() -> None:
    mapped = {theirs for theirs, _ in SQLITE_ERRORS}
    missing = sqlite_exception_classes() - mapped
    assert not missing, f"add these to db.SQLITE_ERRORS: {sorted(c.__name__ for c in missing)}"


def test_the_table_lists_subclasses_before_their_bases() -> None:
    classes = [theirs for theirs, _ in SQLITE_ERRORS]
    for i, earlier in enumerate(classes):
        for later in classes[i + 1:]:
            assert not issubclass(later, earlier) or later is earlier, (
                f"{later.__name__} comes after its base {earlier.__name__}: it would never match")


@pytest.mark.parametrize("exc_class", sorted(sqlite_exception_classes(), key=lambda c: c.__name__))
def test_every_sqlite3_failure_translates_to_a_workspace_error_naming_the_file(
    exc_class: type[BaseException], tmp_path: Path
) -> None:
    error = translate_error(exc_class("something odd"), tmp_path / "geadmin.db", "write")
    assert isinstance(error, WorkspaceDatabaseError)
    assert str(tmp_path / "geadmin.db") in str(error) and "something odd" in str(error)


@pytest.mark.parametrize(("text", "expected_class", "hint"), [
    ("database is locked", DatabaseBusyError, "retry"),
    ("database table is locked", DatabaseBusyError, "retry"),
    ("file is not a database", WorkspaceDatabaseError, "move it aside"),
    ("database disk image is malformed", WorkspaceDatabaseError, "corrupt"),
    ("attempt to write a readonly database", WorkspaceDatabaseError, "writable"),
    ("unable to open database file", WorkspaceDatabaseError, "writable"),
    ("database or disk is full", WorkspaceDatabaseError, "free space"),
    ("disk I/O error", WorkspaceDatabaseError, "local disk"),
])
def test_known_sqlite_messages_carry_their_fix(text: str, expected_class: type[Exception], hint: str) -> None:
    error = translate_error(sqlite3.OperationalError(text), Path("/w/geadmin.db"), "write")
    assert type(error) is expected_class and hint in str(error)


def test_an_os_error_translates_with_its_strerror() -> None:
    error = translate_error(PermissionError(13, "Permission denied"), Path("/w/geadmin.db"), "open")
    assert "Permission denied" in str(error)


def test_anything_else_is_not_silently_relabelled() -> None:
    with pytest.raises(TypeError):
        translate_error(ValueError("a bug"), Path("/w/geadmin.db"), "write")


# -- time ------------------------------------------------------------------------------------
def test_stored_times_round_trip_in_utc_and_sort_as_text() -> None:
    early = datetime(2025, 1, 2, 3, 4, 5, 600, tzinfo=timezone.utc)
    later = early + timedelta(microseconds=1)
    assert db.parse_time(db.format_time(early)) == early
    assert db.format_time(early) < db.format_time(later)
    local = early.astimezone(timezone(timedelta(hours=8)))
    assert db.format_time(local) == db.format_time(early)


# -- two processes at once -------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from geadmin import audit
    home, name, start_at, count = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    while time.time() < start_at:
        time.sleep(0.005)
    for i in range(count):
        audit.record("apply", f"m{i % 3}", "ok", actor=audit.Actor(name), message=str(i), home=home)
""")


def test_two_processes_migrate_and_write_at_once_without_losing_a_row(tmp_path: Path) -> None:
    home = tmp_path / "shared"  # a fresh workspace: both processes race to create and migrate it
    count = 150
    start_at = time.time() + 1.5  # after both interpreters have imported geadmin
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(home), name, str(start_at), str(count)],
                                cwd=ROOT, stderr=subprocess.PIPE, text=True)
               for name in ("dashboard", "cli")]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with db.connect(home) as conn:
        rows = conn.execute("SELECT who, message FROM audit").fetchall()
        ids = [row[0] for row in conn.execute("SELECT id FROM audit")]
    assert len(rows) == 2 * count and len(set(ids)) == 2 * count
    for name in ("dashboard", "cli"):
        assert sorted(int(m) for who, m in rows if who == name) == list(range(count))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_workspace_the_cli_creates_is_private_with_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geadmin.cli.main import main

    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "new-home"))
    old = os.umask(0o022)  # a shell's usual umask: without care, 0755 and 0644
    try:
        assert main(["audit"]) == 0
    finally:
        os.umask(old)
    home = tmp_path / "new-home"
    assert _mode(home) == 0o700
    for name in (db.DB_FILE, db.DB_FILE + "-wal", db.DB_FILE + "-shm"):
        if (home / name).exists():
            assert _mode(home / name) == 0o600, name
    assert _mode(home / db.DB_FILE) == 0o600


def test_an_existing_workspace_and_database_readable_by_others_are_made_private_on_open(
    tmp_path: Path,
) -> None:
    home = tmp_path / "old-home"
    with db.connect(home):
        pass
    os.chmod(home, 0o755)
    for path in home.iterdir():
        os.chmod(path, 0o644)
    with db.connect(home) as conn:
        conn.execute("SELECT COUNT(*) FROM audit").fetchone()
    assert _mode(home) == 0o700
    assert {path.name: _mode(path) for path in home.iterdir()} == dict.fromkeys(
        (p.name for p in home.iterdir()), 0o600)


def test_where_joins_only_the_filters_that_apply_and_keeps_values_as_parameters() -> None:
    assert db.where([]) == ("", [])
    assert db.where([(False, "node = ?", ("n",)), (False, "present = 1", ())]) == ("", [])
    assert db.where([(True, "last_seen >= ?", (5.0,)), (False, "node = ?", (None,)),
                     (True, "present = 1", ()), (True, "node = ?", ("x'; DROP",))]) == (
        " WHERE last_seen >= ? AND present = 1 AND node = ?", [5.0, "x'; DROP"])
