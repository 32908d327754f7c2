"""Fault records over time: first and last seen, still present or cleared (workspace SQLite).

`record_reading` keeps one row per (node, chip, code, source) in the `npu_faults` table
(geadmin/migrations.py):

1. every fault of the reading is upserted: last seen now, present again; one that had
   cleared and comes back starts a new occurrence (first seen now). A counted fault (npu_ge's
   counters, which count since Triton started and never fall back while it runs) is seen only
   when its count changed since the last read (rose, or fell with a restart that counted anew);
   one that stayed the same for COUNTER_QUIET_S is cleared: its chip failed nothing lately
   (drained, reset, or reloaded away from), though Triton still reports the old count;
2. a fault of a source the reading DID read (`FaultReading.read`) that it no longer reports
   is marked cleared (present = 0, last seen kept: the last time it was reported) — on the
   reading's node only; a source that was not read (down, not configured) leaves its faults
   as they were: a silent source clears nothing;
3. bounded: at most MAX_RECORDED faults of one reading are kept (a page reporting thousands
   is cut, logged, and clears nothing: what it left out is unknown), cleared faults older than
   KEEP_CLEARED_S are removed, and the table never holds more than MAX_ROWS rows.

The fault views (CLI, NPUs page, Fleet page, exporter) read `fault_records`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geadmin import db
from geadmin.telemetry.sources.fault_reading import FaultReading
from geadmin.telemetry.sources.npu_faults import ChipFault

LOG = logging.getLogger(__name__)
MAX_RECORDED = 1024  # faults of one reading
MAX_ROWS = 20_000  # rows in the table
KEEP_CLEARED_S = 7 * 24 * 3600.0
MAX_DETAIL = 2000
COUNTER_QUIET_S = 600.0  # a counted fault whose count has not changed for this long is cleared
KEY = "node = ? AND chip = ? AND IFNULL(code, -1) = IFNULL(?, -1) AND source = ?"


@dataclass(frozen=True)
class FaultRecord:
    """A ChipFault with its history: what every view shows."""

    fault: ChipFault
    first_seen_s: float  # unix time
    last_seen_s: float
    present: bool  # False: the last read of its source no longer reported it (cleared)


def record_reading(reading: FaultReading, *, home: Path | None, now_s: float) -> list[FaultRecord]:
    """Record one reading (steps in the module docstring); the records of its faults and of
    the faults it cleared."""
    faults = _unique(reading.faults)
    truncated = len(faults) > MAX_RECORDED
    if truncated:
        LOG.warning("a fault reading of node %r holds %d faults: only the first %d are recorded, "
                    "and nothing is cleared", reading.node, len(faults), MAX_RECORDED)
        faults = faults[:MAX_RECORDED]
    with db.connect(home) as conn, db.transaction(conn):
        conn.row_factory = sqlite3.Row
        touched = [_upsert(conn, fault, now_s) for fault in faults]
        cleared: list[int] = []
        if not truncated:
            for source in sorted(set(reading.read)):
                rows = conn.execute("SELECT id FROM npu_faults WHERE node = ? AND source = ? AND present = 1",
                                    (reading.node, source)).fetchall()
                cleared += [row["id"] for row in rows if row["id"] not in touched]
            conn.executemany("UPDATE npu_faults SET present = 0 WHERE id = ?", [(i,) for i in cleared])
        _prune(conn, now_s)
        return _records(conn, [*touched, *cleared])


def fault_records(*, home: Path | None, since_s: float | None = None, node: str | None = None,
                  present_only: bool = False) -> list[FaultRecord]:
    """The recorded faults, present first, then by node, chip and code: those last seen at or
    after `since_s` (epoch seconds), of `node`, and only the present ones if asked."""
    where, params = db.where([(since_s is not None, "last_seen >= ?", (since_s,)),
                              (node is not None, "node = ?", (node,)),
                              (present_only, "present = 1", ())])
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(f"SELECT * FROM npu_faults{where} ORDER BY present DESC, node, chip, "
                            f"IFNULL(code, -1), source LIMIT {MAX_ROWS}", params).fetchall()
    return [_record(row) for row in rows]


def _unique(faults: Iterable[ChipFault]) -> list[ChipFault]:
    """One fault per (node, chip, code, source), the last one read winning, in reading order;
    counts add up (two servers of a node counting failures on one chip)."""
    found: dict[tuple[str, int, int | None, str], ChipFault] = {}
    for fault in faults:
        key = (fault.node, fault.chip, fault.code, fault.source)
        before = found.get(key)
        if before is not None and before.count is not None and fault.count is not None:
            fault = replace(fault, count=before.count + fault.count)
        found[key] = fault
    return list(found.values())


def _upsert(conn: sqlite3.Connection, fault: ChipFault, now_s: float) -> int:
    key = (fault.node, fault.chip, fault.code, fault.source)
    healthy = None if fault.healthy is None else int(fault.healthy)
    detail = fault.detail[:MAX_DETAIL]
    row = conn.execute(f"SELECT id, count, last_rose FROM npu_faults WHERE {KEY}", key).fetchone()
    if row is None:  # a count seen for the first time: when it rose is unknown, so it is present
        cursor = conn.execute(
            "INSERT INTO npu_faults (node, chip, code, source, healthy, detail, first_seen, last_seen, "
            "present, count, last_rose) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (*key, healthy, detail, now_s, now_s, fault.count, now_s))
        return int(cursor.lastrowid or 0)
    if fault.count is not None and row["count"] is not None and fault.count == row["count"]:
        quiet = now_s - (row["last_rose"] if row["last_rose"] is not None else now_s) >= COUNTER_QUIET_S
        conn.execute("UPDATE npu_faults SET healthy = ?, detail = ?, present = present AND ? WHERE id = ?",
                     (healthy, detail, int(not quiet), row["id"]))
        return int(row["id"])
    conn.execute("UPDATE npu_faults SET healthy = ?, detail = ?, last_seen = ?, count = ?, last_rose = ?, "
                 "first_seen = CASE WHEN present = 0 THEN ? ELSE first_seen END, present = 1 WHERE id = ?",
                 (healthy, detail, now_s, fault.count, now_s, now_s, row["id"]))
    return int(row["id"])


def _prune(conn: sqlite3.Connection, now_s: float) -> None:
    conn.execute("DELETE FROM npu_faults WHERE present = 0 AND last_seen < ?", (now_s - KEEP_CLEARED_S,))
    (count,) = conn.execute("SELECT COUNT(*) FROM npu_faults").fetchone()
    if count > MAX_ROWS:  # oldest first, cleared before present
        conn.execute("DELETE FROM npu_faults WHERE id IN (SELECT id FROM npu_faults "
                     "ORDER BY present, last_seen LIMIT ?)", (count - MAX_ROWS,))


def _records(conn: sqlite3.Connection, ids: list[int]) -> list[FaultRecord]:
    found: list[FaultRecord] = []
    for start in range(0, len(ids), 500):  # SQLite's bound on parameters
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        rows = conn.execute(f"SELECT * FROM npu_faults WHERE id IN ({marks})", chunk)
        found += [_record(row) for row in rows]
    return sorted(found, key=lambda r: (not r.present, r.fault.node, r.fault.chip,
                                        -1 if r.fault.code is None else r.fault.code, r.fault.source))


def _record(row: Any) -> FaultRecord:
    healthy = None if row["healthy"] is None else bool(row["healthy"])
    fault = ChipFault(row["chip"], row["code"], row["source"], row["node"], healthy, row["detail"],
                      row["count"])
    return FaultRecord(fault, row["first_seen"], row["last_seen"], bool(row["present"]))
