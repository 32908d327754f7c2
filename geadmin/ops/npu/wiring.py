"""Read, record, report: the one path from a host's fault sources to its FaultReport.

`geadmin npu faults`, `geadmin npu remedy`, the NPUs page and the sampler's fault watcher all
call `current_report`: it reads every fault source (npu-exporter, npu-smi or a saved output,
npu_ge's device errors on Triton's /metrics), records the reading in the workspace history so
first / last seen and cleared faults are kept (a saved npu-smi file is a ticket's past, not
this host's present: shown, never recorded), and joins the records with the model <-> NPU map
(geadmin.diagnose.fault_report, which only reads). Recording is a write, so it lives here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from geadmin.diagnose.fault_report import FaultSources, as_read, fault_report
from geadmin.diagnose.npu_faults import FaultReport
from geadmin.telemetry.history.faults import record_reading
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.telemetry.sources.fault_reading import read_faults
from geadmin.triton.client import TritonClient


@dataclass(frozen=True)
class HostFaultSources:
    """Where one host's faults and its model <-> NPU map are read."""

    client: TritonClient | None  # the server whose models run on the host's chips (map, configs)
    triton_metrics_url: str | None  # npu_ge's device errors and placements
    exporter_url: str | None = None  # npu-exporter's /metrics
    npu_smi: str | None = None  # the npu-smi binary, when on PATH (None: not read)
    npu_smi_file: str | None = None  # a saved npu-smi output instead
    table_override: str | None = None  # the operator's fault table override file (None: the setting)
    repository: Path | None = None  # the ensembles from disk (else Triton's live configs)
    metrics_explicit: bool = False  # the metrics URL was given: a Triton that does not answer is an error
    timeout_s: float = 5.0


def current_report(sources: HostFaultSources, now_s: float | None = None, *,
                   home: Path | None = None) -> FaultReport:
    """Read the host's faults, record them (first / last seen, cleared) and join them with the
    map. Raises what the readers raise for a source given explicitly (a TelemetryError) or a
    saved file that is not npu-smi output (an NpuSmiError); other failing sources are notes."""
    npu = NpuSources(exporter_url=sources.exporter_url, npu_smi=sources.npu_smi or "npu-smi",
                     triton_metrics_url=sources.triton_metrics_url,
                     triton_metrics_explicit=sources.metrics_explicit, timeout_s=sources.timeout_s)
    reading = read_faults(npu, npu_smi_file=sources.npu_smi_file,
                          which=lambda name: name if sources.npu_smi else None)
    now = time.time() if now_s is None else now_s
    records = (as_read(reading, now) if sources.npu_smi_file
               else record_reading(reading, home=home, now_s=now))
    report = fault_report(FaultSources(npu=npu, npu_smi_file=sources.npu_smi_file, client=sources.client,
                                       repository=sources.repository, home=home,
                                       table_override=sources.table_override),
                          records, notes=reading.notes)
    return replace(report, sources_read=reading.read)
