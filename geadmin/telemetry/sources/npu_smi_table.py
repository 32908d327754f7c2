"""The `npu-smi info` table and `npu-smi info watch` output into `NpuDevice`s.

Column widths change between driver versions and the columns between chips (FACTS.md), so
nothing here counts characters: the table is split on its `+` border lines and `|` cell
separators, each cell into whitespace-separated words (`3380 / 65536` is one value), and
each value is matched to the header word above it in the same cell. A column the header
does not name is ignored; one it names that the row lacks stays None. The process table
under it gives each chip the processes holding it. `info watch` is matched the same way on
its `Name(unit)` header. Output without a device row is an `NpuSmiParseError`.
"""

from __future__ import annotations

from collections.abc import Iterable

from geadmin.errors import NpuSmiParseError
from geadmin.telemetry.sources.npu import SOURCE_NPU_SMI, NpuDevice, NpuProcess
from geadmin.telemetry.sources.npu_smi_values import Fields, float_value, int_value, quote, text_value

UNIT_BYTES = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}


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
                if int_value(row.get("npu")) is not None:
                    chip_rows.append(row)
        elif process_header is not None:
            for cells in group:
                _add_process(process_header, cells, processes)
    if not chip_rows:
        raise NpuSmiParseError(f"no device rows in this npu-smi info table: {quote(text)}")
    return _devices(chip_rows, processes if process_header is not None else None)


def _row_groups(text: str) -> Iterable[list[list[str]]]:
    """Runs of `| ... |` rows between `+---+` border lines, each row as its stripped cells."""
    group: list[list[str]] = []
    for line in text.splitlines():
        if is_row(line):
            group.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif group:
            yield group
            group = []
    if group:
        yield group


def is_row(line: str) -> bool:
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
    single_chip = len({int_value(r.get("npu")) for r in rows}) == len(rows)
    devices = []
    for index, row in enumerate(rows):
        npu_id, chip_id = int_value(row.get("npu")), int_value(row.get("chip"))
        device_id = int_value(row.get("device"))
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
            npu_id=npu_id, chip_id=chip_id, chip_name=text_value(row.get("name")),
            bus_id=text_value(row.get("busid")), health=text_value(row.get("health")),
            aicore_util_pct=float_value(row.get("aicore")),
            hbm_used_bytes=hbm_used, hbm_total_bytes=hbm_total,
            memory_used_bytes=memory_used, memory_total_bytes=memory_total,
            temperature_c=float_value(row.get("temp")), power_w=float_value(row.get("power")),
            processes=held))
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
    npu_id, pid = int_value(row.get("npu")), int_value(row.get("processid"))
    if npu_id is None or pid is None:
        return
    memory = float_value(row.get("processmemory"))
    key = (npu_id, int_value(row.get("chip")))
    found.setdefault(key, []).append(NpuProcess(pid, text_value(row.get("processname")),
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
        npu_id = int_value(row.get("npuid"))
        if npu_id is not None:
            latest[(npu_id, int_value(row.get("chipid")))] = row  # a later sample replaces the earlier
    if not latest:
        raise NpuSmiParseError(f"no device rows in this npu-smi info watch output: {quote(text)}")
    single_chip = len({npu for npu, _ in latest}) == len(latest)
    devices = []
    ordered = sorted(latest.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))
    for index, ((npu_id, chip_id), row) in enumerate(ordered):
        found = {field: float_value(row.get(key)) for key, field in _WATCH_FIELDS.items()}
        devices.append(NpuDevice(id=npu_id if single_chip else index, source=SOURCE_NPU_SMI, npu_id=npu_id,
                                 chip_id=chip_id, **found))  # type: ignore[arg-type]
    return devices




def _pair(row: Fields, key: str) -> tuple[int | None, int | None]:
    """`used/total` in the column's unit (MB by default) -> bytes."""
    text = row.get(key)
    if not isinstance(text, str) or "/" not in text:
        return None, None
    scale = UNIT_BYTES.get(str(row.get(key + ":unit", "mb")), 1 << 20)
    used, _, total = text.partition("/")
    used_f, total_f = float_value(used), float_value(total)
    return (None if used_f is None else int(used_f * scale),
            None if total_f is None else int(total_f * scale))
