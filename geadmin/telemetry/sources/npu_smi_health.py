"""npu-smi's health of each chip: the `info` table's Health column and the fault codes of
`npu-smi info -t health -i NPU_ID -c CHIP_ID`.

`info -t health` prints `key : value` lines (the driver's documentation: "Health Status : OK",
"Error Code : NA", "Error Information : NA"); with faults, Error Code holds the driver's codes
in hex (one or several, separated by spaces or commas). The block does not say which chip it
is about: a saved capture names it either with `NPU ID` / `Chip ID` lines or with the command
line above the block (`npu-smi info -t health -i 0 -c 0`, as a terminal session shows it).
Which device ACL and npu_ge call that chip only the `info` table says (its Device column, or
its order), so a capture of health blocks needs the table beside them: without it, or naming a
chip the table lacks, it is an `NpuSmiParseError`, never a guessed device.
Health values (npu-smi's): OK, Warning (minor alarm), Alarm (major), Critical, UNKNOWN (the
device is absent or not started).

As in `geadmin.telemetry.sources.npu_smi`, nothing counts characters: lines are split on their
first colon, the table on its `|` cells. A capture with neither a table nor health lines is an
`NpuSmiParseError` quoting what it got.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from geadmin.errors import NpuSmiError, NpuSmiParseError
from geadmin.telemetry.sources import npu_smi
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.npu_smi_table import is_row, parse_info
from geadmin.telemetry.sources.npu_smi_values import UNKNOWN, quote, text_value

MAX_CODES_PER_CHIP = 64
MAX_HEALTH_CALLS = 64  # `-t health` runs per read: one per chip not OK
MAX_CODE = 0xFFFFFFFF


@dataclass(frozen=True)
class ChipHealthReport:
    """What npu-smi says about one chip's health."""

    device: int  # NpuDevice.id: the id ACL and npu_ge use
    health: str | None  # OK, Warning, Alarm, Critical, UNKNOWN; None: not said
    codes: tuple[int, ...] = ()
    information: str = ""  # the Error Information line, when it says something


def parse(text: str, notes: list[str] | None = None) -> list[ChipHealthReport]:
    """The chips' health in npu-smi text: an `info` table, `info -t health` blocks, or both."""
    lines = text.splitlines()
    devices = parse_info(text) if any(is_row(line) for line in lines) else []
    blocks = list(_health_blocks(lines))
    if not devices and not blocks:
        raise NpuSmiParseError("no chip health in this npu-smi output (expected `npu-smi info` or "
                               f"`npu-smi info -t health -i N -c M`): {quote(text)}")
    ids = {(d.npu_id, d.chip_id if d.chip_id is not None else 0): d.id for d in devices}
    reports: dict[int, ChipHealthReport] = {d.id: ChipHealthReport(d.id, d.health) for d in devices}
    for block in blocks:
        npu_id, chip_id = block.get("npu_id"), block.get("chip_id", 0)
        if not isinstance(npu_id, int) or not isinstance(chip_id, int):
            raise NpuSmiParseError("this npu-smi `info -t health` output does not say which chip it is "
                                   "about: keep the command line (`npu-smi info -t health -i 0 -c 0`) or "
                                   f"`NPU ID` / `Chip ID` lines above each block: {quote(text)}")
        device = ids.get((npu_id, chip_id))
        if device is None:
            raise NpuSmiParseError(_unmapped(npu_id, chip_id, bool(devices)))
        codes = _codes(str(block.get("errorcode", "")), device, notes)
        reports[device] = ChipHealthReport(device, text_value(block.get("healthstatus")) or
                                           (reports[device].health if device in reports else None),
                                           codes, text_value(block.get("errorinformation")) or "")
    return [reports[device] for device in sorted(reports)]


def read(binary: str, *, timeout_s: float = npu_smi.DEFAULT_TIMEOUT_S,
         notes: list[str] | None = None) -> list[ChipHealthReport]:
    """`npu-smi info`, then `info -t health -i N -c M` for each chip whose Health is not OK
    (its codes). A chip whose health details cannot be read keeps the table's Health."""
    devices = parse_info(npu_smi.run(binary, ["info"], timeout_s=timeout_s))
    reports = []
    calls = 0
    for device in devices:
        report = ChipHealthReport(device.id, device.health)
        if _needs_details(device) and calls < MAX_HEALTH_CALLS:
            calls += 1
            args = ["info", "-t", "health", "-i", str(device.npu_id), "-c", str(device.chip_id or 0)]
            try:
                blocks = list(_health_blocks(npu_smi.run(binary, args, timeout_s=timeout_s).splitlines()))
            except NpuSmiError as exc:
                if notes is not None:
                    notes.append(f"npu-smi health of chip {device.id}: {exc}")
                blocks = []
            if blocks:
                block = blocks[0]
                report = ChipHealthReport(device.id, text_value(block.get("healthstatus")) or device.health,
                                          _codes(str(block.get("errorcode", "")), device.id, notes),
                                          text_value(block.get("errorinformation")) or "")
        reports.append(report)
    return reports


def _needs_details(device: NpuDevice) -> bool:
    return device.npu_id is not None and (device.health or "").upper() != "OK"


def _health_blocks(lines: Iterable[str]) -> Iterable[dict[str, object]]:
    """One dict per run of `key : value` lines that holds a Health Status or Error Code;
    `npu_id` / `chip_id` from its NPU ID / Chip ID lines or the command line before it."""
    context: dict[str, object] = {}
    block: dict[str, object] = {}
    for line in [*lines, ""]:
        command = _command_ids(line)
        if command is not None or not line.strip():
            if "healthstatus" in block or "errorcode" in block:
                yield {**context, **block}
            block = {}
            if command is not None:
                context = command
            continue
        key, colon, value = line.partition(":")
        if not colon:
            continue
        name = "".join(key.lower().split())
        if name in ("npuid", "chipid"):
            if (number := _small_number(value)) is not None:
                block[name.replace("id", "_id")] = number
        elif name in ("healthstatus", "errorcode", "errorinformation"):
            block[name] = value.strip()


def _command_ids(line: str) -> dict[str, object] | None:
    """{npu_id, chip_id} of an `npu-smi info -t health -i N [-c M]` command line, else None."""
    if "npu-smi" not in line or "health" not in line:
        return None
    try:
        words = shlex.split(line[line.index("npu-smi"):])
    except ValueError:
        return None
    found: dict[str, object] = {}
    for flag, key in (("-i", "npu_id"), ("-c", "chip_id")):
        if flag in words[:-1] and (number := _small_number(words[words.index(flag) + 1])) is not None:
            found[key] = number
    return found if "npu_id" in found else None


def _codes(text: str, device: int, notes: list[str] | None) -> tuple[int, ...]:
    """Hex codes of an Error Code value ("NA", "80E21007", "0x80E21007 80E18005", "a,b")."""
    found: list[int] = []
    for word in text.replace(",", " ").replace(";", " ").split():
        if word.lower() in UNKNOWN:
            continue
        digits = word[2:] if word[:2] in ("0x", "0X") else word
        if 0 < len(digits) <= 8 and all(ch in "0123456789abcdefABCDEF" for ch in digits):
            code = int(digits, 16)
            if code and code not in found and len(found) < MAX_CODES_PER_CHIP:
                found.append(code)
        elif notes is not None and len(notes) < 20:
            notes.append(f"npu-smi Error Code of chip {device}: {word[:40]!r} is not a hex fault code; "
                         "left out")
    return tuple(found)


def _unmapped(npu_id: int, chip_id: int, has_table: bool) -> str:
    """Why a health block's chip has no device id. Only the `npu-smi info` table says which device
    ACL and npu_ge call NPU N chip M: a capture of some chips cannot count them (a 310P Duo's NPU 1
    chip 0 is device 0), and a guess would drain and reset a healthy chip."""
    if has_table:
        return (f"NPU {npu_id} chip {chip_id} of an `npu-smi info -t health` block is not in this capture's "
                "`npu-smi info` table: save the table and the health output of one host together")
    return (f"this capture has `npu-smi info -t health` output for NPU {npu_id} chip {chip_id} but no "
            "`npu-smi info` table, and only the table says which device ACL and npu_ge call it: save both "
            "in one file (`{ npu-smi info; npu-smi info -t health -i N -c M; } > FILE`)")


def _small_number(text: str) -> int | None:
    """An NPU or chip number (up to 6 digits): a longer run of digits is not one (and int()
    refuses strings of thousands of digits)."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None
