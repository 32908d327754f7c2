"""Several NPUs, statistics, nv_inference_compute_* and the backend's NPU metrics."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.support.npu_ge import (
    SharedNpuServer,
    StartServer,
    affine_model,
    double_state,
    infer,
    live_resources,
    load,
    metric_samples,
    model_stats,
    unload,
    wait_for,
)

pytestmark = pytest.mark.integration

GIB = 1 << 30


def placements(metrics_url: str, model: str) -> dict[str, str]:
    return {
        labels["instance"]: labels["device"]
        for labels, value in metric_samples(metrics_url, "npu_ge_instance_device")
        if labels["model"] == model and value == 1
    }


def test_two_instances_run_on_two_devices(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "pair", instances=2, device_ids="0,1", extra=["delay_us 2000"])
    server = npu_shared.load_all()
    assert sorted(placements(server.metrics_url, "pair").values()) == ["0", "1"]
    log = server.log()
    assert "model 'pair' version 1 instance 'pair_0_0' device 0: ready" in log
    assert "model 'pair' version 1 instance 'pair_0_1' device 1: ready" in log
    state = double_state(server.state_file)
    assert state["contexts"] == 2 and state["streams"] == 2 and state["models"] == 2

    def one(i: int) -> None:
        x = np.full((1, 4), i, dtype=np.float32)
        np.testing.assert_array_equal(infer(server.grpc_url, "pair", {"x": x})["y"], 2 * x + 1)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(40)))
    # Both instances executed: Triton reports per-instance memory on both NPUs.
    usage = model_stats(server.url, "pair")["memory_usage"]
    assert sorted((u["type"], u["id"]) for u in usage) == [("GPU", 0), ("GPU", 1)]
    assert all(u["byte_size"] > 0 for u in usage)


def test_backend_config_device_ids_is_the_default(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "defaulted", instances=3)  # no device_ids parameter
    affine_model(npu_repo, "pinned", instances=1, device_ids="5")
    server = npu_triton(npu_repo, extra_args=["--backend-config=npu_ge,device_ids=2,3"])
    assert sorted(placements(server.metrics_url, "defaulted").values()) == ["2", "2", "3"]
    assert list(placements(server.metrics_url, "pinned").values()) == ["5"]


def test_seed_keys_are_accepted_with_a_warning(npu_shared: SharedNpuServer) -> None:
    affine_model(
        npu_shared.repo, "seed",
        config_extra='parameters { key: "DEVICE_ID" value { string_value: "1" } }\n'
                     'parameters { key: "EXECUTOR_TYPE" value { string_value: "om" } }\n',
    )
    server = npu_shared.load_all()
    assert list(placements(server.metrics_url, "seed").values()) == ["1"]
    log = server.log()
    assert "model 'seed': parameter 'DEVICE_ID' is deprecated; use 'device_ids'" in log
    assert "model 'seed': parameter 'EXECUTOR_TYPE' is deprecated; use 'engine'" in log


def test_statistics_and_compute_metrics_are_reported(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "timed", extra=["delay_us 2000"])
    server = npu_triton(npu_repo, extra_args=["--metrics-config=counter_latencies=true"])
    for i in range(10):
        infer(server.process.grpc_url, "timed", {"x": np.full((2, 4), i, dtype=np.float32)})
    stats = model_stats(server.url, "timed")
    assert stats["inference_count"] == 20 and stats["execution_count"] == 10
    for phase in ("success", "compute_input", "compute_infer", "compute_output"):
        assert stats["inference_stats"][phase]["count"] == 10, phase
        assert stats["inference_stats"][phase]["ns"] > 0, phase
    assert stats["inference_stats"]["compute_infer"]["ns"] >= 10 * 2_000_000  # the 2 ms delay
    assert [int(b["batch_size"]) for b in stats["batch_stats"]] == [2]
    for family in ("nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                   "nv_inference_compute_output_duration_us"):
        values = [v for labels, v in metric_samples(server.metrics_url, family) if labels["model"] == "timed"]
        assert values and values[0] > 0, family
    samples = metric_samples(server.metrics_url, "nv_inference_compute_infer_duration_us")
    infer_us = next(v for labels, v in samples if labels["model"] == "timed")
    assert infer_us >= 10 * 2000  # ten requests, each ran the 2 ms execution


def test_npu_telemetry_metrics_are_published(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "tele", instances=2, device_ids="0,3", extra=["weight_bytes 4194304"])
    server = npu_shared.load_all()

    def polled() -> bool:
        util = dict((labels["device"], v) for labels, v in
                    metric_samples(server.metrics_url, "npu_ge_device_utilization"))
        return util == {"0": 40.0, "3": 43.0}  # the double reports 40 + device id

    wait_for(polled, 10, "npu_ge_device_utilization for devices 0 and 3")
    total = dict((lb["device"], v) for lb, v in metric_samples(server.metrics_url, "npu_ge_hbm_total_bytes"))
    used = dict((lb["device"], v) for lb, v in metric_samples(server.metrics_url, "npu_ge_hbm_used_bytes"))
    assert total == {"0": 32.0 * GIB, "3": 32.0 * GIB}
    # 2 GiB the runtime keeps + the model's 4 MiB of weights + its I/O buffers
    for device in ("0", "3"):
        assert 2 * GIB + 4194304 < used[device] < 2 * GIB + 5 * (1 << 20), used


def test_metrics_of_an_unloaded_model_disappear(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "gone", device_ids="6")
    affine_model(npu_shared.repo, "stays", device_ids="0")
    server = npu_shared.load_all()
    assert placements(server.metrics_url, "gone") == {"gone_0_0": "6"}
    unload(server.url, "gone")
    wait_for(lambda: not placements(server.metrics_url, "gone"), 15, "placement metric removal")
    devices = {lb["device"] for lb, _ in metric_samples(server.metrics_url, "npu_ge_hbm_total_bytes")}
    assert devices == {"0"}


def test_unknown_device_is_a_precise_load_error(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "far", device_ids="9")
    server = npu_triton(npu_repo, models=[], env={"NPU_GE_DOUBLE_DEVICE_COUNT": "2"})
    status, error = load(server.url, "far")
    assert status == 400
    # the .om is described on the model's first device at model load, before any instance
    assert ("model 'far' version 1 device 9: aclrtSetDevice failed: ACL error 107001: "
            "[acl double] device 9 does not exist") in error
    assert live_resources(server.state_file) == {}
