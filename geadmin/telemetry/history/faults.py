"""Fault records over time: first and last seen, still present or cleared (workspace SQLite).

CONTRACT (lead, start of round): the type below is fixed; helper `faults-core` implements the
store (a migration appended in geadmin/migrations.py) and its functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from geadmin.telemetry.sources.npu_faults import ChipFault


@dataclass(frozen=True)
class FaultRecord:
    """A ChipFault with its history: what every view shows."""

    fault: ChipFault
    first_seen_s: float  # unix time
    last_seen_s: float
    present: bool  # False: the last read of its source no longer reported it (cleared)
