"""The workspace database: one SQLite file, `$GEADMIN_HOME/geadmin.db`, for the audit log and
the config history (and any later table that must survive restarts).

Safe for the dashboard and several CLI processes at once: WAL journal (readers never wait
for a writer), a busy timeout (writers queue instead of failing), and every write in an
explicit `BEGIN IMMEDIATE` transaction, so two writers never deadlock upgrading a read lock.
Connections are short-lived — one per operation — so none crosses a thread (Streamlit runs
every rerun on a new thread). WAL needs a local filesystem: keep the workspace off NFS.

The schema is versioned: `MIGRATIONS` is an ordered list, `PRAGMA user_version` counts how
many are applied, and the pending ones run in one transaction when a connection opens (a
failure leaves the file as it was). A file written by a newer geadmin is refused, not
guessed at. Add a table by appending a migration; never edit one that has shipped.

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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from geadmin import settings
from geadmin.errors import DatabaseBusyError, WorkspaceDatabaseError

DB_FILE = "geadmin.db"
PRIVATE_DIR_MODE = 0o700  # the workspace: secrets, logs and the audit log are its owner's only
PRIVATE_FILE_MODE = 0o600  # the database and its -wal / -shm files (SQLite gives them the db's mode)
BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's transaction
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # UTC, fixed width: text order is time order


@dataclass(frozen=True)
class Migration:
    """One step of the schema; `statements` run in order inside the migration transaction."""

    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration("audit log", (
        """CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT
            who TEXT NOT NULL,             -- OS user, or the dashboard's signed-in user
            origin TEXT NOT NULL,          -- cli, dashboard, local
            server TEXT NOT NULL,          -- the Triton URL ('' when none was involved)
            model TEXT NOT NULL,
            action TEXT NOT NULL,          -- apply, rollback, load, unload, reload, ...
            result TEXT NOT NULL,          -- ok, failed, rolled_back, refused
            message TEXT NOT NULL DEFAULT '',
            diff TEXT NOT NULL DEFAULT ''  -- unified diff of the config change, if any
        )""",
        "CREATE INDEX audit_by_time ON audit (at)",
        "CREATE INDEX audit_by_model ON audit (model, at)",
    )),
    Migration("config revisions", (
        """CREATE TABLE config_revisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            repository TEXT NOT NULL,      -- the model repository's resolved path
            model TEXT NOT NULL,
            number INTEGER NOT NULL,       -- 1, 2, ... per (repository, model)
            at TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            content BLOB NOT NULL,         -- the file's exact bytes
            who TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            UNIQUE (repository, model, number)
        )""",
    )),
    Migration("telemetry samples", (
        # geadmin.telemetry.history.store: one row per sampler interval (resolution_s 0) or per
        # downsampled bucket (resolution_s 60). `at` is the end of the window, epoch seconds;
        # the window is [at - span_s, at]. gap = 1: no data there (Triton down, restarted).
        """CREATE TABLE telemetry_model (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,          -- the /metrics URL sampled
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL,
            version TEXT NOT NULL,
            gap INTEGER NOT NULL DEFAULT 0,
            inferences_per_s REAL, requests_per_s REAL, failures_per_s REAL,
            executions_per_s REAL, avg_batch_size REAL,
            avg_request_ms REAL, avg_queue_ms REAL, avg_compute_input_ms REAL,
            avg_compute_infer_ms REAL, avg_compute_output_ms REAL,
            p50_ms REAL, p90_ms REAL, p99_ms REAL, pending_requests REAL,
            failures_by_reason TEXT NOT NULL DEFAULT '{}'  -- JSON {reason: failed requests}
        )""",
        "CREATE INDEX telemetry_model_by_time ON telemetry_model (source, at)",
        """CREATE TABLE telemetry_server (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            gap INTEGER NOT NULL DEFAULT 0,
            reason TEXT NOT NULL DEFAULT '',  -- why there is a gap
            cpu_utilization_pct REAL, cpu_memory_used_bytes REAL, cpu_memory_total_bytes REAL
        )""",
        "CREATE INDEX telemetry_server_by_time ON telemetry_server (source, at)",
        """CREATE TABLE telemetry_npu (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            device INTEGER NOT NULL,
            npu_source TEXT NOT NULL,      -- npu-exporter, npu-smi, triton
            aicore_util_pct REAL, hbm_used_bytes REAL, hbm_total_bytes REAL,
            temperature_c REAL, power_w REAL
        )""",
        "CREATE INDEX telemetry_npu_by_time ON telemetry_npu (source, at)",
    )),
    Migration("perf runs", (
        # geadmin.ops.bench.results: one perf_analyzer load test and its measured points.
        """CREATE TABLE perf_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT: when the run started
            who TEXT NOT NULL,
            server TEXT NOT NULL,          -- the Triton URL perf_analyzer drove
            model TEXT NOT NULL,
            mode TEXT NOT NULL,            -- concurrency, request_rate
            label TEXT NOT NULL DEFAULT '',  -- e.g. "dynamic batching on"
            settings TEXT NOT NULL         -- JSON: geadmin.ops.bench.load_test.BenchSettings
        )""",
        "CREATE INDEX perf_runs_by_model ON perf_runs (model, at)",
        """CREATE TABLE perf_points (
            run_id INTEGER NOT NULL REFERENCES perf_runs (id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,      -- 0, 1, ... in the order measured
            load REAL NOT NULL,            -- the concurrency, or the request rate (requests/s)
            figures TEXT NOT NULL,         -- JSON: geadmin.ops.bench.results.BenchPoint
            PRIMARY KEY (run_id, ordinal)
        )""",
    )),
    Migration("probes, model states, objectives", (
        # geadmin.telemetry.history.watch: the sampler's synthetic requests and the states it saw.
        """CREATE TABLE probes (
            id INTEGER PRIMARY KEY,
            server TEXT NOT NULL,          -- the Triton URL probed
            model TEXT NOT NULL,
            at REAL NOT NULL,              -- epoch seconds
            ok INTEGER NOT NULL,
            latency_ms REAL,
            error TEXT NOT NULL DEFAULT '',
            input TEXT NOT NULL DEFAULT 'zeros'  -- zeros, or saved (the model's saved example)
        )""",
        "CREATE INDEX probes_by_model ON probes (server, model, at)",
        """CREATE TABLE model_states (
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            state TEXT NOT NULL,           -- READY, LOADING, UNAVAILABLE, ...
            reason TEXT NOT NULL DEFAULT '',
            since REAL NOT NULL,           -- epoch seconds: when it entered this state
            seen REAL NOT NULL,            -- the last time the sampler read it
            operator_unload INTEGER NOT NULL DEFAULT 0,  -- not READY because an operator unloaded it
            PRIMARY KEY (server, model)
        )""",
        """CREATE TABLE probe_inputs (
            model TEXT PRIMARY KEY,        -- the model's saved example request (the Playground's)
            sources TEXT NOT NULL,         -- JSON {input: {kind, payload}}
            saved_at TEXT NOT NULL,
            who TEXT NOT NULL
        )""",
        """CREATE TABLE objectives (
            model TEXT PRIMARY KEY,
            p99_ms REAL,                   -- the p99 latency target, NULL: none
            error_budget REAL,             -- allowed failed fraction of requests, NULL: none
            set_at TEXT NOT NULL,
            who TEXT NOT NULL
        )""",
    )),
    Migration("tune runs", (
        # geadmin.ops.tune.results: one tuning run, its trials and its pick.
        """CREATE TABLE tune_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT: when the run started
            who TEXT NOT NULL,
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            document TEXT NOT NULL         -- JSON: geadmin.ops.tune.search.TuneResult.to_json()
        )""",
        "CREATE INDEX tune_runs_by_model ON tune_runs (model, at)",
    )),
    Migration("model batching", (
        # geadmin.telemetry.history.watch: each READY model's dynamic batcher wait, as the prober read its
        # served config (the alert rules subtract it from the queue time: waiting is by design).
        """CREATE TABLE model_batching (
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            max_queue_delay_s REAL NOT NULL,  -- dynamic_batching.max_queue_delay_microseconds / 1e6
            seen REAL NOT NULL,            -- epoch seconds: when the prober last read it
            PRIMARY KEY (server, model)
        )""",
    )),
)

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


def translate_error(exc: BaseException, path: Path, action: str) -> WorkspaceDatabaseError:
    """The one translation of a sqlite3 (or OS) failure; `action` says what we were doing."""
    if isinstance(exc, WorkspaceDatabaseError):
        return exc
    error_class = next((ours for theirs, ours in SQLITE_ERRORS if isinstance(exc, theirs)), None)
    if error_class is None:
        raise TypeError(f"not a database failure: {exc!r}") from exc
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
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
