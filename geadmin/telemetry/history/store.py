"""Telemetry history: the sampler's windows in the workspace database, read back as series.

The sampler (geadmin.telemetry.history.sampler) writes one row per interval into three tables of
`geadmin.db` (migration "telemetry samples"): `telemetry_model` (per model version: the
derived rates, averages, request quantiles, pending requests, failures by reason),
`telemetry_server` (Triton's CPU and memory) and `telemetry_npu` (per device, when a source
has devices). Every row is a window `[at - span_s, at]` (epoch seconds) of one metrics
`source` (the /metrics URL sampled).

Gaps are stored, not guessed: when Triton does not answer, a `telemetry_server` row with
`gap = 1` and the reason; when a model's counters were reset (Triton restarted, the model
reloaded) a `telemetry_model` row with `gap = 1` instead of a rate. The reads turn a gap row,
and any hole between one window's end and the next one's start, into a point whose values
are all None — plotly breaks the line there — so a restart is drawn as a gap, never a spike.

`prune` keeps the table small: raw rows older than `DOWNSAMPLE_AFTER_S` (1 h) become one
row per `BUCKET_S` (1 minute) and model (rates weighted by window length, gaps kept once per
bucket), and everything older than the retention (`GEADMIN_HISTORY_RETENTION_H`, 24 h)
is deleted.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from geadmin import audit, db
from geadmin.telemetry.derive import ModelWindow, Window
from geadmin.telemetry.sources.npu import NpuDevice

DOWNSAMPLE_AFTER_S = 3600.0
BUCKET_S = 60
DEFAULT_RETENTION_H = 24.0
# Two windows further apart than this (beyond the later one's own length) have a hole between them.
HOLE_TOLERANCE_S = 1.0

MODEL_VALUES = ("inferences_per_s", "requests_per_s", "failures_per_s", "executions_per_s",
                "avg_batch_size", "avg_request_ms", "avg_queue_ms", "avg_compute_input_ms",
                "avg_compute_infer_ms", "avg_compute_output_ms", "p50_ms", "p90_ms", "p99_ms",
                "pending_requests")
RATE_VALUES = frozenset(("inferences_per_s", "requests_per_s", "failures_per_s", "executions_per_s"))
SERVER_VALUES = ("cpu_utilization_pct", "cpu_memory_used_bytes", "cpu_memory_total_bytes")
NPU_VALUES = ("aicore_util_pct", "hbm_used_bytes", "hbm_total_bytes", "temperature_c", "power_w")
# Audit actions drawn as change markers on the charts.
MARKER_ACTIONS = ("load", "unload", "reload", "apply", "rollback", "create", "restart", "exit")


@dataclass(frozen=True)
class Series:
    """One line set of a chart: `times` ascending (UTC), each column as long as `times`;
    None where there is no value — at a gap every column is None."""

    name: str  # "model" (one version) or "model v2"; "server"; "NPU 3"
    times: tuple[datetime, ...]
    values: Mapping[str, tuple[float | None, ...]]
    failures_by_reason: tuple[Mapping[str, float], ...] = ()  # per point (models only)
    spans_s: tuple[float, ...] = ()  # per point: the window it covers (0 at a gap)

    def column(self, name: str) -> tuple[float | None, ...]:
        return self.values[name]

    @property
    def points(self) -> int:
        """How many points carry a value (gaps excluded)."""
        return sum(1 for i in range(len(self.times)) if any(v[i] is not None for v in self.values.values()))

    def has(self, name: str) -> bool:
        return any(v is not None for v in self.values.get(name, ()))


@dataclass(frozen=True)
class Marker:
    """A change from the audit log, drawn as a vertical line."""

    at: datetime
    action: str
    model: str
    result: str
    who: str
    headline: str

    @property
    def label(self) -> str:
        what = "Triton" if self.model == "tritonserver" else self.model
        text = f"{self.action} {what}" + ("" if self.result == "ok" else f" ({self.result})")
        return f"{text} — {self.who}" + (f": {self.headline}" if self.headline else "")


@dataclass(frozen=True)
class Overview:
    """What the history holds for one source."""

    source: str
    first_at: datetime | None
    last_at: datetime | None
    models: tuple[str, ...]
    down: str = ""  # why the latest sample is a gap ("" when it has data)


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
    """(at, span_s, values) of one bucket: rates weighted by window length, the rest averaged."""
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


# -- reading -------------------------------------------------------------------------
def sources(*, home: Path | None = None) -> list[Overview]:
    """Every source with history, the most recently sampled first."""
    with db.connect(home) as conn:
        rows = conn.execute("SELECT source, MIN(at), MAX(at) FROM telemetry_server GROUP BY source "
                            "ORDER BY MAX(at) DESC").fetchall()
        found = []
        for source, first, last in rows:
            models = tuple(r[0] for r in conn.execute(
                "SELECT DISTINCT model FROM telemetry_model WHERE source = ? ORDER BY model", (source,)))
            latest = conn.execute("SELECT gap, reason FROM telemetry_server WHERE source = ? "
                                  "ORDER BY at DESC LIMIT 1", (source,)).fetchone()
            found.append(Overview(source, _time(first), _time(last), models,
                                  latest[1] if latest and latest[0] else ""))
    return found


def model_series(source: str, since: datetime, until: datetime | None = None,
                 models: Sequence[str] | None = None, *, home: Path | None = None) -> list[Series]:
    """Per model version, the rows in [since, until], with None points at gaps and holes."""
    lo, hi = _range(since, until)
    with db.connect(home) as conn:
        gaps = _server_gaps(conn, source, lo, hi)
        rows = conn.execute(
            f"SELECT model, version, at, span_s, gap, {', '.join(MODEL_VALUES)}, failures_by_reason "
            "FROM telemetry_model WHERE source = ? AND at >= ? AND at <= ? ORDER BY model, version, at",
            (source, lo, hi)).fetchall()
    by_key: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        if models is None or row[0] in models:
            by_key.setdefault((row[0], row[1]), []).append(row[2:])
    versions: dict[str, int] = {}
    for model, _ in by_key:
        versions[model] = versions.get(model, 0) + 1
    found = []
    for (model, version), points in sorted(by_key.items()):
        name = model if versions[model] == 1 else f"{model} v{version}"
        found.append(_series(name, points, MODEL_VALUES, gaps, with_failures=True))
    return found


def server_series(source: str, since: datetime, until: datetime | None = None, *,
                  home: Path | None = None) -> Series:
    lo, hi = _range(since, until)
    with db.connect(home) as conn:
        rows = conn.execute(
            f"SELECT at, span_s, gap, {', '.join(SERVER_VALUES)} FROM telemetry_server "
            "WHERE source = ? AND at >= ? AND at <= ? ORDER BY at", (source, lo, hi)).fetchall()
    return _series("server", rows, SERVER_VALUES, ())


def npu_series(source: str, since: datetime, until: datetime | None = None, *,
               home: Path | None = None) -> list[Series]:
    lo, hi = _range(since, until)
    with db.connect(home) as conn:
        gaps = _server_gaps(conn, source, lo, hi)
        rows = conn.execute(
            f"SELECT device, at, span_s, 0, {', '.join(NPU_VALUES)} FROM telemetry_npu "
            "WHERE source = ? AND at >= ? AND at <= ? ORDER BY device, at", (source, lo, hi)).fetchall()
    by_device: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_device.setdefault(int(row[0]), []).append(row[1:])
    return [_series(f"NPU {device}", points, NPU_VALUES, gaps)
            for device, points in sorted(by_device.items())]


def npu_sources(*, home: Path | None = None) -> list[str]:
    """Every source with NPU device rows, the most recently sampled first."""
    with db.connect(home) as conn:
        return [r[0] for r in conn.execute(
            "SELECT source FROM telemetry_npu GROUP BY source ORDER BY MAX(at) DESC")]


def change_markers(since: datetime, until: datetime | None = None, *,
                   home: Path | None = None) -> list[Marker]:
    """Loads, unloads, reloads, applies, rollbacks, creates and Triton exits / restarts from the
    audit log, oldest first."""
    entries = audit.query(since=since, home=home)
    return [Marker(e.at, e.action, e.model, e.result, e.who, e.headline)
            for e in reversed(entries)
            if e.action in MARKER_ACTIONS and (until is None or e.at <= until)]


def _range(since: datetime, until: datetime | None) -> tuple[float, float]:
    return since.timestamp(), (until.timestamp() if until else time.time() + 1.0)


def _server_gaps(conn: sqlite3.Connection, source: str, lo: float, hi: float) -> tuple[float, ...]:
    return tuple(r[0] for r in conn.execute(
        "SELECT at FROM telemetry_server WHERE source = ? AND gap = 1 AND at >= ? AND at <= ? ORDER BY at",
        (source, lo, hi)))


def _series(name: str, rows: Sequence[Sequence[Any]], columns: Sequence[str], source_gaps: Sequence[float],
            *, with_failures: bool = False) -> Series:
    """`rows` are (at, span_s, gap, *columns[, failures]) ascending. A gap row, a source gap
    between two rows, or a hole longer than the later window, each become one None point."""
    times: list[float] = []
    values: dict[str, list[float | None]] = {c: [] for c in columns}
    failures: list[Mapping[str, float]] = []
    spans: list[float] = []
    previous_at: float | None = None
    broken = True  # nothing drawn yet: a leading gap needs no break

    def add(at: float, row: Sequence[Any] | None) -> None:
        times.append(at)
        spans.append(0.0 if row is None else float(row[1]))
        for i, column in enumerate(columns):
            values[column].append(None if row is None else row[3 + i])
        if with_failures:
            failures.append(json.loads(row[3 + len(columns)] or "{}") if row is not None else {})

    for row in rows:
        at, span, gap = float(row[0]), float(row[1]), bool(row[2])
        between = [g for g in source_gaps if (previous_at is None or g > previous_at) and g < at]
        hole = previous_at is not None and at - span - previous_at > max(HOLE_TOLERANCE_S, 0.5 * span)
        if (gap or between or hole) and not broken:
            if gap:
                break_at = at
            elif between:
                break_at = between[0]
            else:
                break_at = (previous_at or at) + (at - span - (previous_at or at)) / 2
            add(break_at, None)
            broken = True
        previous_at = at
        if gap:
            continue
        add(at, row)
        broken = False
    return Series(name, tuple(_time(t) for t in times), {c: tuple(v) for c, v in values.items()},
                  tuple(failures), tuple(spans))


def _time(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, timezone.utc)


def window_since(minutes: float, now: datetime | None = None) -> datetime:
    """The start of a chart's time range `minutes` long, ending now."""
    return (now or datetime.now(timezone.utc)) - timedelta(minutes=minutes)
