"""Models stuck LOADING or UNLOADING: since when each has been so, from its latest line in
Triton's log (Triton's API says a model is LOADING, never since when). A model moving longer
than STUCK_AFTER_S is stuck; without a log a one-shot check cannot tell stuck from slow, so
nothing is called stuck."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from geadmin.diagnose.health import Triage
from geadmin.triton.logs import LogSource

STUCK_AFTER_S = 300.0  # LOADING / UNLOADING longer than this is stuck (geadmin up's load timeout)
_GLOG_TIME = re.compile(r"^[IWEV](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)")
_ISO_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


def logged_at(raw: str, now: datetime) -> datetime | None:
    """When Triton wrote a line (its clock is UTC; the default format has no year)."""
    if iso := _ISO_TIME.match(raw):
        return datetime.fromisoformat(iso[1]).replace(tzinfo=timezone.utc)
    glog = _GLOG_TIME.match(raw)
    if not glog:
        return None
    month, day, hour, minute, second = (int(part) for part in glog.groups())
    try:
        at = datetime(now.year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:
        return None
    return at.replace(year=now.year - 1) if at > now + timedelta(days=1) else at


def moving_for(found: Triage, log: LogSource | None, now: datetime) -> dict[str, float]:
    """Seconds each LOADING / UNLOADING model has been so, from its latest line in the log
    (None known without a log: a one-shot check cannot tell stuck from slow)."""
    if log is None or not found.changing:
        return {}
    lines = log.last_lines([m.name for m in found.changing])
    moving = {}
    for name, raw in lines.items():
        at = logged_at(raw, now)
        if at is not None:
            moving[name] = (now - at).total_seconds()
    return moving


def stuck_models(found: Triage, log: LogSource | None, now: datetime,
                 stuck_after_s: float = STUCK_AFTER_S) -> dict[str, float]:
    return {name: s for name, s in moving_for(found, log, now).items() if s >= stuck_after_s}
