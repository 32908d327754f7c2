"""Capacity of every member of a fleet: `capacity_report` per member, read only (a fleet is
never measured: a sweep runs on one server, `geadmin capacity MODEL --measure`). Each member
is read through the client a fleet poll uses (its key only when trusted,
geadmin.fleet.readonly), its recorded load from its own metrics URL's history (the sampler's,
or Prometheus's when GEADMIN_PROMETHEUS_URL is set), and a member that does not answer is a
row with the reason, never the end of the report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from geadmin.diagnose.capacity import CapacityReport
from geadmin.errors import GeAdminError, InvalidArgumentError
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.members import member_metrics_url
from geadmin.fleet.readonly import client_for
from geadmin.ops.capacity.report import CapacityOptions, capacity_report
from geadmin.telemetry.history.reader import HistoryReader, open_history


@dataclass(frozen=True)
class MemberCapacity:
    member: str
    url: str
    report: CapacityReport | None
    error: str = ""


def fleet_capacity(discovery: Discovery, *, model: str | None = None, options: CapacityOptions | None = None,
                   history: HistoryReader | None = None, home: Path | None = None, timeout_s: float = 5.0,
                   now: datetime | None = None) -> list[MemberCapacity]:
    options = options or CapacityOptions()
    if options.measure:
        raise InvalidArgumentError("a fleet is read, never measured: measure one server with "
                           "`geadmin capacity MODEL --measure --server NAME`")
    history = history or open_history(home)
    found = []
    for member in discovery.members:
        try:
            with client_for(member, timeout_s) as client:
                report = capacity_report(client, model=model, options=options, history=history,
                                         source=member_metrics_url(member), home=home, now=now)
            found.append(MemberCapacity(member.name, member.url, report))
        except GeAdminError as exc:
            found.append(MemberCapacity(member.name, member.url, None, str(exc).splitlines()[0]))
    return found
