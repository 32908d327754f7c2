"""The workspace database: one SQLite file, `$GEADMIN_HOME/geadmin.db`, for the audit log and
the config history (and any later table that must survive restarts).

Safe for the dashboard and several CLI processes at once: WAL journal (readers never wait
for a writer), a busy timeout (writers queue instead of failing), and every write in an
explicit `BEGIN IMMEDIATE` transaction, so two writers never deadlock upgrading a read lock.
Connections are short-lived — one per operation — so none crosses a thread (Streamlit runs
every rerun on a new thread). WAL needs a local filesystem: keep the workspace off NFS.

The schema is versioned: `MIGRATIONS` (geadmin.migrations) is an ordered list, `PRAGMA
user_version` counts how many are applied, and the pending ones run in one transaction when a
connection opens (a failure leaves the file as it was). A file written by a newer geadmin is
refused, not guessed at. Add a table by appending a migration; never edit one that has shipped.

Every `sqlite3` failure leaves as a `WorkspaceDatabaseError` chosen by one table
(`SQLITE_ERRORS`, a test walks every sqlite3 exception class), with a message that names
the file, the cause and the fix.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

from geadmin import disk, settings
from geadmin.errors import DatabaseBusyError, WorkspaceDatabaseError
from geadmin.migrations import MIGRATIONS, Migration

DB_FILE = "geadmin.db"
PRIVATE_DIR_MODE = 0o700  # the workspace: secrets, logs and the audit log are its owner's only
PRIVATE_FILE_MODE = 0o600  # the database and its -wal / -shm files (SQLite gives them the db's mode)
BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's transaction
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # UTC, fixed width: text order is time order


# -- error translation ----------------------------------------------------------------
# Every exception class of the sqlite3 module (a test checks none is missing), plus OSError
# from creating the workspace. First isinstance match wins: subclasses before bases.
SQLITE_ERRORS: tuple[tuple[type[BaseException], type[WorkspaceDatabaseError]], ...] = (
    (sqlite3.IntegrityError, WorkspaceDatabaseError),
    (sqlite3.OperationalError, WorkspaceDatabaseError),  # refined by message: locked -> busy
    (sqlite3.ProgrammingError, WorkspaceDatabaseError),
    (sqlite3.DataError, WorkspaceDatabaseError),
    (sqlite3.NotSupportedError, WorkspaceDatabaseError),
    (sqlite3.InternalError, WorkspaceDatabaseError),
    (sqlite3.InterfaceError, WorkspaceDatabaseError),
    (sqlite3.DatabaseError, WorkspaceDatabaseError),
    (sqlite3.Warning, WorkspaceDatabaseError),
    (sqlite3.Error, WorkspaceDatabaseError),
    (OSError, WorkspaceDatabaseError),
)
# SQLite's message (lower case, substring) -> (error class, what to do). First match wins.
MESSAGE_HINTS: tuple[tuple[str, type[WorkspaceDatabaseError], str], ...] = (
    ("locked", DatabaseBusyError, "another geadmin process (dashboard or CLI) held it longer than "
     f"{BUSY_TIMEOUT_S:g}s; retry, and look for a stuck geadmin process if it persists"),
    ("busy", DatabaseBusyError, "another geadmin process (dashboard or CLI) held it longer than "
     f"{BUSY_TIMEOUT_S:g}s; retry, and look for a stuck geadmin process if it persists"),
    ("not a database", WorkspaceDatabaseError, "the file is not a SQLite database: move it aside "
     "and geadmin creates a new, empty one"),
    ("malformed", WorkspaceDatabaseError, "the file is corrupt: move it aside (and restore it "
     "from a backup if you have one); geadmin creates a new, empty one"),
    ("readonly", WorkspaceDatabaseError, "it is read-only: make the file and its directory "
     "writable by this user, or set GEADMIN_HOME to a writable workspace"),
    ("unable to open", WorkspaceDatabaseError, "check that the workspace directory exists and is "
     "writable by this user (GEADMIN_HOME)"),
    ("full", WorkspaceDatabaseError, "the disk is full: free space in the workspace's filesystem"),
    ("disk i/o", WorkspaceDatabaseError, "the disk failed or the workspace is on a filesystem "
     "without proper locking (NFS): keep GEADMIN_HOME on a local disk"),
)

# What SQLite (or the OS) says when the disk is full: not always "full" (geadmin.disk).
FULL_DISK_SAYS = ("full", "disk i/o", "unable to open", "no space")


def translate_error(exc: BaseException, path: Path, action: str) -> WorkspaceDatabaseError:
    """The one translation of a sqlite3 (or OS) failure; `action` says what we were doing."""
    if isinstance(exc, WorkspaceDatabaseError):
        return exc
    error_class = next((ours for theirs, ours in SQLITE_ERRORS if isinstance(exc, theirs)), None)
    if error_class is None:
        raise TypeError(f"not a database failure: {exc!r}") from exc
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if any(needle in text.lower() for needle in FULL_DISK_SAYS) and disk.is_full(path.parent):
        return WorkspaceDatabaseError(f"cannot {action} in the workspace database {path} ({text}): "
                                      f"{disk.full_fix(path.parent)}")
    for needle, hinted_class, hint in MESSAGE_HINTS:
        if needle in text.lower():
            return hinted_class(f"cannot {action} in the workspace database {path} ({text}): {hint}")
    return error_class(f"cannot {action} in the workspace database {path}: {text} "
                       f"({type(exc).__name__}); if it persists, move the file aside")


# -- time ----------------------------------------------------------------------------
def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_time(moment: datetime) -> str:
    """As stored: UTC; a naive `moment` is taken as local time."""
    return moment.astimezone(timezone.utc).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc)


# -- connections ---------------------------------------------------------------------
def db_path(home: Path | None = None) -> Path:
    return (home or settings.home()) / DB_FILE


@contextlib.contextmanager
def connect(home: Path | None = None, *, migrations: Sequence[Migration] = MIGRATIONS,
            busy_timeout_s: float = BUSY_TIMEOUT_S) -> Iterator[sqlite3.Connection]:
    """An open, migrated connection to the workspace database, closed afterwards. Every
    sqlite3 failure inside the block (the caller's queries too) becomes a
    `WorkspaceDatabaseError`. The connection is in autocommit mode: group writes with
    `transaction`."""
    path = db_path(home)
    try:
        _private(path.parent, PRIVATE_DIR_MODE)
        with contextlib.suppress(FileExistsError):  # created 0600 by us, never 0644 by SQLite
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
        for private in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            _private(private, PRIVATE_FILE_MODE)
        conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None)
    except (sqlite3.Error, OSError) as exc:
        raise translate_error(exc, path, "open") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        _enable_wal(conn, busy_timeout_s)
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, path, migrations)
        yield conn
    except sqlite3.Error as exc:  # not OSError: the caller's own file I/O is not a database failure
        raise translate_error(exc, path, "read or write") from exc
    finally:
        conn.close()


def unreadable(home: Path | None = None) -> str:
    """Why the workspace database cannot be read ("" when it can): one cheap read, for the
    views that would otherwise pass over the same failure once per rule that reads it."""
    try:
        with connect(home) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except WorkspaceDatabaseError as exc:
        return str(exc)
    return ""


def _private(path: Path, mode: int) -> None:
    """A directory `path` is created with `mode` (parents as usual); an existing directory or
    file that is ours is brought to `mode` (a workspace made 0755 / a database made 0644 by an
    older geadmin); someone else's is left alone, and a file that does not exist is skipped.
    The same rule as geadmin.repository.atomic.private_directory, one floor lower."""
    if mode == PRIVATE_DIR_MODE:
        path.mkdir(parents=True, exist_ok=True, mode=mode)
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != mode:
        with contextlib.suppress(OSError):  # best effort: a mode we cannot change never stops the work
            os.chmod(path, mode)


def _enable_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """WAL mode, once per file (it persists). Switching does not wait in SQLite's busy
    handler when another process opens the new file at the same moment: retry it here."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction: taken at once (`BEGIN IMMEDIATE`), committed at the end of the
    block, rolled back if the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def where(filters: Sequence[tuple[bool, str, tuple[object, ...]]]) -> tuple[str, list[object]]:
    """` WHERE a AND b` (or "" when none applies) and its parameters, from the filters'
    (applies, clause with ? placeholders, parameters): the clauses are fixed text, the values
    always parameters."""
    applied = [(clause, params) for applies, clause, params in filters if applies]
    text = " WHERE " + " AND ".join(clause for clause, _ in applied) if applied else ""
    return text, [value for _, params in applied for value in params]


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the pending migrations in one transaction; return the schema version."""
    latest = len(migrations)
    version = schema_version(conn)
    if version == latest:
        return version  # the common case: no write lock taken
    _refuse_newer(version, latest, path)
    with transaction(conn):
        version = schema_version(conn)  # re-read under the lock: another process may have migrated
        _refuse_newer(version, latest, path)
        for migration in migrations[version:]:
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {latest}")
    return latest


def _refuse_newer(version: int, latest: int, path: Path) -> None:
    if version > latest:
        raise WorkspaceDatabaseError(
            f"the workspace database {path} has schema version {version}, newer than this geadmin "
            f"knows ({latest}): upgrade geadmin, or use another workspace (GEADMIN_HOME)")
