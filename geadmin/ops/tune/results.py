"""Tuning runs kept in the workspace database (like load tests): saved by `geadmin.ops.tune.search`,
listed and reopened by `geadmin tune --list` / `--show ID` and the Tune page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geadmin import db
from geadmin.errors import TuneRunNotFoundError


def save_document(model: str, server: str, who: str, document: dict[str, Any], *,
                  home: Path | None = None) -> int:
    """Store one run's document (`geadmin.ops.tune.search.TuneResult.to_json`); returns its id."""
    with db.connect(home) as conn, db.transaction(conn):
        cursor = conn.execute(
            "INSERT INTO tune_runs (at, who, server, model, document) VALUES (?, ?, ?, ?, ?)",
            (db.format_time(db.utc_now()), who, server, model, json.dumps(document)))
        return int(cursor.lastrowid or 0)


def list_runs(model: str | None = None, *, limit: int = 50, home: Path | None = None) -> list[dict[str, Any]]:
    """The latest runs, newest first: their saved documents with `at`."""
    where, args = ("WHERE model = ?", (model,)) if model else ("", ())
    with db.connect(home) as conn:
        rows = conn.execute(f"SELECT id, at, document FROM tune_runs {where} ORDER BY id DESC LIMIT ?",
                            (*args, limit)).fetchall()
    return [{**json.loads(document), "id": run_id, "at": at} for run_id, at, document in rows]


def load_run(run_id: int, *, home: Path | None = None) -> dict[str, Any]:
    with db.connect(home) as conn:
        row = conn.execute("SELECT at, document FROM tune_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise TuneRunNotFoundError(f"no tuning run {run_id} in this workspace (geadmin tune --list shows "
                                   f"them)")
    return {**json.loads(row[1]), "id": run_id, "at": row[0]}
