"""`npu-smi` text into `NpuDevice`s: the `info` table, `info watch`, and `info -t ...` keys.

Column widths change between driver versions and the columns between chips (FACTS.md), so
nothing here counts characters: the table is split on its `+` border lines and `|` cell
separators, each cell into whitespace-separated words (`3380 / 65536` is one value), and
each value is matched to the header word above it in the same cell. A column the header
does not name is ignored; one it names that the row lacks stays None. `info watch` is
matched the same way on its `Name(unit)` header; `-t usages|memory|temp|power|common`
output is `key : value` lines in blank-line separated blocks (one per chip).

Anything else — an error message, an empty page, random bytes — is an `NpuSmiParseError`
quoting what it got. Running the binary goes through one table (`RUN_ERRORS`) too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace

from geadmin.errors import NpuSmiError, NpuSmiParseError
from geadmin.telemetry.sources.npu import SOURCE_NPU_SMI, NpuDevice, NpuProcess

DEFAULT_TIMEOUT_S = 10.0
UNIT_BYTES = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
UNKNOWN = frozenset(("na", "n/a", "-", "--", ""))
Fields = dict[str, object]

# -- running npu-smi -------------------------------------------------------------------
RUN_ERRORS: tuple[tuple[type[BaseException], str], ...] = (  # first isinstance match wins
    (FileNotFoundError, "is not installed there (no Ascend driver on this host?)"),
    (PermissionError, "may not be run by this user (the driver's npu-smi needs root or HwHiAiUser)"),
    (subprocess.TimeoutExpired, "did not answer in time (the driver may be hung)"),
    (OSError, "could not be started"),
)


def run(binary: str, args: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """stdout of `binary args` (an argument list, no shell); a failure is an NpuSmiError."""
    command = " ".join([binary, *args])
    try:
        # its own process group, so a timeout ends npu-smi and anything it started
        process = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, errors="replace", start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = next(text for exc_type, text in RUN_ERRORS if isinstance(exc, exc_type))
        raise NpuSmiError(f"`{command}` {why} ({exc})") from exc
    if process.returncode != 0:
        said = _first_line(stderr) or _first_line(stdout) or "no output"
        raise NpuSmiError(f"`{command}` exited with status {process.returncode}: {said}")
    return stdout


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def read_devices(binary: str = "npu-smi", *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 details: bool = True) -> list[NpuDevice]:
    """`npu-smi info`, plus `npu-smi info -t usages -i N` per card for vector / cube figures.
    A card whose usages cannot be read keeps the table's figures (the rest stay None)."""
    devices = parse(run(binary, ["info"], timeout_s=timeout_s))
    if not details:
        return devices
    for npu_id in sorted({d.npu_id for d in devices if d.npu_id is not None}):
        try:
            blocks = parse_details(run(binary, ["info", "-t", "usages", "-i", str(npu_id)],
                                       timeout_s=timeout_s))
        except NpuSmiError:
            continue
        devices = [with_details(d, blocks) if d.npu_id == npu_id else d for d in devices]
    return devices


# -- any npu-smi text --------------------------------------------------------------------
def parse(text: str) -> list[NpuDevice]:
    """Devices from an `npu-smi info` table, an `info watch` capture, or `info -t ... -i N`
    key/value output that names its NPU ID."""
    lines = text.splitlines()
    if any(_is_row(line) for line in lines):
        return parse_info(text)
    if any(line.strip().startswith("NpuID(") for line in lines):
        return parse_watch(text)
    if any(":" in line for line in lines):
        return _devices_from_details(parse_details(text), text)
    raise NpuSmiParseError(f"not npu-smi output: {_quote(text)}")


# -- the `npu-smi info` table --------------------------------------------------------------
def parse_info(text: str) -> list[NpuDevice]:
    header: list[list[str]] | None = None
    chip_rows: list[Fields] = []
    processes: dict[tuple[int, int | None], list[NpuProcess]] = {}
    process_header: list[str] | None = None
    for group in _row_groups(text):
        first = group[0]
        if _is_header(first):
            if any(cell.lower().startswith("process") for cell in first):
                header, process_header = None, first
            else:
                header, process_header = group, None
            continue
        if header is not None:
            for start in range(0, len(group) - len(header) + 1, len(header)):
                row = _match(header, group[start:start + len(header)])
                if _int(row.get("npu")) is not None:
                    chip_rows.append(row)
        elif process_header is not None:
            for cells in group:
                _add_process(process_header, cells, processes)
    if not chip_rows:
        raise NpuSmiParseError(f"no device rows in this npu-smi info table: {_quote(text)}")
    return _devices(chip_rows, processes if process_header is not None else None)


def _row_groups(text: str) -> Iterable[list[list[str]]]:
    """Runs of `| ... |` rows between `+---+` border lines, each row as its stripped cells."""
    group: list[list[str]] = []
    for line in text.splitlines():
        if _is_row(line):
            group.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif group:
            yield group
            group = []
    if group:
        yield group


def _is_row(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 1 and stripped.startswith("|") and stripped.endswith("|")


def _is_header(cells: list[str]) -> bool:
    words = cells[0].split()
    return bool(words) and words[0].upper() == "NPU" and not any(w.isdigit() for w in words)


def _match(header: list[list[str]], rows: list[list[str]]) -> Fields:
    """{normalized header word: value word} over the rows of one chip."""
    found: Fields = {}
    for names_row, values_row in zip(header, rows, strict=False):
        for names_cell, values_cell in zip(names_row, values_row, strict=False):
            for name, value in zip(names_cell.split(), _values(values_cell), strict=False):
                key, unit = _key(name)
                found[key] = value
                if unit:
                    found[key + ":unit"] = unit
    return found


def _values(cell: str) -> list[str]:
    """Words of a cell with `a / b` joined into `a/b`."""
    out: list[str] = []
    for word in cell.split():
        if out and (word.startswith("/") or out[-1].endswith("/")):
            out[-1] += word
        else:
            out.append(word)
    return out


def _key(name: str) -> tuple[str, str]:
    """`HBM-Usage(MB)` -> ("hbmusage", "mb")."""
    base, _, unit = name.partition("(")
    return "".join(ch for ch in base.lower() if ch.isalnum()), unit.rstrip(")").strip().lower()


def _devices(rows: list[Fields], processes: dict[tuple[int, int | None], list[NpuProcess]] | None,
             ) -> list[NpuDevice]:
    single_chip = len({_int(r.get("npu")) for r in rows}) == len(rows)
    devices = []
    for index, row in enumerate(rows):
        npu_id, chip_id = _int(row.get("npu")), _int(row.get("chip"))
        device_id = _int(row.get("device"))
        if device_id is None:
            device_id = npu_id if single_chip else index
        memory_used, memory_total = _pair(row, "memoryusage")
        hbm_used, hbm_total = _pair(row, "hbmusage")
        held = None
        if processes is not None:  # the table lists every NPU: one it does not mention runs nothing
            held = tuple(processes.get((npu_id or 0, chip_id), []) +
                         (processes.get((npu_id or 0, None), []) if chip_id is not None else []))
        devices.append(NpuDevice(
            id=device_id if device_id is not None else index, source=SOURCE_NPU_SMI,
            npu_id=npu_id, chip_id=chip_id, chip_name=_text(row.get("name")),
            bus_id=_text(row.get("busid")), health=_text(row.get("health")),
            aicore_util_pct=_float(row.get("aicore")), hbm_used_bytes=hbm_used, hbm_total_bytes=hbm_total,
            memory_used_bytes=memory_used, memory_total_bytes=memory_total,
            temperature_c=_float(row.get("temp")), power_w=_float(row.get("power")), processes=held))
    return devices


def _add_process(header: list[str], cells: list[str],
                 found: dict[tuple[int, int | None], list[NpuProcess]]) -> None:
    if len(cells) == 1:  # "No running processes found in NPU 1"
        words = cells[0].split()
        if words and words[-1].isdigit() and "no running" in cells[0].lower():
            found.setdefault((int(words[-1]), None), [])
        return
    row: Fields = {}
    for names_cell, value_cell in zip(header, cells, strict=False):
        names = names_cell.split()
        if len(names) > 1 and names[0].lower() == "process":  # "Process id" is one column
            names = ["".join(names)]
        for name, value in zip(names, _values(value_cell) if len(names) > 1 else [value_cell],
                               strict=False):
            row[_key(name)[0]] = value
    npu_id, pid = _int(row.get("npu")), _int(row.get("processid"))
    if npu_id is None or pid is None:
        return
    memory = _float(row.get("processmemory"))
    key = (npu_id, _int(row.get("chip")))
    found.setdefault(key, []).append(NpuProcess(pid, _text(row.get("processname")),
                                                None if memory is None else int(memory * (1 << 20))))


# -- `npu-smi info watch` ------------------------------------------------------------------
_WATCH_FIELDS = {"pwr": "power_w", "temp": "temperature_c", "aicore": "aicore_util_pct",
                 "aicube": "cube_util_pct", "aivector": "vector_util_pct"}


def parse_watch(text: str) -> list[NpuDevice]:
    names: list[str] | None = None
    latest: dict[tuple[int, int | None], dict[str, str]] = {}
    for line in text.splitlines():
        if line.strip().startswith("NpuID("):
            names = [_key(part.strip() + ")")[0] for part in line.split(")") if part.strip()]
            continue
        words = line.split()
        if names is None or len(words) != len(names) or not words[0].isdigit():
            continue
        row = dict(zip(names, words, strict=True))
        npu_id = _int(row.get("npuid"))
        if npu_id is not None:
            latest[(npu_id, _int(row.get("chipid")))] = row  # a later sample replaces the earlier
    if not latest:
        raise NpuSmiParseError(f"no device rows in this npu-smi info watch output: {_quote(text)}")
    single_chip = len({npu for npu, _ in latest}) == len(latest)
    devices = []
    ordered = sorted(latest.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))
    for index, ((npu_id, chip_id), row) in enumerate(ordered):
        found = {field: _float(row.get(key)) for key, field in _WATCH_FIELDS.items()}
        devices.append(NpuDevice(id=npu_id if single_chip else index, source=SOURCE_NPU_SMI, npu_id=npu_id,
                                 chip_id=chip_id, **found))  # type: ignore[arg-type]
    return devices


# -- `npu-smi info -t usages|memory|temp|power|common -i N [-c M]` --------------------------
_DETAIL_FIELDS: dict[str, tuple[str, float]] = {  # normalized key -> (NpuDevice field, scale)
    "aicoreusagerate(%)": ("aicore_util_pct", 1.0),
    "aivectorusagerate(%)": ("vector_util_pct", 1.0),
    "vectorcoreusagerate(%)": ("vector_util_pct", 1.0),
    "aicubeusagerate(%)": ("cube_util_pct", 1.0),
    "hbmcapacity(mb)": ("hbm_total_bytes", 1 << 20),
    "ddrcapacity(mb)": ("memory_total_bytes", 1 << 20),
    "temperature(c)": ("temperature_c", 1.0),
    "nputemperature(c)": ("temperature_c", 1.0),
    "npureal-timepower(w)": ("power_w", 1.0),
}
_INT_FIELDS = frozenset(f.name for f in fields(NpuDevice) if f.name.endswith("_bytes"))


def parse_details(text: str) -> list[Fields]:
    """One dict per blank-line separated block: NpuDevice fields, plus `npu_id` / `chip_id`
    when the block names them. Blocks with no key we know are dropped."""
    blocks: list[Fields] = []
    current: Fields = {}
    seen_pairs = False
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, colon, value = line.partition(":")
        if not colon:
            continue
        seen_pairs = True
        name = "".join(key.lower().split())
        if name in ("npuid", "chipid"):
            if (number := _int(value.strip())) is not None:
                current[name.replace("id", "_id")] = number
        elif name in _DETAIL_FIELDS and (number_f := _float(value.strip())) is not None:
            field, scale = _DETAIL_FIELDS[name]
            current[field] = int(number_f * scale) if field in _INT_FIELDS else number_f * scale
    if not seen_pairs:
        raise NpuSmiParseError(f"not npu-smi `info -t` output (no `key : value` lines): {_quote(text)}")
    return blocks


def with_details(device: NpuDevice, blocks: list[Fields]) -> NpuDevice:
    """`device` with the fields it lacks filled from its chip's block of `parse_details`."""
    chips = [b for b in blocks if "chip_id" in b]
    mine = next((b for b in chips if b["chip_id"] == device.chip_id), None)
    if mine is None:
        chip_free = [b for b in blocks if "chip_id" not in b and "npu_id" not in b]
        mine = chip_free[0] if len(chip_free) == 1 and len(chips) <= 1 else None
    if mine is None:
        return device
    updates = {k: v for k, v in mine.items()
               if k not in ("npu_id", "chip_id") and getattr(device, k) is None}
    return replace(device, **updates)  # type: ignore[arg-type]


def _devices_from_details(blocks: list[Fields], text: str) -> list[NpuDevice]:
    npu_id = next((b["npu_id"] for b in blocks if "npu_id" in b), None)
    if not isinstance(npu_id, int):
        raise NpuSmiParseError("this npu-smi `info -t` output does not name its NPU ID (it came from "
                               f"`-c M`?); paste `npu-smi info` instead: {_quote(text)}")
    chips = [b for b in blocks if "chip_id" in b and len(b) > 1]
    if not chips:
        chips = [{"chip_id": 0, **{k: v for b in blocks for k, v in b.items() if k != "npu_id"}}]
    devices = []
    for index, block in enumerate(chips):
        chip_id = block["chip_id"]
        device = NpuDevice(id=npu_id if len(chips) == 1 else index, source=SOURCE_NPU_SMI,
                           npu_id=npu_id, chip_id=chip_id if isinstance(chip_id, int) else None)
        devices.append(with_details(device, [block]))
    return devices


# -- values --------------------------------------------------------------------------------
def _pair(row: Fields, key: str) -> tuple[int | None, int | None]:
    """`used/total` in the column's unit (MB by default) -> bytes."""
    text = row.get(key)
    if not isinstance(text, str) or "/" not in text:
        return None, None
    scale = UNIT_BYTES.get(str(row.get(key + ":unit", "mb")), 1 << 20)
    used, _, total = text.partition("/")
    used_f, total_f = _float(used), _float(total)
    return (None if used_f is None else int(used_f * scale),
            None if total_f is None else int(total_f * scale))


def _float(value: object) -> float | None:
    if not isinstance(value, str) or value.strip().lower() in UNKNOWN:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def _int(value: object) -> int | None:
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    # no id or count has 19 digits; int() refuses thousands of digits with a ValueError
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip().lower() not in UNKNOWN else None


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def _quote(text: str, limit: int = 120) -> str:
    first = _first_line(text)
    if not first:
        return "(empty)"
    return repr(first if len(first) <= limit else first[:limit] + "…")
