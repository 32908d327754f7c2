"""NPU faults as the sources report them now: the driver's 32-bit fault codes per chip.

CONTRACT (lead, start of round): the types below are fixed; helper `faults-core` implements
the readers. Other helpers code against the types.

Three sources, the same ones `geadmin.telemetry.sources.detect` reads for devices:

1. npu-exporter: `npu_chip_info_error_code{id}` (the code as a decimal number, 0 = none), the
   numbered `npu_chip_info_error_code_N` series of exporters that report several codes,
   `npu_chip_info_health_status` (1 healthy, 0 unhealthy), link / network status where present;
2. `npu-smi` text (a saved file as with `--npu-smi-file`): per-chip health and error codes;
3. npu_ge on Triton's /metrics: `npu_ge_device_errors_total{device,code}` — ACL errors of a
   failed execute that mean the device or its memory is bad, counted per device.

A chip reported unhealthy with no code is a ChipFault with `code=None`: never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from geadmin.telemetry.sources.detect import NpuSources

SOURCE_EXPORTER = "npu-exporter"
SOURCE_NPU_SMI = "npu-smi"
SOURCE_NPU_GE = "npu_ge"


@dataclass(frozen=True)
class ChipFault:
    """One fault code on one chip, as one source reports it at one read."""

    chip: int  # the device id ACL and npu_ge use (NpuDevice.id)
    code: int | None  # the 32-bit fault code; None: the chip is reported unhealthy without one
    source: str  # SOURCE_*
    node: str = ""  # the host ("" for this one); a fleet sets the member's node label
    healthy: bool | None = None  # the chip's health as the source says it (None: not said)
    detail: str = ""  # what the source said besides the code (npu_ge: the ACL error and count)

    @property
    def code_hex(self) -> str:
        """The driver's code as `0x%08X`; npu_ge's ACL error codes are shown as `ACL <n>`."""
        if self.code is None:
            return "none"
        return f"ACL {self.code}" if self.source == SOURCE_NPU_GE else f"0x{self.code:08X}"

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.node, self.chip, self.code)


@dataclass(frozen=True)
class FaultReading:
    """One read of every fault source: what they report now, which answered, what failed."""

    faults: tuple[ChipFault, ...] = ()
    read: tuple[str, ...] = ()  # the sources that answered (a source not read clears nothing)
    notes: tuple[str, ...] = ()  # sources that could not be read, and why
    node: str = ""  # the host the reading is of ("" for this one)


def read_faults(sources: NpuSources, *, npu_smi_file: str | None = None, node: str = "") -> FaultReading:
    """Every fault source this host has (SEAM for faults-impact, which codes against it)."""
    raise NotImplementedError  # faults-core
