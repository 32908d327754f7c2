"""Fault code -> level -> what it means for inference -> the action: Huawei's tables as data.

The built-in table is package data (`npu_fault_table.json`, next to this module): the driver's
chip fault codes graded by MindCluster's default fault configuration (the Ascend Device
Plugin's `faultCode.json`), the levels' meanings from MindCluster's and ModelArts' documents,
and a section for the CANN runtime (ACL) errors npu_ge counts per device. It names its
sources and its date; docs/npu-faults.md cites them.

An operator's override file has the shape of MindCluster's `faultCode.json` (what goes into
its `mindx-dl-fault-config` ConfigMap): `{"NotHandleFaultCodes": ["80E21007"], ...}`, level
key -> list of 8-hex-digit codes. It is merged on top: a code it lists takes that level. A
malformed file is a `FaultTableError` naming the file and the entry, never a half-read table.

A code no table lists is `FaultLevel.UNKNOWN`, never dropped: the chip's health decides
whether it counts (the impact's rule, geadmin.diagnose.npu_faults).
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from geadmin import settings
from geadmin.errors import FaultTableError
from geadmin.telemetry.sources.npu_faults import SOURCE_NPU_GE

TABLE_RESOURCE = "npu_fault_table.json"
MAX_OVERRIDE_BYTES = 1 << 20  # a faultCode.json is ~12 KB
MAX_OVERRIDE_CODES = 20_000
MAX_CODE = 0xFFFFFFFF


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


# The keys of MindCluster's faultCode.json, to our levels. PreSeparateNPU (no new work goes to
# the chip; it is separated when its work ends) has no level of its own here: for a server
# that keeps its instances on the chip it asks what SeparateNPU asks.
OVERRIDE_KEYS: dict[str, FaultLevel] = {
    "NotHandleFaultCodes": FaultLevel.NOT_HANDLE,
    "SubHealthFaultCodes": FaultLevel.SUBHEALTH,
    "RestartRequestCodes": FaultLevel.RESTART_REQUEST,
    "RestartBusinessCodes": FaultLevel.RESTART_BUSINESS,
    "FreeRestartNPUCodes": FaultLevel.FREE_RESTART_NPU,
    "RestartNPUCodes": FaultLevel.RESTART_NPU,
    "SeparateNPUCodes": FaultLevel.SEPARATE_NPU,
    "PreSeparateNPUCodes": FaultLevel.SEPARATE_NPU,
}
# faultCustomization.json's keys (frequency, duration, grace times): MindCluster keeps them in
# the same ConfigMap. They change how MindCluster counts repeats, not a code's level: ignored.
IGNORED_KEYS = frozenset(("GraceTolerance", "FaultFrequency", "FaultDuration"))


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
    # ADDED (faults-core): each level's meaning / for_inference / action, UNKNOWN included,
    # and the codes of the npu_ge (ACL) section, so a source can be asked about its own codes.
    levels: Mapping[FaultLevel, FaultClass] = field(default_factory=dict)
    acl_codes: frozenset[int] = frozenset()

    def classify(self, code: int | None, source: str | None = None) -> FaultClass:
        """The code's class; a code no table lists is FaultLevel.UNKNOWN, never dropped.
        `source` (a ChipFault's): npu_ge's codes are ACL errors, looked up in their own section;
        every other source's are the driver's."""
        entry = self.entries.get(code) if code is not None else None
        if entry is not None and source is not None and (source == SOURCE_NPU_GE) != (code in self.acl_codes):
            entry = None
        if entry is not None:
            return entry
        unknown = self.levels.get(FaultLevel.UNKNOWN)
        if code is None:
            meaning = "reported unhealthy (or degraded) without a fault code"
        else:
            meaning = f"a code no table lists ({_shown(code, source)})"
        return FaultClass(code, FaultLevel.UNKNOWN, meaning,
                          unknown.for_inference if unknown else "counts when the chip is reported unhealthy",
                          unknown.action if unknown else "read the chip's health", self.source)


def load_table(override_path: str | os.PathLike[str] | None = None) -> FaultTable:
    """The built-in table with the operator's override file (if any) merged on top.
    A malformed override is a specific GeAdminError naming the file and the bad entry.

    `override_path` None: the file GEADMIN_NPU_FAULT_TABLE names (none when unset); "": none."""
    if override_path is None:
        override_path = settings.NPU_FAULT_TABLE.get()
    table = builtin_table()
    if not override_path:
        return table
    return merge_override(table, Path(override_path))


@lru_cache(maxsize=1)
def builtin_table() -> FaultTable:
    """The table shipped in the package (read once)."""
    text = resources.files("geadmin.telemetry.sources").joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    return parse_table(json.loads(text))


def parse_table(document: Mapping[str, Any]) -> FaultTable:
    """A FaultTable from the built-in table's JSON (see npu_fault_table.json)."""
    sources: Mapping[str, Mapping[str, str]] = document["sources"]
    date = str(document["date"])
    about = f"built-in table of {date}: " + "; ".join(s["where"] for s in sources.values())
    levels: dict[FaultLevel, FaultClass] = {}
    for name, text in document["levels"].items():
        level = FaultLevel(name)
        levels[level] = FaultClass(None, level, text["meaning"], text["for_inference"], text["action"],
                                   f"built-in table ({date})")
    entries: dict[int, FaultClass] = {}
    acl: set[int] = set()
    for section in document["sections"]:
        cited = f"built-in table ({sources[section['source']]['name']}, {date})"
        meanings: Mapping[str, str] = section.get("meanings", {})
        for level_name, codes in section.get("codes", {}).items():
            for text_code in codes:
                code = int(text_code, 16)
                entries[code] = _entry(levels[FaultLevel(level_name)], code, meanings.get(text_code), cited)
        for item in section.get("entries", ()):
            code = int(item["code"])
            meaning = f"{item['name']}: {item['meaning']}"
            entries[code] = _entry(levels[FaultLevel(item["level"])], code, meaning, cited)
            acl.add(code)
    return FaultTable(MappingProxyType(entries), about, "", MappingProxyType(levels), frozenset(acl))


def merge_override(table: FaultTable, path: Path) -> FaultTable:
    """`table` with the codes of the override file at `path` taking the levels it gives."""
    shown = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_OVERRIDE_BYTES + 1)
    except OSError as exc:
        raise FaultTableError(f"cannot read the NPU fault table override {shown}: {exc.strerror or exc}",
                              path=shown) from exc
    if len(raw) > MAX_OVERRIDE_BYTES:
        raise FaultTableError(f"the NPU fault table override {shown} is over {MAX_OVERRIDE_BYTES} bytes: "
                              "not a fault level file", path=shown)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FaultTableError(f"the NPU fault table override {shown} is not JSON: {exc}", path=shown) from exc
    levels = _override_levels(document, shown)
    entries = dict(table.entries)
    for code, level in levels.items():
        known = table.entries.get(code)
        # a code's own meaning goes with it to its new level; a meaning that only named its old
        # level ("... (SeparateNPU)") would contradict the new one, so the new level's is used
        own = known is not None and code not in table.acl_codes and known.meaning != _entry(
            table.levels[known.level], code, None, "").meaning
        meaning = known.meaning if own and known is not None else None
        entries[code] = _entry(table.levels[level], code, meaning, f"override {shown}")
    return FaultTable(MappingProxyType(entries), table.source, shown, table.levels,
                      table.acl_codes - set(levels))


def _override_levels(document: object, shown: str) -> dict[int, FaultLevel]:
    if not isinstance(document, dict):
        raise FaultTableError(f"the NPU fault table override {shown} must be a JSON object of level -> "
                              f"codes (like MindCluster's faultCode.json), got {type(document).__name__}",
                              path=shown)
    found: dict[int, FaultLevel] = {}
    count = 0
    for key, codes in document.items():
        if key in IGNORED_KEYS:
            continue
        if key not in OVERRIDE_KEYS:
            raise FaultTableError(f"{shown}: unknown level key {_clip(key)!r}; expected one of "
                                  f"{', '.join(OVERRIDE_KEYS)}", path=shown)
        if not isinstance(codes, list):
            raise FaultTableError(f"{shown}: {key} must be a list of codes, got {type(codes).__name__}",
                                  path=shown)
        count += len(codes)
        if count > MAX_OVERRIDE_CODES:
            raise FaultTableError(f"{shown}: more than {MAX_OVERRIDE_CODES} codes", path=shown)
        for position, text in enumerate(codes):
            code = _override_code(text)
            if code is None:
                raise FaultTableError(f"{shown}: {key}[{position}] = {_clip(text)!r} is not a fault code "
                                      "(8 hex digits, e.g. \"80E21007\")", path=shown)
            level = OVERRIDE_KEYS[key]
            if code in found and found[code] != level:  # listed twice: the graver level holds
                level = max(found[code], level, key=_SEVERITY.index)
            found[code] = level
    return found


_SEVERITY = list(FaultLevel)


def _override_code(text: object) -> int | None:
    if not isinstance(text, str):
        return None
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    if len(digits) != 8 or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
        return None
    return int(digits, 16)


def _entry(level: FaultClass, code: int, meaning: str | None, source: str) -> FaultClass:
    return FaultClass(code, level.level, meaning or f"{level.meaning} ({level.level.value})",
                      level.for_inference, level.action, source)


def _shown(code: int, source: str | None) -> str:
    if source == SOURCE_NPU_GE:
        return f"ACL {code}"
    return f"0x{code:08X}" if 0 <= code <= MAX_CODE else str(code)


def _clip(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"
