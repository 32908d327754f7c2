"""The one place the fault faces call into the fault readers, the fault history and the impact:
the sampler's watcher (`host_fault_report`) and `geadmin npu remedy` (`current_report`).

MERGE (lead): both bodies are the calls below, made against the other helpers' functions
(`faults-core`: `read_faults`, `record_reading`, `fault_records`, `load_table`;
`faults-impact`: `fault_report`, `assess_faults`); until then they raise TelemetryError,
so nothing wires the watcher (RecordingOptions.fault_watch is False), and the CLI and the NPUs
page say the faults were not read (a TelemetryError naming this module).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.diagnose.npu_faults import FaultReport
from geadmin.errors import TelemetryError
from geadmin.triton.client import TritonClient

NOT_WIRED = "the NPU fault readers are not wired into this build yet (geadmin.ops.npu.wiring)"


@dataclass(frozen=True)
class HostFaultSources:
    """Where one host's faults and its model <-> NPU map are read (the sampler's sources)."""

    client: TritonClient  # the server whose models run on the host's chips (map, configs)
    triton_metrics_url: str  # npu_ge's device errors and placements
    exporter_url: str | None = None  # npu-exporter's /metrics
    npu_smi: str | None = None  # the npu-smi binary, when on PATH
    npu_smi_file: str | None = None  # a saved npu-smi output instead
    table_override: str | None = None  # the operator's fault table override file
    timeout_s: float = 5.0


def host_fault_report(sources: HostFaultSources, now_s: float, *, home: Path | None = None) -> FaultReport:
    """Read the host's faults, record them (first / last seen, cleared) and join them with the map.

    At merge:
        reading = read_faults(<sources>)                        # faults-core
        record_reading(reading, home=home, now_s=now_s)         # faults-core
        records = fault_records(home=home, present_only=True)   # faults-core
        maps = {"": model_map(devices, loaded_npu_ge_configs(sources.client))}
        return assess_faults(records, load_table(sources.table_override), maps,
                             ensembles=<member -> ensembles>, notes=reading.notes)
    (or faults-impact's `fault_report(FaultSources(...))` when it records the reading too)."""
    raise TelemetryError(f"{NOT_WIRED}: faults-core's read_faults / record_reading and faults-impact's "
                         "assess_faults")


def current_report(sources: HostFaultSources, *, home: Path | None = None) -> FaultReport:
    """What `geadmin npu remedy` plans from: faults-impact's `fault_report(FaultSources(...))`."""
    raise TelemetryError(f"{NOT_WIRED}: faults-impact's fault_report")
