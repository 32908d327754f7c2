"""Models stuck LOADING or UNLOADING: since when each has been so, from its latest line in
Triton's log (Triton's API says a model is LOADING, never since when). A model moving longer
than STUCK_AFTER_S is stuck; without a log a one-shot check cannot tell stuck from slow, so
nothing is called stuck.

And requests stuck in a model: Triton's statistics count the requests each model has finished
(`finished_requests`); one that finishes none while requests wait is hung in its execute. A
client's timeout does not cancel a request in Triton, and Triton unloads a model only once the
requests it runs end, so probes, load tests and unloads all wait on such a model."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from geadmin.diagnose.health import Triage
from geadmin.domain import ModelState, format_duration
from geadmin.errors import GeAdminError
from geadmin.telemetry.history.watch import ProbeRecord
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource

STUCK_AFTER_S = 300.0  # LOADING / UNLOADING longer than this is stuck (geadmin up's load timeout)
# Triton unloads a model only once the requests it runs end (seen with a hung execute: UNLOADING
# for as long as the request runs); its statistics are no longer readable by then.
UNLOAD_HELD_FIX = ("Triton unloads a model only once the requests it runs end: one hung in its execute "
                   "holds the unload until Triton restarts (`geadmin stack restart triton`, or the Stack "
                   "page); a slow one ends on its own")
LOAD_HELD_FIX = "read Triton's log; a hung load is freed only by restarting Triton"

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


def finished_requests(client: TritonClient) -> dict[str, int]:
    """Each model's requests Triton has finished, answered or failed, over its versions (its
    statistics, which restart at a reload); {} when they cannot be read."""
    try:
        stats = client.model_statistics()
    except GeAdminError:
        return {}
    finished: dict[str, int] = {}
    for item in stats:
        counts = item.inference_stats
        finished[item.name] = finished.get(item.name, 0) + counts.success.count + counts.fail.count
    return finished


def stuck_fix(state: ModelState) -> str:
    return UNLOAD_HELD_FIX if state is ModelState.UNLOADING else LOAD_HELD_FIX


def unload_not_ended(model: str, waited_s: float, last_probe: ProbeRecord | None) -> str:
    """An accepted unload of `model` still UNLOADING after `waited_s`, in words; the model's
    latest probe, when it got no answer, is the evidence of a request hung in its execute."""
    evidence = ""
    if last_probe is not None and not last_probe.ok:
        sent = datetime.fromtimestamp(last_probe.at_s, timezone.utc)
        evidence = f" (geadmin's probe of it had no answer at {sent:%H:%M:%S} UTC)"
    return (f"unload of {model!r} was accepted, but it is still UNLOADING after {format_duration(waited_s)}"
            f"{evidence} — {UNLOAD_HELD_FIX}")
