"""Per-model objectives: a p99 latency target and an error budget (the failed fraction of
requests a model may have), kept in the workspace database.

The guarded, audited change is `geadmin.ops.objectives.set_objective`; this module stores
and reads them. The alert rules read them through geadmin's metrics
(`geadmin_objective_p99_seconds`, `geadmin_objective_error_budget_ratio`); the Metrics page
draws the p99 target beside the latency chart and shows the burn rate: the failed fraction
over a window divided by the budget (1 spends the budget exactly over the objective's
period; 14 over 1 h is the classic page-now rate).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from geadmin import db
from geadmin.telemetry.derive import ModelWindow
from geadmin.telemetry.history import store as history

BURN_WINDOWS_H = (1.0, 6.0)


@dataclass(frozen=True)
class Objective:
    model: str
    p99_ms: float | None = None
    error_budget: float | None = None  # a fraction: 0.001 is 0.1 % of requests may fail
    set_at: str = ""
    who: str = ""

    def describe(self) -> str:
        parts = []
        if self.p99_ms is not None:
            parts.append(f"p99 at most {self.p99_ms:g} ms")
        if self.error_budget is not None:
            parts.append(f"error budget {self.error_budget * 100:g} %")
        return ", ".join(parts) or "no objective"


def objectives(*, home: Path | None = None) -> dict[str, Objective]:
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM objectives ORDER BY model").fetchall()
    return {r["model"]: Objective(r["model"], r["p99_ms"], r["error_budget"], r["set_at"], r["who"])
            for r in rows}


def store(objective: Objective, who: str, *, home: Path | None = None) -> Objective:
    """Write (or, with neither figure, remove) `objective`; returns what is stored."""
    stored = Objective(objective.model, objective.p99_ms, objective.error_budget,
                       db.format_time(db.utc_now()), who)
    with db.connect(home) as conn, db.transaction(conn):
        conn.row_factory = sqlite3.Row
        if objective.p99_ms is None and objective.error_budget is None:
            conn.execute("DELETE FROM objectives WHERE model = ?", (objective.model,))
        else:
            conn.execute("INSERT OR REPLACE INTO objectives VALUES (?, ?, ?, ?, ?)",
                         (stored.model, stored.p99_ms, stored.error_budget, stored.set_at, who))
    return stored


@dataclass(frozen=True)
class Burn:
    window_h: float
    requests: float  # requests seen in the window (from the sampler's history)
    failed: float
    rate: float | None  # failed fraction / budget; None without requests or budget


def burn_rates(source: str, model: str, budget: float | None, *, now: datetime | None = None,
               home: Path | None = None) -> list[Burn]:
    """The error-budget burn rate over each of BURN_WINDOWS_H, from the recorded history of
    `source` (a Triton metrics URL)."""
    now = now or datetime.now(timezone.utc)
    burns = []
    for hours in BURN_WINDOWS_H:
        series = history.model_series(source, now - timedelta(hours=hours), now, [model], home=home)
        requests = failed = 0.0  # requests_per_s counts failed requests too (telemetry.derive)
        for one in series:
            for i, span in enumerate(one.spans_s):
                requests += (one.values["requests_per_s"][i] or 0.0) * span
                failed += (one.values["failures_per_s"][i] or 0.0) * span
        rate = (failed / requests) / budget if budget and requests > 0 else None
        burns.append(Burn(hours, requests, failed, rate))
    return burns


def latency_note(window: ModelWindow | None, objective: Objective | None) -> str:
    """One line for the triage card: the window's p99 (Triton's summary; else the average,
    said as such) against the model's p99 objective; "" without an objective or a figure."""
    if objective is None or objective.p99_ms is None or window is None:
        return ""
    quantiles = window.quantiles_for("request")
    figure, what = (quantiles.p99_ms, "p99") if quantiles and quantiles.p99_ms is not None \
        else (window.avg_request_ms, "average latency")
    if figure is None:
        return ""
    verdict = "over" if figure > objective.p99_ms else "within"
    return f"{what} {figure:.1f} ms is {verdict} its p99 objective of {objective.p99_ms:g} ms"
