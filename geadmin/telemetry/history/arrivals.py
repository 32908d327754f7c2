"""Captured inter-arrival intervals of a model, kept in the workspace database.

A capture (Triton's trace files read by geadmin.telemetry.sources.triton_trace) is one row of
`arrival_captures`: the server, the model, the window it covered (epoch seconds), the number of
arrivals and their intervals in microseconds. `latest_capture` gives the newest capture of a
model that ended inside a window, for perf_analyzer's `--request-intervals` to replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from geadmin import db
from geadmin.errors import InvalidArgumentError

MAX_INTERVALS = 100_000
KEPT_PER_MODEL = 20  # older captures of a model are removed when a new one is recorded


@dataclass(frozen=True)
class ArrivalCapture:
    """One capture: `intervals_us` holds `count - 1` inter-arrival intervals in microseconds."""

    server: str
    model: str
    window_start_s: float
    window_end_s: float
    count: int
    intervals_us: tuple[int, ...]

    def describe(self) -> str:
        """Where the replayed load comes from, for notes and reports."""
        start = datetime.fromtimestamp(self.window_start_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        end = datetime.fromtimestamp(self.window_end_s, timezone.utc).strftime("%H:%M:%S UTC")
        return f"{self.count} recorded arrivals from {start}-{end} on {self.server}"


def record_capture(*, home: Path | None, server: str, model: str, window_start_s: float,
                   window_end_s: float, intervals_us: Sequence[int]) -> ArrivalCapture:
    """Store one capture (bounded: at most MAX_INTERVALS intervals, each a positive integer)."""
    if window_end_s < window_start_s:
        raise InvalidArgumentError(f"a capture window ends ({window_end_s}) before it starts "
                                   f"({window_start_s})")
    if len(intervals_us) > MAX_INTERVALS:
        raise InvalidArgumentError(f"{len(intervals_us)} intervals in one capture, over the bound "
                                   f"of {MAX_INTERVALS}")
    if any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in intervals_us):
        raise InvalidArgumentError("a capture's intervals must be positive whole microseconds")
    capture = ArrivalCapture(server, model, window_start_s, window_end_s,
                             len(intervals_us) + 1 if intervals_us else 0, tuple(intervals_us))
    with db.connect(home) as conn, db.transaction(conn):
        conn.execute("INSERT INTO arrival_captures (server, model, window_start, window_end, count, "
                     "intervals_us) VALUES (?, ?, ?, ?, ?, ?)",
                     (server, model, window_start_s, window_end_s, capture.count,
                      ",".join(str(v) for v in intervals_us)))
        conn.execute("DELETE FROM arrival_captures WHERE model = ? AND id NOT IN (SELECT id FROM "
                     "arrival_captures WHERE model = ? ORDER BY window_end DESC, id DESC LIMIT ?)",
                     (model, model, KEPT_PER_MODEL))
    return capture


def latest_capture(model: str, *, home: Path | None, since_s: float | None = None,
                   server: str | None = None, min_count: int = 2) -> ArrivalCapture | None:
    """The newest capture of `model` (of `server` when given) ending at or after `since_s`
    with at least `min_count` arrivals; None when there is none."""
    sql = ("SELECT server, model, window_start, window_end, count, intervals_us FROM arrival_captures "
           "WHERE model = ? AND count >= ?")
    params: list[object] = [model, min_count]
    if since_s is not None:
        sql += " AND window_end >= ?"
        params.append(since_s)
    if server is not None:
        sql += " AND server = ?"
        params.append(server)
    with db.connect(home) as conn:
        row = conn.execute(sql + " ORDER BY window_end DESC, id DESC LIMIT 1", params).fetchone()
    if row is None:
        return None
    intervals = tuple(int(v) for v in row[5].split(",") if v)
    return ArrivalCapture(row[0], row[1], float(row[2]), float(row[3]), int(row[4]), intervals)
