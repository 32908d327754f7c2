"""Gathers what `assess_faults` needs for one server: READS ONLY.

The fault records are either given (the face that has just read the sources and stored the
reading with `geadmin.telemetry.history.faults.record_reading`, as `geadmin npu faults` does)
or read from the workspace history (`fault_records`, as the verdict does): recording is the
face's step, never this module's. Around them: the fault table (with the operator's override),
the server's NPUs (npu-exporter, npu-smi or a saved npu-smi output, with npu_ge's placements
from Triton's /metrics), the model <-> NPU map (placements first, then the loaded configs'
device_ids) and the ensembles above each model. A source that cannot be read is a note of the
report, never an error: the faults are shown with what is known.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from geadmin.diagnose.impact import ensembles_above
from geadmin.diagnose.npu_faults import FaultReport, assess_faults
from geadmin.errors import GeAdminError, TelemetryError
from geadmin.telemetry import npu_map
from geadmin.telemetry.history.faults import FaultRecord, fault_records
from geadmin.telemetry.npu_map import ModelMap
from geadmin.telemetry.sources import npu_smi
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.fault_reading import FaultReading, read_npu_smi_file
from geadmin.telemetry.sources.fault_table import load_table
from geadmin.telemetry.sources.npu import NpuDevice, with_models
from geadmin.telemetry.sources.scrape import scrape
from geadmin.triton.client import TritonClient


@dataclass(frozen=True)
class FaultSources:
    """Where one server's fault report reads from."""

    npu: NpuSources = field(default_factory=NpuSources)  # exporter, npu-smi, Triton's /metrics
    npu_smi_file: str | None = None  # a saved npu-smi output instead of the live sources
    client: TritonClient | None = None  # Triton: the loaded configs (device_ids), the ensembles
    repository: Path | None = None  # the ensembles from disk (else Triton's live configs)
    home: Path | None = None  # the workspace whose fault history is read
    node: str = ""  # the server's node ("" for this host; a fleet member's node label)
    table_override: str | None = None  # the operator's fault table override file
    since_s: float | None = None  # history: only records seen since (unix time)


def fault_report(sources: FaultSources, records: Sequence[FaultRecord] | None = None, *,
                 notes: Sequence[str] = ()) -> FaultReport:
    """The report for one server. `records`: the faults just read and recorded by the caller;
    None reads them from the workspace history (present or cleared, of `sources.node`).
    A malformed override file raises its GeAdminError (the operator's input)."""
    table = load_table(sources.table_override)
    if records is None:
        records = fault_records(home=sources.home, since_s=sources.since_s, node=sources.node)
    found, devices, said = node_view(sources)
    ensembles: dict[str, tuple[str, ...]] = {}
    hit = sorted({row.model for row in found.rows})
    if sources.client is not None and hit and any(r.present for r in records):
        try:
            ensembles = ensembles_above(sources.client, hit, repository=sources.repository)
        except GeAdminError as exc:
            said.append(f"the ensembles above the models are not known: {exc}")
    return assess_faults(records, table, {sources.node: found}, ensembles=ensembles,
                         notes=[*notes, *said], devices={sources.node: devices})


def as_read(reading: FaultReading, now_s: float) -> list[FaultRecord]:
    """A reading as records seen once, now, without the history: what a saved npu-smi output
    says (a file from a ticket is not this host's present, so it is not recorded)."""
    return [FaultRecord(fault, now_s, now_s, True) for fault in reading.faults]


def node_view(sources: FaultSources) -> tuple[ModelMap, tuple[NpuDevice, ...], list[str]]:
    """The server's model map, its NPUs, and notes about what could not be read."""
    said: list[str] = []
    devices: list[NpuDevice] = []
    try:
        devices = _devices(sources)
    except TelemetryError as exc:
        said.append(f"NPUs not read: {exc}")
    placed = {p.model for d in devices for p in d.models or ()}
    configs = {}
    if sources.client is not None:
        try:
            configs = npu_map.loaded_npu_ge_configs(sources.client, skip=placed)
        except GeAdminError as exc:
            said.append(f"the loaded configs (device_ids) are not known: {exc}")
    found = npu_map.model_map(devices, configs)
    if found.unplaced:
        said.append(f"not on the map (npu_ge configs without device_ids): {', '.join(found.unplaced)}")
    return found, tuple(devices), said


def _devices(sources: FaultSources) -> list[NpuDevice]:
    if sources.npu_smi_file is None:
        return list(detect(sources.npu).devices)
    devices = npu_smi.parse(read_npu_smi_file(sources.npu_smi_file))
    url = sources.npu.triton_metrics_url
    if url:  # the placements of npu_ge's instances, when Triton says (else from the configs)
        with contextlib.suppress(TelemetryError):
            devices = with_models(devices, scrape(url, timeout_s=sources.npu.timeout_s))
    return devices
