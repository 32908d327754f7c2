"""`npu-smi info -t usages|memory|temp|power|common -i N [-c M]` output: `key : value` lines
in blank-line separated blocks (one per chip), into NpuDevice fields.

`parse_details` reads the blocks (keys we do not know are dropped); `with_details` fills the
fields a device from the table lacks (vector and cube usage, capacities) from its chip's
block; `devices_from_details` makes devices of blocks alone when the output names its NPU ID.
Output without a `key : value` line is an `NpuSmiParseError`.
"""

from __future__ import annotations

from dataclasses import fields, replace

from geadmin.errors import NpuSmiParseError
from geadmin.telemetry.sources.npu import SOURCE_NPU_SMI, NpuDevice
from geadmin.telemetry.sources.npu_smi_values import Fields, float_value, int_value, quote

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
            if (number := int_value(value.strip())) is not None:
                current[name.replace("id", "_id")] = number
        elif name in _DETAIL_FIELDS and (number_f := float_value(value.strip())) is not None:
            field, scale = _DETAIL_FIELDS[name]
            current[field] = int(number_f * scale) if field in _INT_FIELDS else number_f * scale
    if not seen_pairs:
        raise NpuSmiParseError(f"not npu-smi `info -t` output (no `key : value` lines): {quote(text)}")
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


def devices_from_details(blocks: list[Fields], text: str) -> list[NpuDevice]:
    npu_id = next((b["npu_id"] for b in blocks if "npu_id" in b), None)
    if not isinstance(npu_id, int):
        raise NpuSmiParseError("this npu-smi `info -t` output does not name its NPU ID (it came from "
                               f"`-c M`?); paste `npu-smi info` instead: {quote(text)}")
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
