"""Load/unload cycles never leak device resources and never hang; a reload keeps
serving (blue/green); shutdown finalizes ACL."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import requests

from tests.support.npu_ge import (
    SharedNpuServer,
    StartServer,
    affine_model,
    double_state,
    infer,
    live_resources,
    load,
    model_ready,
    unload,
    wait_for,
)

pytestmark = pytest.mark.integration

CYCLES = 50


def test_fifty_load_unload_cycles_leave_zero_live_device_allocations(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    model_dir = affine_model(npu_repo, "cycled", instances=2, device_ids="0,1", extra=["weight_bytes 65536"])
    # inputs, outputs and max_batch_size left to auto-complete: every cycle also describes the
    # .om on a context of its own and hands the completed config to Triton
    config = (model_dir / "config.pbtxt").read_text()
    kept = [line for line in config.splitlines() if not line.startswith(("input", "output", "max_batch"))]
    (model_dir / "config.pbtxt").write_text("\n".join(kept) + "\n")
    server = npu_triton(npu_repo, models=[])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    started = time.monotonic()
    for cycle in range(CYCLES):
        status, error = load(server.url, "cycled", timeout_s=30)  # bounded: a load can hang
        assert status == 200, (cycle, error)
        assert double_state(server.state_file)["allocations"] > 0
        if cycle == 0:
            served = requests.get(f"{server.url}/v2/models/cycled/config", timeout=10).json()
            assert served["max_batch_size"] == 8
        np.testing.assert_array_equal(infer(server.process.grpc_url, "cycled", {"x": x})["y"], 2 * x + 1)
        unload(server.url, "cycled")
        wait_for(lambda: not model_ready(server.url, "cycled"), 30, f"unload in cycle {cycle}")
        # Unload returns before the instances are finalized: wait, bounded, for the release.
        wait_for(lambda: live_resources(server.state_file) == {}, 30, f"device release in cycle {cycle}")
    assert time.monotonic() - started < 240
    state = double_state(server.state_file)
    assert state["allocated_bytes"] == 0 and state["executions"] == CYCLES
    assert "aclrtFree failed" not in server.log()
    assert server.log().count("model 'cycled': configuration auto-completed from model.om") == CYCLES


def test_reload_keeps_serving_and_releases_the_old_copy(npu_shared: SharedNpuServer) -> None:
    model_dir = affine_model(npu_shared.repo, "reloaded")
    server = npu_shared.load_all()
    one_copy = double_state(server.state_file)["allocations"]
    config = (model_dir / "config.pbtxt").read_text()
    (model_dir / "config.pbtxt").write_text(config.replace("count: 1", "count: 2"))
    assert load(server.url, "reloaded") == (200, "")
    wait_for(lambda: double_state(server.state_file)["allocations"] == 2 * one_copy, 30,
             "old instance released after the reload")
    x = np.ones((1, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(server.grpc_url, "reloaded", {"x": x})["y"], 3 * x)


def test_shutdown_finalizes_acl_once(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "bye", instances=2)
    server = npu_triton(npu_repo)
    assert double_state(server.state_file)["init_calls"] == 1
    server.process.stop()
    state = double_state(server.state_file)
    assert state["finalize_calls"] == 1 and state["initialized"] is False
    assert live_resources(server.state_file) == {}
