"""Ascend NPUs, one interface over three sources: the value types and the Prometheus readers.

`NpuDevice` is what every source gives: a field is None when the source does not know it,
never 0. The sources, in the order `geadmin.telemetry.sources.detect.detect` tries them:

1. npu-exporter (MindCluster) `/metrics`: `npu_chip_info_*` families by `id` (FACTS.md);
2. `npu-smi` on PATH: the `npu-smi info` table, plus `-t usages` per card for the vector
   and cube figures (`geadmin.telemetry.sources.npu_smi` parses them);
3. the npu_ge backend's metrics on Triton's `/metrics`: `npu_ge_device_utilization`,
   `npu_ge_hbm_used_bytes`, `npu_ge_hbm_total_bytes` by `device`, and
   `npu_ge_instance_device{model,version,instance,device}` — which models hold a device.
   When Triton publishes the placements, they are added to the devices of sources 1 and 2.

This module holds the value types and the readers of Prometheus pages; `npu_smi` reads
npu-smi's text; `sources.detect` picks the source this host has.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from geadmin.errors import NpuSourceError
from geadmin.telemetry.sources.scrape import Sample, Scrape

MIB = 1 << 20
SOURCE_EXPORTER = "npu-exporter"
SOURCE_NPU_SMI = "npu-smi"
SOURCE_TRITON = "triton"


@dataclass(frozen=True)
class NpuProcess:
    pid: int
    name: str | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class NpuPlacement:
    """A model instance the npu_ge backend runs on a device."""

    model: str
    version: str
    instance: str


@dataclass(frozen=True)
class NpuDevice:
    """One NPU chip. `id` is the device id ACL and npu_ge use (npu-smi's Device column, the
    exporter's `id`, the backend's `device`); `npu_id`/`chip_id` are npu-smi's card and chip
    numbers (`npu-smi info -t ... -i NPU_ID -c CHIP_ID`). When npu-smi prints no Device
    column and a card has several chips, `id` is the chip's position in the listing (the order
    the driver numbers logical devices in). HBM is the 910 parts' device memory;
    `memory_*` is the DDR column (the 310P's device memory; 0 / 0 on a 910B)."""

    id: int
    source: str
    npu_id: int | None = None
    chip_id: int | None = None
    chip_name: str | None = None
    bus_id: str | None = None
    health: str | None = None  # OK, Warning, Alarm, Critical, UNKNOWN (npu-smi); OK / Unhealthy
    aicore_util_pct: float | None = None
    vector_util_pct: float | None = None
    cube_util_pct: float | None = None
    hbm_used_bytes: int | None = None
    hbm_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    processes: tuple[NpuProcess, ...] | None = None  # () : known to be none
    models: tuple[NpuPlacement, ...] | None = None  # from npu_ge_instance_device

    @property
    def device_memory(self) -> tuple[int | None, int | None]:
        """(used, total) bytes of the device's own memory: HBM when it has some, else DDR."""
        if self.hbm_total_bytes:
            return self.hbm_used_bytes, self.hbm_total_bytes
        if self.memory_total_bytes:
            return self.memory_used_bytes, self.memory_total_bytes
        return self.hbm_used_bytes, self.hbm_total_bytes


@dataclass(frozen=True)
class NpuReport:
    devices: tuple[NpuDevice, ...]
    source: str  # the source that answered; "" when none has devices
    summary: str  # one line: "8 NPUs (npu-smi)" or the calm no-NPU line
    notes: tuple[str, ...] = ()  # sources that failed before the one that answered


# -- npu-exporter ----------------------------------------------------------------------
_EXPORTER_FIELDS: dict[str, tuple[str, float]] = {  # family -> (NpuDevice field, scale)
    "npu_chip_info_utilization": ("aicore_util_pct", 1.0),
    "npu_chip_info_vector_utilization": ("vector_util_pct", 1.0),
    "npu_chip_info_cube_utilization": ("cube_util_pct", 1.0),
    "npu_chip_info_hbm_used_memory": ("hbm_used_bytes", MIB),
    "npu_chip_info_hbm_total_memory": ("hbm_total_bytes", MIB),
    "npu_chip_info_used_memory": ("memory_used_bytes", MIB),
    "npu_chip_info_total_memory": ("memory_total_bytes", MIB),
    "npu_chip_info_temperature": ("temperature_c", 1.0),
    "npu_chip_info_power": ("power_w", 1.0),
}
_BYTES_FIELDS = frozenset(("hbm_used_bytes", "hbm_total_bytes", "memory_used_bytes", "memory_total_bytes"))


def devices_from_exporter(page: Scrape) -> list[NpuDevice]:
    """The chips npu-exporter reports; a page without `npu_chip_info_*` is an NpuSourceError."""
    fields: dict[int, dict[str, object]] = {}
    processes: dict[int, list[NpuProcess]] = {}
    for sample in page.samples:
        if not sample.name.startswith("npu_chip_info_") or (device := _int_label(sample, "id")) is None:
            continue
        values = fields.setdefault(device, {})
        name = sample.label("model_name") or (sample.label("name") if sample.name == "npu_chip_info_name"
                                               else None)
        if name:
            values.setdefault("chip_name", name)
        if sample.name in _EXPORTER_FIELDS and math.isfinite(sample.value):
            field, scale = _EXPORTER_FIELDS[sample.name]
            value = sample.value * scale
            values[field] = int(value) if field in _BYTES_FIELDS else value
        elif sample.name == "npu_chip_info_health_status":
            values["health"] = "OK" if sample.value == 1 else "Unhealthy"
        elif sample.name == "npu_chip_info_process_info" and (pid := _int_label(sample, "process_id")):
            memory = int(sample.value * MIB) if math.isfinite(sample.value) else None
            processes.setdefault(device, []).append(NpuProcess(pid, sample.label("container_name") or None,
                                                               memory))
        elif sample.name == "npu_chip_info_process_info_num" and sample.value == 0:
            processes.setdefault(device, [])
    if not fields:
        raise NpuSourceError(f"npu-exporter at {page.url or 'the page'} publishes no npu_chip_info_* "
                             "metrics — is the URL the exporter's /metrics (port 8082)?", url=page.url)
    return [NpuDevice(id=device, source=SOURCE_EXPORTER,
                      processes=tuple(processes[device]) if device in processes else None,
                      **values)  # type: ignore[arg-type]
            for device, values in sorted(fields.items())]


# -- the npu_ge backend, on Triton's /metrics -------------------------------------------
NPU_GE_FAMILIES = ("npu_ge_device_utilization", "npu_ge_hbm_used_bytes", "npu_ge_hbm_total_bytes",
                   "npu_ge_instance_device")


def placements(page: Scrape) -> dict[int, tuple[NpuPlacement, ...]]:
    """{device: the model instances npu_ge runs on it} from `npu_ge_instance_device` == 1."""
    found: dict[int, list[NpuPlacement]] = {}
    for sample in page.find("npu_ge_instance_device"):
        device = _int_label(sample, "device")
        if device is None or sample.value != 1:
            continue
        found.setdefault(device, []).append(NpuPlacement(sample.label("model") or "",
                                                         sample.label("version") or "",
                                                         sample.label("instance") or ""))
    return {device: tuple(sorted(p, key=lambda x: (x.model, x.version, x.instance)))
            for device, p in found.items()}


def devices_from_triton(page: Scrape) -> list[NpuDevice]:
    """The devices npu_ge publishes on Triton's /metrics ([] when it publishes none)."""
    values: dict[int, dict[str, object]] = {}
    for family, field in (("npu_ge_device_utilization", "aicore_util_pct"),
                          ("npu_ge_hbm_used_bytes", "hbm_used_bytes"),
                          ("npu_ge_hbm_total_bytes", "hbm_total_bytes")):
        for sample in page.find(family):
            device = _int_label(sample, "device")
            if device is None or not math.isfinite(sample.value):
                continue
            entry = values.setdefault(device, {})
            entry[field] = int(sample.value) if field.endswith("_bytes") else sample.value
            if field == "aicore_util_pct":  # the backend reads ACL's cube utilization
                entry["cube_util_pct"] = sample.value
    held = placements(page)
    return [NpuDevice(id=device, source=SOURCE_TRITON, models=held.get(device, ()),
                      **values.get(device, {}))  # type: ignore[arg-type]
            for device in sorted(set(values) | set(held))]


def with_models(devices: Iterable[NpuDevice], page: Scrape) -> list[NpuDevice]:
    """`devices` with the npu_ge placements Triton publishes (unchanged when it publishes none)."""
    held = placements(page)
    if not held and not page.has("npu_ge_device_utilization"):
        return list(devices)
    return [replace(d, models=held.get(d.id, ())) for d in devices]


def _int_label(sample: Sample, key: str) -> int | None:
    text = sample.label(key)
    return int(text) if text is not None and text.isdigit() else None
