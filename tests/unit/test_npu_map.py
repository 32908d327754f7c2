"""geadmin.telemetry.npu_map: the model <-> NPU map from npu_ge placements, else from the
configs' device_ids and instance counts; HBM bars labelled with what holds each device."""

from __future__ import annotations

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from geadmin.telemetry.npu_map import (
    FROM_CONFIG,
    FROM_PLACEMENTS,
    NOTHING,
    UNKNOWN,
    MapRow,
    config_rows,
    hbm_by_device,
    model_map,
)
from geadmin.telemetry.sources.npu import NpuDevice, NpuPlacement, NpuProcess

GIB = 1 << 30


def config(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def npu_ge(name: str, device_ids: str | None, *counts: int,
           key: str = "device_ids") -> model_config_pb2.ModelConfig:
    groups = "".join(f"instance_group {{ kind: KIND_CPU count: {c} }}\n" for c in counts)
    params = f'parameters {{ key: "{key}" value {{ string_value: "{device_ids}" }} }}\n' if device_ids else ""
    return config(f'name: "{name}"\nbackend: "npu_ge"\n{groups}{params}')


def device(id_: int, *held: tuple[str, str], used_gib: float | None = 10, total_gib: float | None = 64,
           util: float | None = 50.0) -> NpuDevice:
    return NpuDevice(id=id_, source="triton", aicore_util_pct=util,
                     hbm_used_bytes=None if used_gib is None else int(used_gib * GIB),
                     hbm_total_bytes=None if total_gib is None else int(total_gib * GIB),
                     models=tuple(NpuPlacement(m, "1", inst) for m, inst in held))


def test_placements_give_one_row_per_device_and_model_with_the_instance_count() -> None:
    devices = [device(0, ("pair", "pair_0_0")), device(1, ("pair", "pair_0_1"), ("single", "single_0_0")),
               device(3, ("big", "big_0_0"), ("big", "big_0_1"))]
    found = model_map(devices)
    placed = FROM_PLACEMENTS
    assert found.rows == (MapRow(0, "pair", "1", 1, placed), MapRow(1, "pair", "1", 1, placed),
                          MapRow(1, "single", "1", 1, placed), MapRow(3, "big", "1", 2, placed))
    assert found.models_on(1) == ("pair", "single") and found.devices_of("pair") == (0, 1)
    assert found.models_on(3) == ("big",) and found.unplaced == ()


def test_without_placements_the_config_puts_instance_i_on_device_ids_i_mod_n() -> None:
    assert config_rows("m", npu_ge("m", "2,3", 3)) == [MapRow(2, "m", "", 2, FROM_CONFIG),
                                                      MapRow(3, "m", "", 1, FROM_CONFIG)]
    assert config_rows("m", npu_ge("m", "5", 1, 2)) == [MapRow(5, "m", "", 3, FROM_CONFIG)]  # groups add up
    assert config_rows("m", npu_ge("m", "0,1")) == [MapRow(0, "m", "", 1, FROM_CONFIG)]  # no group: one
    assert config_rows("m", npu_ge("m", "4", 1, key="DEVICE_ID")) == [MapRow(4, "m", "", 1, FROM_CONFIG)]


def test_configs_fill_in_only_the_npu_ge_models_the_placements_do_not_cover() -> None:
    devices = [device(0, ("pair", "pair_0_0")), NpuDevice(id=7, source="npu-smi")]
    configs = {"pair": npu_ge("pair", "5,6", 2),  # placements win over its config
               "late": npu_ge("late", "7", 1),
               "defaulted": npu_ge("defaulted", None, 1),  # backend default devices: unknown here
               "garbage": npu_ge("garbage", "zero", 1),  # the backend rejects it: not guessed
               "cpu": config('name: "cpu"\nbackend: "python"\nparameters { key: "device_ids" '
                             'value { string_value: "7" } }')}
    found = model_map(devices, configs)
    assert found.rows == (MapRow(0, "pair", "1", 1, FROM_PLACEMENTS), MapRow(7, "late", "", 1, FROM_CONFIG))
    assert found.unplaced == ("defaulted", "garbage")


def test_hbm_bars_are_labelled_with_the_models_and_never_split_between_them() -> None:
    devices = [device(0, ("a", "a_0_0"), ("b", "b_0_0"), used_gib=30, total_gib=64),
               device(1, used_gib=2, total_gib=64),  # npu_ge: known to hold nothing
               NpuDevice(id=2, source="npu-smi", hbm_used_bytes=GIB, hbm_total_bytes=4 * GIB),
               NpuDevice(id=3, source="npu-exporter", hbm_used_bytes=GIB, hbm_total_bytes=None,
                         processes=(NpuProcess(42, "python"),))]
    bars = {b.device: b for b in hbm_by_device(devices, model_map(devices))}
    assert bars[0].label == "a, b" and bars[0].used_bytes == 30 * GIB and bars[0].free_bytes == 34 * GIB
    assert bars[1].label == NOTHING
    assert bars[2].label == UNKNOWN and bars[2].free_bytes == 3 * GIB
    assert bars[3].label == UNKNOWN and bars[3].free_bytes is None  # total unknown: no free bar
