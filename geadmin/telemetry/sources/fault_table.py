"""Fault code -> level -> what it means for inference -> the action: Huawei's tables as data.

CONTRACT (lead, start of round): the types below are fixed; helper `faults-core` implements
`load_table` and ships the table (package data, with its source pages and date) and the
operator override (the same shape as MindCluster's fault customization file) merged on top.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class FaultLevel(str, enum.Enum):
    """MindCluster's fault handling levels, mildest first; UNKNOWN: a code no table lists."""

    NOT_HANDLE = "NotHandleFault"
    SUBHEALTH = "SubHealthFault"
    RESTART_REQUEST = "RestartRequest"
    RESTART_BUSINESS = "RestartBusiness"
    FREE_RESTART_NPU = "FreeRestartNPU"
    RESTART_NPU = "RestartNPU"
    SEPARATE_NPU = "SeparateNPU"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FaultClass:
    """What the table says about one code."""

    code: int | None
    level: FaultLevel
    meaning: str  # what the fault is ("HBM multi-bit ECC error")
    for_inference: str  # what it means for models served on the chip
    action: str  # the level's action, in a line
    source: str  # "built-in table (<source>, <date>)" or the override file's path


@dataclass(frozen=True)
class FaultTable:
    entries: Mapping[int, FaultClass] = field(default_factory=dict)
    source: str = ""  # where the built-in table comes from, and its date
    override: str = ""  # the override file merged on top ("" when none)

    def classify(self, code: int | None, source: str | None = None) -> FaultClass:
        """The code's class; a code no table lists is FaultLevel.UNKNOWN, never dropped.
        `source` (a ChipFault's): npu_ge's codes are ACL errors, looked up in their own section;
        every other source's are the driver's."""
        raise NotImplementedError  # faults-core


def load_table(override_path: str | None = None) -> FaultTable:
    """The built-in table with the operator's override file (if any) merged on top.
    A malformed override is a specific GeAdminError naming the file and the bad entry."""
    raise NotImplementedError  # faults-core
