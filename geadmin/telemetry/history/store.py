"""Telemetry history read back: the sampler's rows in the workspace database as chart series.

The rows are written by geadmin.telemetry.history.record into three tables of `geadmin.db`
(migration "telemetry samples"): `telemetry_model` (per model version: the derived rates,
averages, request quantiles, pending requests, failures by reason), `telemetry_server`
(Triton's CPU and memory) and `telemetry_npu` (per device, when a source has devices). Every
row is a window `[at - span_s, at]` (epoch seconds) of one metrics `source` (the /metrics URL
sampled); the column names below are the series' names too (geadmin.telemetry.history.prometheus
answers the same reads with the same names).

Gaps are stored, not guessed (a `gap = 1` row when Triton did not answer or a model's counters
were reset). The reads turn a gap row, and any hole between one window's end and the next
one's start, into a point whose values are all None — plotly breaks the line there — so a
restart is drawn as a gap, never a spike.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from geadmin import audit, db
from geadmin.domain import format_duration

# Two windows further apart than this (beyond the later one's own length) have a hole between them.
HOLE_TOLERANCE_S = 1.0

MODEL_VALUES = ("inferences_per_s", "requests_per_s", "failures_per_s", "executions_per_s",
                "avg_batch_size", "avg_request_ms", "avg_queue_ms", "avg_compute_input_ms",
                "avg_compute_infer_ms", "avg_compute_output_ms", "p50_ms", "p90_ms", "p99_ms",
                "pending_requests")
# The per-second rates among them: a longer window weighs more when windows are averaged.
RATE_VALUES = ("inferences_per_s", "requests_per_s", "failures_per_s", "executions_per_s")
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


QUIET_SAMPLES = 5  # samples missed in a row before the history is called stale (at least a minute)


def silence(overview: Overview, now: datetime, interval_s: float) -> str:
    """Why the charts end early: no sample for more than QUIET_SAMPLES intervals (at least a
    minute), as when the sampler stopped with `geadmin up`; "" while samples come."""
    if overview.last_at is None:
        return ""
    quiet_s = (now - overview.last_at).total_seconds()
    if quiet_s <= max(60.0, QUIET_SAMPLES * interval_s):
        return ""
    return (f"no sample since {overview.last_at:%H:%M:%S} UTC ({format_duration(quiet_s)} ago): nothing "
            "records this history now (the sampler stops with `geadmin up`; for another Triton run "
            "`geadmin sampler`) — the charts end there, and are not live")


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
