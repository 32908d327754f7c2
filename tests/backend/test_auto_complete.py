"""Auto-complete: a config without input/output (and without max_batch_size) is
completed from the .om's description through TRITONBACKEND_ModelSetConfig, and Triton's
/v2/models/<m>/config shows the completed config; --disable-auto-complete-config turns
it off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from tests.support.npu_ge import (
    SharedNpuServer,
    StartServer,
    double_model,
    double_state,
    infer,
    load,
    write_model,
)

pytestmark = pytest.mark.integration

INSTANCE = "instance_group [{ kind: KIND_CPU, count: 1 }]\n"


def served_config(url: str, name: str) -> dict[str, Any]:
    resp = requests.get(f"{url}/v2/models/{name}/config", timeout=10)
    assert resp.status_code == 200, resp.text
    config: dict[str, Any] = resp.json()
    return config


def tensors(config: dict[str, Any], key: str) -> list[tuple[str, str, list[int]]]:
    return [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config.get(key, [])]


def gear_model(repo: Path, name: str, config: str) -> None:
    om = double_model(
        [("x", "FP32", "-1,4"), ("z", "INT32", "-1,2")],
        [("y", "FP32", "-1,4", "from x scale 2 offset 1"), ("w", "INT32", "-1,2", "from z scale 3 offset 0")],
        gears="1,2,4,8",
    )
    write_model(repo, name, config, om)


def test_config_without_io_is_completed_from_the_om_and_served(
    npu_shared: SharedNpuServer
) -> None:
    gear_model(npu_shared.repo, "bare", INSTANCE + "dynamic_batching { }\n")
    server = npu_shared
    assert load(server.url, "bare") == (200, "")
    config = served_config(server.url, "bare")
    assert config["max_batch_size"] == 8  # the largest gear
    assert tensors(config, "input") == [("x", "TYPE_FP32", [4]), ("z", "TYPE_INT32", [2])]
    assert tensors(config, "output") == [("y", "TYPE_FP32", [4]), ("w", "TYPE_INT32", [2])]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    z = np.arange(6, dtype=np.int32).reshape(3, 2)
    out = infer(server.grpc_url, "bare", {"x": x, "z": z})
    np.testing.assert_array_equal(out["y"], 2 * x + 1)
    np.testing.assert_array_equal(out["w"], 3 * z)
    assert ("model 'bare': configuration auto-completed from model.om: max_batch_size 8, "
            "input x FP32 [4], input z INT32 [2], output y FP32 [4], output w INT32 [2]") in server.log()
    # described once at model load, then one loaded copy per instance
    assert double_state(server.state_file)["models"] == 1


def test_static_model_keeps_max_batch_size_zero_and_full_dims(
    npu_shared: SharedNpuServer
) -> None:
    om = double_model([("x", "FP16", "2,3")], [("y", "FP16", "2,3", "from x scale 2 offset 1")])
    write_model(npu_shared.repo, "fixed", INSTANCE, om)
    server = npu_shared.load(*["fixed"])
    config = served_config(server.url, "fixed")
    assert config["max_batch_size"] == 0
    assert tensors(config, "input") == [("x", "TYPE_FP16", [2, 3])]
    assert tensors(config, "output") == [("y", "TYPE_FP16", [2, 3])]
    x = np.ones((2, 3), dtype=np.float16)
    np.testing.assert_array_equal(infer(server.grpc_url, "fixed", {"x": x})["y"], 3 * x)


def test_declared_tensors_and_max_batch_size_are_kept_as_written(
    npu_shared: SharedNpuServer
) -> None:
    config = ('max_batch_size: 4\ninput [{ name: "z", data_type: TYPE_INT32, dims: [2] },'
              ' { name: "x", data_type: TYPE_FP32, dims: [4] }]\n' + INSTANCE)
    gear_model(npu_shared.repo, "half", config)
    server = npu_shared.load(*["half"])
    served = served_config(server.url, "half")
    assert served["max_batch_size"] == 4
    assert tensors(served, "input") == [("z", "TYPE_INT32", [2]), ("x", "TYPE_FP32", [4])]
    assert tensors(served, "output") == [("y", "TYPE_FP32", [4]), ("w", "TYPE_INT32", [2])]


def test_disable_auto_complete_config_rejects_a_config_without_io(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    gear_model(npu_repo, "bare", INSTANCE)
    server = npu_triton(npu_repo, models=[], extra_args=["--disable-auto-complete-config"])
    status, error = load(server.url, "bare")
    assert status == 400
    assert "expected at least one input in the model configuration, got none" in error
    assert not server.state_file.exists()  # rejected before the ACL runtime was opened


def test_auto_complete_of_an_unreadable_om_names_the_file(npu_shared: SharedNpuServer) -> None:
    write_model(npu_shared.repo, "junk", INSTANCE, "not a model\n")
    server = npu_shared
    status, error = load(server.url, "junk")
    assert status == 400
    assert "/junk/1/model.om: aclmdlLoadFromFile failed: ACL error 100014" in error
