"""Telemetry history written: the sampler's windows as rows of the workspace database, kept small.

`record_window` stores one derived window (geadmin.telemetry.derive) in the three tables of
`geadmin.db` (migration "telemetry samples") that geadmin.telemetry.history.store reads back:
`telemetry_model`, `telemetry_server` and `telemetry_npu`, each row a window
`[at - span_s, at]` of one metrics `source`.

Gaps are stored, not guessed: when Triton does not answer, `record_gap` writes a
`telemetry_server` row with `gap = 1` and the reason; when a model's counters were reset
(Triton restarted, the model reloaded) its `telemetry_model` row has `gap = 1` instead of a rate.

`prune` keeps the tables small: raw rows older than `DOWNSAMPLE_AFTER_S` (1 h) become one
row per `BUCKET_S` (1 minute) and model (rates weighted by window length, gaps kept once per
bucket), and everything older than the retention (`GEADMIN_HISTORY_RETENTION_H`, 24 h)
is deleted.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from geadmin import db
from geadmin.telemetry.derive import ModelWindow, Window
from geadmin.telemetry.history.store import MODEL_VALUES, NPU_VALUES, RATE_VALUES, SERVER_VALUES
from geadmin.telemetry.sources.npu import NpuDevice

DOWNSAMPLE_AFTER_S = 3600.0
BUCKET_S = 60
DEFAULT_RETENTION_H = 24.0


# -- writing -------------------------------------------------------------------------
def record_window(window: Window, source: str, devices: Sequence[NpuDevice] = (), *,
                  home: Path | None = None) -> int:
    """Store one derived window; a model whose counters were reset is stored as a gap. Returns
    the number of model rows written."""
    at, span = window.end_s, window.window_s
    model_rows = [_model_row(source, at, span, m) for m in window.models]
    s = window.server
    with db.connect(home) as conn, db.transaction(conn):
        conn.executemany(
            f"INSERT INTO telemetry_model (source, at, span_s, model, version, gap, "
            f"{', '.join(MODEL_VALUES)}, failures_by_reason) VALUES ({_marks(7 + len(MODEL_VALUES))})",
            model_rows)
        conn.execute(
            "INSERT INTO telemetry_server (source, at, span_s, cpu_utilization_pct, cpu_memory_used_bytes, "
            "cpu_memory_total_bytes) VALUES (?, ?, ?, ?, ?, ?)",
            (source, at, span, s.cpu_utilization_pct, s.cpu_memory_used_bytes, s.cpu_memory_total_bytes))
        conn.executemany(
            f"INSERT INTO telemetry_npu (source, at, span_s, device, npu_source, {', '.join(NPU_VALUES)}) "
            f"VALUES ({_marks(5 + len(NPU_VALUES))})",
            [(source, at, span, d.id, d.source, d.aicore_util_pct, *d.device_memory, d.temperature_c,
              d.power_w) for d in devices])
    return len(model_rows)


def record_gap(source: str, at_s: float, reason: str, *, home: Path | None = None) -> None:
    """No data at `at_s` for the whole source (Triton down, not answering in time)."""
    with db.connect(home) as conn, db.transaction(conn):
        conn.execute("INSERT INTO telemetry_server (source, at, span_s, gap, reason) VALUES (?, ?, 0, 1, ?)",
                     (source, at_s, reason))


def _model_row(source: str, at: float, span: float, m: ModelWindow) -> tuple[Any, ...]:
    if m.counters_reset:  # counted from the new values alone, over a window Triton was partly down in
        return (source, at, span, m.model, m.version, 1, *([None] * len(MODEL_VALUES)), "{}")
    request = m.quantiles_for("request")
    values = {name: getattr(m, name, None) for name in MODEL_VALUES}
    values.update(p50_ms=request.p50_ms if request else None, p90_ms=request.p90_ms if request else None,
                  p99_ms=request.p99_ms if request else None)
    failures = json.dumps({reason: count for reason, count in m.failures_by_reason if count})
    return (source, at, span, m.model, m.version, 0, *(values[n] for n in MODEL_VALUES), failures)


def _marks(count: int) -> str:
    return ", ".join("?" * count)


# -- pruning -------------------------------------------------------------------------
def prune(*, retention_h: float = DEFAULT_RETENTION_H, now_s: float | None = None,
          home: Path | None = None) -> int:
    """Downsample raw rows older than 1 h into 1-minute buckets and delete rows older than the
    retention. Returns the number of rows removed."""
    now_s = time.time() if now_s is None else now_s
    keep_from = now_s - retention_h * 3600.0
    # whole buckets only, so a bucket is never half raw, half downsampled
    downsample_before = math.floor((now_s - DOWNSAMPLE_AFTER_S) / BUCKET_S) * BUCKET_S
    removed = 0
    with db.connect(home) as conn, db.transaction(conn):
        for table in ("telemetry_model", "telemetry_server", "telemetry_npu"):
            removed += conn.execute(f"DELETE FROM {table} WHERE at < ?", (keep_from,)).rowcount
        removed += _downsample_models(conn, downsample_before)
        removed += _downsample_simple(conn, "telemetry_server", ("source",), SERVER_VALUES, downsample_before)
        removed += _downsample_simple(conn, "telemetry_npu", ("source", "device", "npu_source"), NPU_VALUES,
                                      downsample_before)
    return removed


def _raw_rows(conn: sqlite3.Connection, table: str, before: float) -> list[sqlite3.Row]:
    conn.row_factory = sqlite3.Row
    try:
        return list(conn.execute(f"SELECT * FROM {table} WHERE resolution_s = 0 AND at < ? ORDER BY at",
                                 (before,)))
    finally:
        conn.row_factory = None


def _buckets(rows: Iterable[sqlite3.Row], keys: Sequence[str],
             has_gap: bool) -> dict[tuple[Any, ...], list[sqlite3.Row]]:
    """Rows by (*keys, is a gap, bucket number)."""
    grouped: dict[tuple[Any, ...], list[sqlite3.Row]] = {}
    for row in rows:
        key = (*(row[k] for k in keys), bool(row["gap"]) if has_gap else False,
               math.floor(row["at"] / BUCKET_S))
        grouped.setdefault(key, []).append(row)
    return grouped


def _aggregate(rows: Sequence[sqlite3.Row],
               names: Iterable[str]) -> tuple[float, float, dict[str, float | None]]:
    """(at, span_s, values) of one bucket: rates (RATE_VALUES) weighted by window length, the
    rest averaged."""
    at = max(r["at"] for r in rows)
    span = at - min(r["at"] - r["span_s"] for r in rows)
    values: dict[str, float | None] = {}
    for name in names:
        present = [(r[name], r["span_s"]) for r in rows if r[name] is not None]
        if not present:
            values[name] = None
        elif name in RATE_VALUES and sum(w for _, w in present) > 0:
            values[name] = sum(v * w for v, w in present) / sum(w for _, w in present)
        else:
            values[name] = sum(v for v, _ in present) / len(present)
    return at, span, values


def _downsample_models(conn: sqlite3.Connection, before: float) -> int:
    rows = _raw_rows(conn, "telemetry_model", before)
    inserts = []
    grouped = _buckets(rows, ("source", "model", "version"), has_gap=True)
    for (source, model, version, gap, _bucket), group in grouped.items():
        at, span, values = _aggregate(group, MODEL_VALUES)
        failures: dict[str, float] = {}
        for row in group:
            for reason, count in json.loads(row["failures_by_reason"] or "{}").items():
                failures[reason] = failures.get(reason, 0.0) + count
        if gap:
            at, span = min(r["at"] for r in group), 0.0  # one gap marker for the bucket
        inserts.append((source, at, span, BUCKET_S, model, version, int(gap),
                        *(values[n] for n in MODEL_VALUES), json.dumps(failures)))
    conn.execute("DELETE FROM telemetry_model WHERE resolution_s = 0 AND at < ?", (before,))
    conn.executemany(
        f"INSERT INTO telemetry_model (source, at, span_s, resolution_s, model, version, gap, "
        f"{', '.join(MODEL_VALUES)}, failures_by_reason) VALUES ({_marks(8 + len(MODEL_VALUES))})", inserts)
    return len(rows) - len(inserts)


def _downsample_simple(conn: sqlite3.Connection, table: str, keys: Sequence[str], names: Sequence[str],
                       before: float) -> int:
    rows = _raw_rows(conn, table, before)
    has_gap = table == "telemetry_server"
    inserts = []
    for key, group in _buckets(rows, keys, has_gap).items():
        at, span, values = _aggregate(group, names)
        gap = key[len(keys)]
        if gap:
            at, span = min(r["at"] for r in group), 0.0
        extra = (int(gap), group[0]["reason"]) if has_gap else ()
        inserts.append((*key[:len(keys)], at, span, BUCKET_S, *extra, *(values[n] for n in names)))
    columns = [*keys, "at", "span_s", "resolution_s", *(("gap", "reason") if has_gap else ()), *names]
    conn.execute(f"DELETE FROM {table} WHERE resolution_s = 0 AND at < ?", (before,))
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({_marks(len(columns))})", inserts)
    return len(rows) - len(inserts)
