"""NPU faults across a fleet: each member's faults on its node, joined with the models of the
servers on that node, as one report. Nothing on a member changes (a read-only member is fine:
its /metrics page and Triton's open endpoints are enough); `fleet_faults_now` records the
readings in the workspace history, as `geadmin.ops.npu.wiring` does for one host.

Each member is one Triton server; its node is its `node` label (geadmin.fleet.members: the
Kubernetes node, the Prometheus target's node), else the member's own name (a server whose
node no source told is a machine of its own). Two steps, as on one server:

1. `read_fleet_faults`: each member's fault sources (npu_ge's device errors on its /metrics),
   every fault carrying the member's node (`ChipFault.node`), as one reading per node; the face
   stores each (geadmin.telemetry.history.faults.record_reading) — recording is not a read. A
   reading clears the faults of its node's sources it read and no longer reports, so a node's
   members are read together, and a source counts as read only when every member on the node
   was read (a member that did not answer clears nothing on its node).
2. `fleet_fault_report`: per node, the map of every member on it (chips are the node's, so the
   rows of its servers add up) and the ensembles above the models; then `assess_faults` over
   every record with those maps.

`fleet_faults_now` does both, with the recording between: `geadmin npu faults --fleet` and the
Fleet page call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from geadmin.diagnose.fault_report import FaultSources, node_view
from geadmin.diagnose.impact import ensembles_above
from geadmin.diagnose.npu_faults import FaultReport, assess_faults
from geadmin.errors import GeAdminError
from geadmin.fleet import readonly
from geadmin.fleet.members import NODE, Member, member_metrics_url
from geadmin.telemetry.history.faults import FaultRecord, record_reading
from geadmin.telemetry.npu_map import MapRow, ModelMap
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.telemetry.sources.fault_reading import FaultReading, read_faults
from geadmin.telemetry.sources.fault_table import load_table
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.npu_faults import ChipFault
from geadmin.triton.client import TritonClient

ClientFor = Callable[[Member, float], TritonClient]


def node_of(member: Member) -> str:
    """The member's node label, else its name."""
    return member.labels.get(NODE, "") or member.name


def member_sources(member: Member, *, timeout_s: float) -> NpuSources:
    """Where a member's faults and placements are read: its Triton's /metrics (explicit: a
    member whose page does not answer is said)."""
    return NpuSources(triton_metrics_url=member_metrics_url(member), triton_metrics_explicit=True,
                      timeout_s=timeout_s, npu_smi="")


def read_fleet_faults(members: Sequence[Member], *, timeout_s: float,
                      unread: list[str] | None = None) -> list[FaultReading]:
    """One reading per node: its members' faults, the sources every one of them had read, and
    notes; a member that cannot be read is a note, and a line in `unread` when given."""
    by_node: dict[str, list[Member]] = {}
    for member in members:
        by_node.setdefault(node_of(member), []).append(member)
    readings = []
    for node, on_node in by_node.items():
        faults: list[ChipFault] = []
        notes: list[str] = []
        read: set[str] | None = None
        for member in on_node:
            try:
                found = read_faults(member_sources(member, timeout_s=timeout_s), node=node)
            except GeAdminError as exc:
                notes.append(f"{member.name} (node {node}): faults not read: {exc}")
                if unread is not None:
                    unread.append(f"{member.name} (node {node}): {exc}")
                read = set()
                continue
            faults += [replace(f, node=node) for f in found.faults]
            read = set(found.read) if read is None else read & set(found.read)
            notes += [f"{member.name} (node {node}): {note}" for note in found.notes]
        readings.append(FaultReading(tuple(faults), tuple(sorted(read or ())), tuple(notes), node))
    return readings


def fleet_fault_report(members: Sequence[Member], records: Sequence[FaultRecord], *, timeout_s: float,
                       table_override: str | None = None, notes: Sequence[str] = (),
                       client_for: ClientFor = readonly.client_for) -> FaultReport:
    """One report for the fleet: `records` (every node's) joined with each node's map."""
    table = load_table(table_override)
    rows: dict[str, list[MapRow]] = {}
    unplaced: dict[str, list[str]] = {}
    devices: dict[str, list[NpuDevice]] = {}
    ensembles: dict[str, set[str]] = {}
    said = list(notes)
    for member in members:
        node = node_of(member)
        client = client_for(member, timeout_s)
        try:
            sources = FaultSources(npu=member_sources(member, timeout_s=timeout_s), client=client, node=node,
                                   repository=member.repository)
            found, seen, view_notes = node_view(sources)
            said += [f"{member.name} (node {node}): {note}" for note in view_notes]
            rows.setdefault(node, []).extend(found.rows)
            unplaced.setdefault(node, []).extend(found.unplaced)
            devices.setdefault(node, []).extend(d for d in seen if d.id not in {x.id for x in devices[node]})
            models = sorted({r.model for r in found.rows})
            if models:
                for model, above in _ensembles(client, models, member, said).items():
                    ensembles.setdefault(model, set()).update(above)
        finally:
            client.close()
    maps = {node: ModelMap(tuple(sorted(found, key=lambda r: (r.device, r.model, r.version))),
                           tuple(sorted(set(unplaced.get(node, ())))))
            for node, found in rows.items()}
    return assess_faults(records, table, maps, ensembles={m: sorted(e) for m, e in ensembles.items()},
                         notes=said, devices=devices)


def _ensembles(client: TritonClient, models: Sequence[str], member: Member,
               said: list[str]) -> dict[str, tuple[str, ...]]:
    try:
        return ensembles_above(client, models, repository=member.repository)
    except GeAdminError as exc:
        said.append(f"{member.name}: the ensembles above its models are not known: {exc}")
        return {}


def fleet_faults_now(members: Sequence[Member], *, home: Path | None, timeout_s: float,
                     table_override: str | None = None, not_found: Sequence[str] = ()) -> FaultReport:
    """Read every member's faults, record them per node (first / last seen, cleared), report.
    `not_found`: discovery's problems (a source down, a member left out), which with the members
    not read make the report's `unjudged`."""
    unread = list(not_found)
    readings = read_fleet_faults(members, timeout_s=timeout_s, unread=unread)
    now_s = time.time()
    records = [r for reading in readings for r in record_reading(reading, home=home, now_s=now_s)]
    report = fleet_fault_report(members, records, timeout_s=timeout_s, table_override=table_override,
                                notes=[note for reading in readings for note in reading.notes])
    return replace(report, unjudged=tuple(unread))
