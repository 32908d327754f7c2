"""The audit log: who did what to which model on which server, when, with the diff and the outcome.

Rows are appended (never updated) to the `audit` table of the workspace database
(`geadmin.db`). Every apply, rollback, load, unload and reload — from the dashboard or the
CLI — writes one, refusals included (a conflicting edit, a config that does not parse), so
the log also shows what was attempted. Who: the dashboard passes its signed-in user;
everything else records the OS user.
"""

from __future__ import annotations

import csv
import enum
import getpass
import io
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from geadmin import db
from geadmin.errors import InvalidArgumentError

CSV_COLUMNS = ("id", "at", "who", "origin", "server", "model", "action", "result", "message", "diff")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run such a cell
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Result(str, enum.Enum):
    OK = "ok"
    FAILED = "failed"
    WRITTEN = "written"  # a config written to disk and not loaded (an apply or rollback of a model that
    # is not loaded, without --load): what serves did not change, and Triton has not checked it
    ROLLED_BACK = "rolled_back"  # Triton rejected a config; the previous file was restored
    UNFINISHED = "unfinished"  # a config on disk whose load Triton had not finished when geadmin
    # stopped waiting: the model's state says how it ended
    REFUSED = "refused"  # nothing was done: a conflicting edit, a config that does not parse, ...
    STARTED = "started"  # a change began (an apply about to write, a create about to stage); its
    # outcome follows in a later row of the same action and model (geadmin.ops.models.reconcile)
    INTERRUPTED = "interrupted"  # a started change whose process died before its outcome row
    STEP = "step"  # one server's step of a journaled fleet rollout (geadmin.diagnose.rollouts); the
    # rollout's outcome is a later row of the same action and model


class Origin(str, enum.Enum):
    CLI = "cli"
    DASHBOARD = "dashboard"
    LOCAL = "local"  # a library call that did not say


@dataclass(frozen=True)
class Actor:
    """Who acts, and through what."""

    name: str
    origin: Origin = Origin.LOCAL

    @classmethod
    def os_user(cls, origin: Origin = Origin.LOCAL) -> Actor:
        return cls(os_user_name(), origin)

    @classmethod
    def dashboard(cls, user: str | None) -> Actor:
        """The signed-in dashboard user; without sign-in, the OS user running the dashboard."""
        return cls(user or os_user_name(), Origin.DASHBOARD)


def os_user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container uid with no passwd entry and no LOGNAME/USER
        return f"uid {os.getuid()}"


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime  # UTC
    who: str
    origin: str
    server: str
    model: str
    action: str
    result: str
    message: str
    diff: str

    @property
    def headline(self) -> str:
        """The message's first line (a table cell; the whole message is in `message`)."""
        return self.message.splitlines()[0] if self.message else ""

    def record(self) -> dict[str, Any]:
        """For JSON and CSV: every column, the time as ISO 8601 (UTC)."""
        return {"id": self.id, "at": self.at.isoformat(), "who": self.who, "origin": self.origin,
                "server": self.server, "model": self.model, "action": self.action,
                "result": self.result, "message": self.message, "diff": self.diff}


def record(
    action: str,
    model: str,
    result: Result | str,
    *,
    actor: Actor | None = None,
    server: str = "",
    message: str = "",
    diff: str = "",
    home: Path | None = None,
) -> AuditEntry:
    """Append one row; raises `WorkspaceDatabaseError` when it cannot be written."""
    actor = actor or Actor.os_user()
    at = db.utc_now()
    values = (db.format_time(at), actor.name, Origin(actor.origin).value, server, model, action,
              Result(result).value, message, diff)
    with db.connect(home) as conn, db.transaction(conn):
        cursor = conn.execute(
            "INSERT INTO audit (at, who, origin, server, model, action, result, message, diff) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
        row_id = int(cursor.lastrowid or 0)
    return AuditEntry(row_id, db.parse_time(values[0]), *values[1:])


def record_action(
    action: str,
    model: str,
    ok: bool,
    message: str,
    *,
    server: str,
    actor: Actor | None = None,
    home: Path | None = None,
) -> AuditEntry:
    """One load / unload / reload as `geadmin.ops.models.actions` reports it (an `ActionResult`:
    `record_action(r.action.value, r.name, r.ok, r.message, server=client.url, actor=...)`)."""
    return record(action, model, Result.OK if ok else Result.FAILED, actor=actor, server=server,
                  message=message, home=home)


def try_record_action(action: str, model: str, ok: bool, message: str, *, server: str,
                      actor: Actor | None = None, home: Path | None = None) -> str:
    """`record_action` that never raises: "" when the row is written, else why not (to show as
    a warning) — an action that happened is not reported as failed for want of its audit row."""
    try:
        record_action(action, model, ok, message, server=server, actor=actor, home=home)
    except db.WorkspaceDatabaseError as exc:
        return f"the audit row could not be written: {exc}"
    return ""


def facts(message: str) -> dict[str, str]:
    """The "key: value" lines after a row's headline (how a journaled change keeps its facts:
    a rollout's plan, a tuning run's id, an apply's revision)."""
    found = {}
    for line in message.splitlines()[1:]:
        key, sep, value = line.partition(": ")
        if sep:
            found[key.strip()] = value.strip()
    return found


def query(
    *,
    since: datetime | None = None,
    model: str | None = None,
    action: str | None = None,
    result: Result | str | None = None,
    who: str | None = None,
    limit: int | None = None,
    home: Path | None = None,
) -> list[AuditEntry]:
    """Rows matching every filter given, newest first."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("model", model), ("action", action),
                          ("result", Result(result).value if result else None), ("who", who)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        clauses.append("at >= ?")
        params.append(db.format_time(since))
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    tail = ""
    if limit is not None:
        tail = " LIMIT ?"
        params.append(max(0, limit))
    with db.connect(home) as conn:
        rows = conn.execute(
            "SELECT id, at, who, origin, server, model, action, result, message, diff FROM audit"
            f"{where} ORDER BY at DESC, id DESC{tail}", params).fetchall()
    return [AuditEntry(int(r[0]), db.parse_time(r[1]), *r[2:]) for r in rows]


@dataclass(frozen=True)
class LogSummary:
    """How many rows the log holds, and the values present in each filterable column (sorted):
    what a filter can offer without listing values that match nothing."""

    total: int
    models: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    users: tuple[str, ...] = ()


def summary(home: Path | None = None) -> LogSummary:
    """The row count and the distinct model, action, result and who values of the whole log."""
    with db.connect(home) as conn:
        total = int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])
        values = {column: tuple(r[0] for r in conn.execute(
            f"SELECT DISTINCT {column} FROM audit ORDER BY {column}"))  # column names: fixed, not input
            for column in ("model", "action", "result", "who")}
    return LogSummary(total, values["model"], values["action"], values["result"], values["who"])


def parse_since(text: str, now: datetime | None = None, *, name: str = "--since") -> datetime:
    """`30m`, `2h`, `7d`, `1w` (that long ago), or an ISO 8601 date / time (local time unless
    it says otherwise). `name` is what the error calls the value (the CLI flag, a field label)."""
    now = now or db.utc_now()
    match = _DURATION.match(text)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS_S[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise InvalidArgumentError(f"{name} {text!r} is neither a duration nor a date: use e.g. 30m, 2h, 7d, "
                          "2025-01-31 or 2025-01-31T14:00") from exc
    return moment if moment.tzinfo else moment.astimezone()  # naive: local time


def write_csv(entries: Iterable[AuditEntry], stream: TextIO) -> int:
    """Write the entries as CSV (a header, then one line per row); returns the row count.
    A cell a spreadsheet would run as a formula (`=...`, `-...`) is prefixed with `'`."""
    writer = csv.DictWriter(stream, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    count = 0
    for entry in entries:
        writer.writerow({k: _inert(v) for k, v in entry.record().items()})
        count += 1
    return count


def csv_text(entries: Iterable[AuditEntry]) -> str:
    buffer = io.StringIO()
    write_csv(entries, buffer)
    return buffer.getvalue()


def _inert(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
