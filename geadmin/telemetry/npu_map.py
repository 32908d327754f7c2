"""Which model fills which NPU: the model <-> NPU map, one row per (device, model, version).

Two ways to know, best first:

1. **placements** — the npu_ge backend publishes `npu_ge_instance_device` for every instance
   it runs (`NpuDevice.models`, geadmin.telemetry.sources.npu): what really runs where;
2. **config** — for an npu_ge model the placements do not cover, its config says where its
   instances go: instance i of the model's instance groups runs on `device_ids[i % n]` (the
   backend's rule, geadmin.repository.npu_ge_params). A config without `device_ids` runs on
   the backend's default devices, which geadmin cannot see: such a model is listed in
   `ModelMap.unplaced`, not guessed.

`hbm_by_device` turns the map and the devices into what the bar chart draws: each device's
used and free HBM, labelled with the models that hold it (the split between several models
on one device is not published, so it is never invented).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2

from geadmin.domain import ModelState
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.triton.client import TritonClient

FROM_PLACEMENTS = "npu_ge placements"
FROM_CONFIG = "config device_ids"
NOTHING = "nothing"  # a device known to hold no model instance
UNKNOWN = "unknown"  # a device whose holders no source tells


@dataclass(frozen=True)
class MapRow:
    device: int
    model: str
    version: str  # "" when it comes from a config (every loaded version)
    instances: int
    source: str  # FROM_PLACEMENTS or FROM_CONFIG


@dataclass(frozen=True)
class ModelMap:
    rows: tuple[MapRow, ...]
    unplaced: tuple[str, ...] = ()  # npu_ge models whose config names no device_ids

    def models_on(self, device: int) -> tuple[str, ...]:
        return tuple(sorted({r.model for r in self.rows if r.device == device}))

    def devices_of(self, model: str) -> tuple[int, ...]:
        return tuple(sorted({r.device for r in self.rows if r.model == model}))


@dataclass(frozen=True)
class HbmBar:
    """One device's HBM (bytes) for the chart: `used` held by `label`."""

    device: int
    label: str  # the models holding it, "nothing", or "unknown"
    used_bytes: int | None
    free_bytes: int | None
    util_pct: float | None


def model_map(devices: Iterable[NpuDevice],
              configs: Mapping[str, model_config_pb2.ModelConfig] | None = None) -> ModelMap:
    """Placements first; then the configs of npu_ge models no placement mentions."""
    counts: dict[tuple[int, str, str], int] = {}
    for device in devices:
        for p in device.models or ():
            counts[(device.id, p.model, p.version)] = counts.get((device.id, p.model, p.version), 0) + 1
    rows = [MapRow(d, m, v, n, FROM_PLACEMENTS) for (d, m, v), n in counts.items()]
    placed = {m for _, m, _ in counts}
    unplaced = []
    for name, config in sorted((configs or {}).items()):
        if name in placed or not npu_ge.is_npu_ge(config):
            continue
        found = config_rows(name, config)
        if found:
            rows += found
        else:
            unplaced.append(name)
    return ModelMap(tuple(sorted(rows, key=lambda r: (r.device, r.model, r.version))), tuple(unplaced))


def loaded_npu_ge_configs(client: TritonClient,
                          skip: Iterable[str] = ()) -> dict[str, model_config_pb2.ModelConfig]:
    """Triton's live config of every READY npu_ge model not in `skip` (the models the
    placements already cover). Raises what the client raises (a GeAdminError)."""
    skipped = set(skip)
    names = sorted({m.name for m in client.repository_index()
                    if m.state is ModelState.READY and m.name not in skipped})
    configs = {name: client.model_config(name) for name in names}
    return {name: config for name, config in configs.items() if npu_ge.is_npu_ge(config)}


def config_rows(name: str, config: model_config_pb2.ModelConfig) -> list[MapRow]:
    """Where the backend puts this model's instances, from `device_ids` and the instance count."""
    chosen = npu_ge.effective(npu_ge.string_parameters(config), "device_ids")
    ids = npu_ge.parse_device_ids(chosen[1]) if chosen else None
    if not ids:
        return []
    instances = sum(max(group.count, 1) for group in config.instance_group) or 1
    per_device: dict[int, int] = {}
    for i in range(instances):
        per_device[ids[i % len(ids)]] = per_device.get(ids[i % len(ids)], 0) + 1
    return [MapRow(device, name, "", count, FROM_CONFIG) for device, count in sorted(per_device.items())]


def hbm_by_device(devices: Sequence[NpuDevice], found: ModelMap) -> list[HbmBar]:
    bars = []
    for d in devices:
        used, total = d.device_memory
        models = found.models_on(d.id)
        if models:
            label = ", ".join(models)
        elif d.models == () or d.processes == ():
            label = NOTHING
        else:
            label = UNKNOWN
        free = total - used if used is not None and total is not None else None
        bars.append(HbmBar(d.id, label, used, free, d.aicore_util_pct))
    return bars
