"""One copy of the weights at load: the model read to describe an .om is the one the first
instance serves with (no second aclmdlLoadFromFile), so the device memory a load takes at its
peak is the weights plus the instance's buffers, and a blue/green reload (the new version
loaded while the old one serves) at most two copies. The ACL double counts device memory as
its allocations plus the weight_bytes of every loaded model (peak_device_bytes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.npu_ge import (
    StartServer,
    affine_model,
    double_state,
    infer,
    load,
    wait_for,
)

pytestmark = pytest.mark.integration

WEIGHTS = 64 << 20  # counted by the double, never allocated on the host


def test_loading_an_om_puts_its_weights_on_the_device_once(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "heavy", extra=[f"weight_bytes {WEIGHTS}"])
    server = npu_triton(npu_repo, models=["heavy"])
    state = double_state(server.state_file)
    assert state["model_loads"] == 1  # described from the model the instance serves with
    assert state["models"] == 1 and state["contexts"] == 1
    assert state["peak_device_bytes"] <= 1.1 * WEIGHTS, state
    x = np.ones((1, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "heavy", {"x": x})["y"], 3 * x)


def test_a_config_without_tensors_is_completed_from_the_same_single_load(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    model_dir = affine_model(npu_repo, "bare", extra=[f"weight_bytes {WEIGHTS}"])
    config = (model_dir / "config.pbtxt").read_text()
    bare = "\n".join(line for line in config.splitlines()
                     if not line.lstrip().startswith(("input", "output")))
    (model_dir / "config.pbtxt").write_text(bare + "\n")
    server = npu_triton(npu_repo, models=["bare"])
    assert "configuration auto-completed from model.om" in server.log()
    state = double_state(server.state_file)
    assert state["model_loads"] == 1 and state["peak_device_bytes"] <= 1.1 * WEIGHTS, state


def test_a_second_instance_on_another_device_loads_its_own_copy_there(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # the described model is adopted by the instance on the first device only
    affine_model(npu_repo, "spread", instances=2, device_ids="0,1",
                 extra=[f"weight_bytes {WEIGHTS}"])
    server = npu_triton(npu_repo, models=["spread"])
    state = double_state(server.state_file)
    assert state["model_loads"] == 2 and state["models"] == 2 and state["contexts"] == 2
    assert state["peak_device_bytes"] <= 2.1 * WEIGHTS, state


def test_a_blue_green_reload_holds_at_most_two_copies(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    model_dir = affine_model(npu_repo, "swapped", extra=[f"weight_bytes {WEIGHTS}"])
    server = npu_triton(npu_repo, models=["swapped"])
    config = (model_dir / "config.pbtxt").read_text()
    (model_dir / "config.pbtxt").write_text(
        config.replace("max_queue_delay_microseconds: 2000", "max_queue_delay_microseconds: 1000"))
    assert load(server.url, "swapped") == (200, "")
    wait_for(lambda: double_state(server.state_file)["models"] == 1, 30,
             "the old version unloaded after the reload")
    state = double_state(server.state_file)
    assert state["model_loads"] == 2  # one per version
    assert 2 * WEIGHTS <= state["peak_device_bytes"] <= 2.1 * WEIGHTS, state  # both served
    assert state["device_bytes"] <= 1.1 * WEIGHTS
    x = np.ones((1, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "swapped", {"x": x})["y"], 3 * x)


def test_an_instance_that_never_adopts_the_described_model_frees_it_with_the_model(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # a failing stream creation fails the only instance after the description loaded the
    # model: the model load fails and nothing stays on the device
    affine_model(npu_repo, "stillborn", extra=[f"weight_bytes {WEIGHTS}"])
    server = npu_triton(npu_repo, models=[], env={"NPU_GE_DOUBLE_FAIL_CALLS": "aclrtCreateStream"})
    status, error = load(server.url, "stillborn")
    assert status == 400 and "aclrtCreateStream failed" in error, error
    wait_for(lambda: double_state(server.state_file)["models"] == 0, 30, "the model unloaded")
    state = double_state(server.state_file)
    assert state["contexts"] == 0 and state["device_bytes"] == 0, state
