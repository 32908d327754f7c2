"""Fault records over time: first and last seen, still present or cleared (workspace SQLite).

CONTRACT (lead, start of round): the type below is fixed; helper `faults-core` implements the
store (a migration appended in geadmin/migrations.py) and its functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.telemetry.sources.npu_faults import ChipFault, FaultReading


@dataclass(frozen=True)
class FaultRecord:
    """A ChipFault with its history: what every view shows."""

    fault: ChipFault
    first_seen_s: float  # unix time
    last_seen_s: float
    present: bool  # False: the last read of its source no longer reported it (cleared)


def record_reading(reading: FaultReading, *, home: Path | None, now_s: float) -> list[FaultRecord]:
    """Store one reading (SEAM for faults-impact, which codes against it)."""
    raise NotImplementedError  # faults-core


def fault_records(*, home: Path | None, since_s: float | None = None, node: str | None = None,
                  present_only: bool = False) -> list[FaultRecord]:
    """The stored records (SEAM for faults-impact, which codes against it; faults-core's store
    replaces this body: until then nothing is stored, so nothing is returned and the verdict's
    npu-fault rule stays silent instead of failing every verdict)."""
    return []  # faults-core
