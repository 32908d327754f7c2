"""Tuning runs kept in the workspace database (like load tests): saved by `geadmin.ops.tune.search`,
listed and reopened by `geadmin tune --list` / `--show ID` and the Tune page; `saturation_from_tune`
reads the measured saturation rate at the objective from the latest objective run (capacity)."""

from __future__ import annotations

import json
from datetime import datetime
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


def saturation_from_tune(model: str, *, home: Path | None = None) -> tuple[float, datetime] | None:
    """The measured saturation rate at the model's objective, from its latest objective tuning
    run with a winner (`geadmin tune MODEL --objective`): (requests/s, when that run was saved),
    or None when no such run is kept. It is the highest request rate the winning config met the
    objective at (p99 within it, failures within the budget, at least 90 % of the rate served),
    measured on a trial copy; when every rate measured met it (the document's
    `saturation_lower_bound`), the real saturation is above it. The run's whole curve is its
    document's `curve` (`load_run(id)`), and its config `best`."""
    for run in list_runs(model, home=home):
        rate = run.get("saturation_rps")
        if run.get("kind") == "objective" and isinstance(rate, (int, float)) and rate > 0:
            return float(rate), db.parse_time(run["at"])
    return None
