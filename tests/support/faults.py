"""Fault values for the NPU-fault tests: records, a small table, model maps.

`FaultTableDouble` is a test double of the shipped fault table (geadmin.telemetry.sources.
fault_table): it classifies from its own entries, and a code it does not list is UNKNOWN, as
`FaultTable.classify` is documented to do. It keeps the pure tests of the impact and the plan
independent of the shipped table's contents.
"""

from __future__ import annotations

from dataclasses import dataclass

from geadmin.telemetry.history.faults import FaultRecord
from geadmin.telemetry.npu_map import FROM_CONFIG, MapRow, ModelMap
from geadmin.telemetry.sources.fault_table import FaultClass, FaultLevel, FaultTable
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.npu_faults import SOURCE_EXPORTER, ChipFault

GIB = 1 << 30
HBM_ECC = 0x80E18402  # RestartNPU in the double's table
AICORE_RETRY = 0x80C98000  # RestartBusiness
SENSOR_NOTE = 0x80CB8009  # NotHandleFault
LINK_FLAP = 0x81078603  # SubHealthFault
CHIP_OUT = 0x80E01801  # SeparateNPU
UNLISTED = 0x8FFFFFFF  # in no table

_LEVELS = {HBM_ECC: (FaultLevel.RESTART_NPU, "HBM multi-bit ECC error"),
           AICORE_RETRY: (FaultLevel.RESTART_BUSINESS, "AI Core error"),
           SENSOR_NOTE: (FaultLevel.NOT_HANDLE, "sensor notice"),
           LINK_FLAP: (FaultLevel.SUBHEALTH, "link flapping"),
           CHIP_OUT: (FaultLevel.SEPARATE_NPU, "chip to isolate")}


def fault_class(code: int | None, level: FaultLevel, meaning: str) -> FaultClass:
    return FaultClass(code, level, meaning, f"models on the chip: {level.value}", f"act on {level.value}",
                      "test table")


@dataclass(frozen=True)
class FaultTableDouble(FaultTable):
    """Classifies from `entries`; an unlisted code (or None) is UNKNOWN."""

    def classify(self, code: int | None, source: str | None = None) -> FaultClass:
        if code is not None and code in self.entries:
            return self.entries[code]
        return fault_class(code, FaultLevel.UNKNOWN, "unknown code")


def table() -> FaultTableDouble:
    entries = {code: fault_class(code, level, meaning) for code, (level, meaning) in _LEVELS.items()}
    return FaultTableDouble(entries, source="test table")


def record(chip: int, code: int | None, *, node: str = "", healthy: bool | None = None, present: bool = True,
           source: str = SOURCE_EXPORTER) -> FaultRecord:
    return FaultRecord(ChipFault(chip, code, source, node, healthy), 1000.0, 2000.0, present)


def model_map(**placed: dict[int, int]) -> ModelMap:
    """model=dict(device -> instances)."""
    rows = [MapRow(device, model, "", n, FROM_CONFIG)
            for model, where in placed.items() for device, n in where.items()]
    return ModelMap(tuple(sorted(rows, key=lambda r: (r.device, r.model))))


def npu(id_: int, npu_id: int, chip_id: int, used_gib: float = 10, total_gib: float = 32) -> NpuDevice:
    return NpuDevice(id=id_, source="npu-exporter", npu_id=npu_id, chip_id=chip_id,
                     hbm_used_bytes=int(used_gib * GIB), hbm_total_bytes=int(total_gib * GIB))
