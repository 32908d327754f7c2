"""The saturation rate the objective tuner measured (`geadmin tune MODEL --objective`): its
saved run's document (geadmin.ops.tune.results) keeps the winner's rate curve and
`saturation_rps`, the highest rate the winner held the objective at. It describes the live
model only while the live config runs the winner's instance count, so a run whose winner has
another count is not used (the report then reads the last capacity sweep, or says to measure)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from geadmin import db
from geadmin.diagnose.capacity import Saturation, SweepStep
from geadmin.domain import same_server
from geadmin.errors import GeAdminError
from geadmin.ops.tune.results import list_runs

KIND = "objective"  # the document's "kind" for an objective tuning run


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def from_tuner(model: str, server: str, *, live_instances: int | None, home: Path | None = None,
               max_age_s: float | None = None, now: datetime | None = None) -> Saturation | None:
    """The latest objective tuning run of `model` on `server` with a saturation rate, as a
    Saturation "measured at T (tune run N)"; None when there is none, it is older than
    `max_age_s`, or its winner's instance count is not the live one."""
    try:
        runs = list_runs(model, home=home)
    except GeAdminError:
        return None
    for run in runs:
        rate, best = _number(run.get("saturation_rps")), run.get("best")
        if run.get("kind") != KIND or not rate or rate <= 0 or not isinstance(best, dict):
            continue
        if not same_server(str(run.get("server", "")), server):
            continue
        try:
            at = db.parse_time(str(run["at"]))
            instances = int(best.get("instances") or 1)
        except (KeyError, ValueError, TypeError):
            continue
        if max_age_s is not None and ((now or datetime.now(timezone.utc)) - at).total_seconds() > max_age_s:
            return None
        if live_instances is not None and instances != live_instances:
            return None
        p99 = _number((run.get("objective") or {}).get("p99_ms")) or 0.0
        lower = " (a lower bound: every rate measured held)" if run.get("saturation_lower_bound") else ""
        curve = tuple(SweepStep(float(p.get("rate_rps") or 0.0), _number(p.get("throughput")),
                                _number(p.get("p99_ms")), None, bool(p.get("ok")))
                      for p in run.get("curve") or () if isinstance(p, dict))
        return Saturation(model, rate, instances, p99,
                          f"measured at {at:%Y-%m-%d %H:%M} UTC (tune run {run.get('id')}, the objective "
                          f"tuning's curve of its winner){lower}", at.isoformat(), curve)
    return None
