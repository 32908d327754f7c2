"""What a load test measured, and where it is kept.

`parse_csv` reads perf_analyzer's `-f FILE --verbose-csv` report (one row per concurrency or
request rate; times in microseconds) into frozen `BenchPoint`s in milliseconds. Runs live in
the workspace SQLite (`perf_runs`, `perf_points`: geadmin.db), so two of them can be
compared later: `compare(a, b)` gives, per load both measured, a's throughput and p99 over
b's — for "dynamic batching on" (a) vs "off" (b), a throughput ratio of 3.6 reads "3.6x".
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from geadmin import audit, db
from geadmin.errors import BenchBusyError, GeAdminError, PerfAnalyzerError

CONCURRENCY = "concurrency"
REQUEST_RATE = "request_rate"
MODES = (CONCURRENCY, REQUEST_RATE)
LOAD_COLUMNS = {"Concurrency": CONCURRENCY, "Request Rate": REQUEST_RATE}
# CSV column (verbose) -> BenchPoint field, in microseconds except throughput.
COLUMNS: dict[str, str] = {
    "Inferences/Second": "throughput_per_s",
    "Client Send": "client_send_ms",
    "Network+Server Send/Recv": "network_ms",
    "Server Queue": "queue_ms",
    "Server Compute Input": "compute_input_ms",
    "Server Compute Infer": "compute_infer_ms",
    "Server Compute Output": "compute_output_ms",
    "Client Recv": "client_recv_ms",
    "p50 latency": "p50_ms",
    "p90 latency": "p90_ms",
    "p95 latency": "p95_ms",
    "p99 latency": "p99_ms",
    "Avg latency": "avg_ms",
}
US_PER_MS = 1000.0


@dataclass(frozen=True)
class BenchPoint:
    """One measured load: a concurrency, or a request rate (requests/s)."""

    load: float
    throughput_per_s: float  # inferences per second
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    avg_ms: float
    client_send_ms: float
    client_recv_ms: float
    network_ms: float  # network and the server's own send/receive
    queue_ms: float
    compute_input_ms: float
    compute_infer_ms: float
    compute_output_ms: float
    # The share of requests perf_analyzer sent over 1 ms behind schedule at a request rate (its
    # stdout names it above 1 %): its host was busy, or every one of its threads waited on the
    # server. Then the rate offered was short of the rate asked.
    sent_late_pct: float = 0.0

    @property
    def compute_ms(self) -> float:
        return self.compute_input_ms + self.compute_infer_ms + self.compute_output_ms

    @property
    def client_ms(self) -> float:
        return self.client_send_ms + self.client_recv_ms


@dataclass(frozen=True)
class BenchRun:
    model: str
    server: str  # the Triton URL perf_analyzer drove
    mode: str  # concurrency or request_rate
    points: tuple[BenchPoint, ...]
    at: datetime
    who: str = ""
    label: str = ""
    settings: Mapping[str, Any] | None = None  # BenchSettings.record()
    id: int | None = None  # set once saved
    # Why perf_analyzer stopped before the last load (its error, with the next step); the
    # points are those measured before it. "" when every load was measured.
    cut_short: str = ""

    def title(self) -> str:
        label = f" ({self.label})" if self.label else ""
        when = self.at.strftime("%Y-%m-%d %H:%M")
        return f"#{self.id or '-'} {self.model}{label} {when} UTC"

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model, "server": self.server, "mode": self.mode,
                "at": db.format_time(self.at), "who": self.who, "label": self.label,
                "settings": dict(self.settings or {}), "cut_short": self.cut_short,
                "points": [asdict(p) | {"compute_ms": p.compute_ms} for p in self.points]}


@dataclass(frozen=True)
class PointRatio:
    load: float
    throughput_a: float
    throughput_b: float
    throughput_ratio: float  # a / b (nan when b measured nothing)
    p99_a_ms: float
    p99_b_ms: float
    p99_ratio: float  # a / b: below 1 means a answers faster


@dataclass(frozen=True)
class Comparison:
    a: BenchRun
    b: BenchRun
    rows: tuple[PointRatio, ...]  # loads both runs measured, in a's order

    def headline(self) -> str:
        """The best throughput ratio, e.g. "3.6x the throughput at concurrency 16 (p99 0.3x)"."""
        finite = [r for r in self.rows if math.isfinite(r.throughput_ratio)]
        if not finite:
            return "no load was measured by both runs"
        best = max(finite, key=lambda r: r.throughput_ratio)
        return (f"{best.throughput_ratio:.1f}x the throughput at {describe_load(self.a.mode, best.load)} "
                f"(p99 {best.p99_ratio:.2f}x)")


SENT_LATE_CAUSE = "its host was busy, or every thread it had waited on the server"


def describe_sent_late(point: BenchPoint) -> str:
    """Why a judged rate may have been offered short ("" when perf_analyzer kept the schedule)."""
    if not point.sent_late_pct:
        return ""
    return f"perf_analyzer sent {point.sent_late_pct:.3g} % of the requests late ({SENT_LATE_CAUSE})"


def sent_late_note(run: BenchRun) -> str:
    """One line naming each load where perf_analyzer sent requests late ("" when none)."""
    late = [p for p in run.points if p.sent_late_pct]
    if not late:
        return ""
    where = ", ".join(f"{p.sent_late_pct:.3g} % at {describe_load(run.mode, p.load)}" for p in late)
    return (f"perf_analyzer sent requests late ({where}): the rate offered was short of the rate asked — "
            f"{SENT_LATE_CAUSE} (give it more with --max-threads, or run it from a quieter host)")


def describe_load(mode: str, load: float) -> str:
    value = f"{load:g}"
    return f"concurrency {value}" if mode == CONCURRENCY else f"{value} requests/s"


# -- parsing -------------------------------------------------------------------------------
def parse_csv(text: str) -> tuple[str, tuple[BenchPoint, ...]]:
    """(mode, points) from perf_analyzer's verbose CSV report."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    load_column = next((c for c in header if c in LOAD_COLUMNS), None)
    missing = [c for c in COLUMNS if c not in header]
    if load_column is None or missing:
        raise PerfAnalyzerError(
            "perf_analyzer's CSV report lacks the columns "
            f"{', '.join(missing or ['Concurrency or Request Rate'])} (it has: {', '.join(header) or 'none'})"
            " — it must be written with -f FILE --verbose-csv by perf_analyzer 2.51")
    points = []
    for number, row in enumerate(reader, start=2):
        try:
            values = {name: float(row[column]) for column, name in COLUMNS.items()}
            load = float(row[load_column])
        except (TypeError, ValueError) as exc:
            raise PerfAnalyzerError(f"perf_analyzer's CSV report, line {number}: not a number in "
                                    f"{dict(row)}") from exc
        scaled = {k: (v if k == "throughput_per_s" else v / US_PER_MS) for k, v in values.items()}
        points.append(BenchPoint(load=load, **scaled))
    return LOAD_COLUMNS[load_column], tuple(points)


# -- comparing -----------------------------------------------------------------------------
def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def compare(run_a: BenchRun, run_b: BenchRun) -> Comparison:
    """Per load both runs measured: a's throughput and p99 latency over b's."""
    if run_a.mode != run_b.mode:
        raise PerfAnalyzerError(f"cannot compare a {run_a.mode} run with a {run_b.mode} run: "
                                "compare two runs of the same kind")
    theirs = {p.load: p for p in run_b.points}
    rows = []
    for mine in run_a.points:
        other = theirs.get(mine.load)
        if other is None:
            continue
        rows.append(PointRatio(mine.load, mine.throughput_per_s, other.throughput_per_s,
                               _ratio(mine.throughput_per_s, other.throughput_per_s),
                               mine.p99_ms, other.p99_ms, _ratio(mine.p99_ms, other.p99_ms)))
    return Comparison(run_a, run_b, tuple(rows))


# -- the workspace database ----------------------------------------------------------------
def save_run(run: BenchRun, home: Path | None = None) -> BenchRun:
    """Store `run` and its points in one transaction; the run with its new id."""
    with db.connect(home) as conn, db.transaction(conn):
        cursor = conn.execute(
            "INSERT INTO perf_runs (at, who, server, model, mode, label, settings, cut_short) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (db.format_time(run.at), run.who, run.server, run.model, run.mode, run.label,
             json.dumps(dict(run.settings or {}), sort_keys=True), run.cut_short))
        run_id = int(cursor.lastrowid or 0)
        conn.executemany(
            "INSERT INTO perf_points (run_id, ordinal, load, figures) VALUES (?, ?, ?, ?)",
            [(run_id, i, p.load, json.dumps(asdict(p))) for i, p in enumerate(run.points)])
    return replace(run, id=run_id)


AUDIT_ACTION = "load_test"


def audit_run(settings_record: Mapping[str, Any], model: str, server: str, who: str, run: BenchRun | None,
              error: BaseException | None, home: Path | None = None) -> str:
    """The audit row of one load test (who, model, server, loads, result); "" or why it could not
    be written (never raises: the run's outcome is what the caller reports)."""
    loads = ", ".join(f"{load:g}" for load in settings_record.get("loads", ()))
    what = f"load test of {model!r} on {server} ({settings_record.get('mode', '')} {loads})"
    if run is not None and run.cut_short:
        kept = f"cut short after {len(run.points)} point(s), kept as run #{run.id or '-'}"
        result, message = audit.Result.FAILED, f"{what}: {kept}: {run.cut_short}"
    elif run is not None:
        result, message = audit.Result.OK, f"{what}: {len(run.points)} point(s), run #{run.id or '-'}"
    elif isinstance(error, BenchBusyError):
        result, message = audit.Result.REFUSED, f"{what}: {error}"
    else:
        cause = str(error) if isinstance(error, GeAdminError) else f"cut short ({type(error).__name__})"
        result, message = audit.Result.FAILED, f"{what}: {cause}"
    actor = audit.Actor(who) if who else audit.Actor.os_user()
    try:
        audit.record(AUDIT_ACTION, model, result, actor=actor, server=server, message=message, home=home)
    except GeAdminError as exc:
        return f"the audit row could not be written: {exc}"
    return ""


def list_runs(home: Path | None = None, *, model: str | None = None, limit: int = 50) -> list[BenchRun]:
    """The latest runs first (with their points), of one model or of all."""
    query = "SELECT id FROM perf_runs"
    params: list[Any] = []
    if model:
        query += " WHERE model = ?"
        params.append(model)
    query += " ORDER BY at DESC, id DESC LIMIT ?"
    params.append(limit)
    with db.connect(home) as conn:
        ids = [int(row[0]) for row in conn.execute(query, params)]
        return [_load(conn, run_id) for run_id in ids]


def load_run(run_id: int, home: Path | None = None) -> BenchRun:
    with db.connect(home) as conn:
        return _load(conn, run_id)


def _load(conn: Any, run_id: int) -> BenchRun:
    row = conn.execute("SELECT at, who, server, model, mode, label, settings, cut_short FROM perf_runs "
                       "WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise PerfAnalyzerError(f"no load test #{run_id} in the workspace database: "
                                "`geadmin bench --list` shows the saved runs")
    at, who, server, model, mode, label, settings, cut_short = row
    names = {f.name for f in fields(BenchPoint)}
    points = tuple(
        BenchPoint(**{k: v for k, v in json.loads(figures).items() if k in names})
        for (figures,) in conn.execute("SELECT figures FROM perf_points WHERE run_id = ? "
                                       "ORDER BY ordinal", (run_id,)))
    return BenchRun(model, server, mode, points, db.parse_time(at), who, label,
                    json.loads(settings), run_id, cut_short)
