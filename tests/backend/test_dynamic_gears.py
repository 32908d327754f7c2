"""Gears of .om models. Batch gears as different CANN versions describe them: a model whose
outputs are reported with the largest gear's shape ([8,4]) while its inputs say [-1,4] (the
double's `outputs_at_largest_gear`) binds, auto-completes and serves like one reporting -1.
Dims gears (atc --dynamic_dims) and image size gears (--dynamic_image_size) are not served
yet: the load fails naming the gears the model has and what to compile instead."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import requests

from tests.backend.conftest import StartServer
from tests.backend.support import (
    affine_model,
    double_model,
    load,
    model_ready,
    settled_live_resources,
    write_model,
)
from tests.backend.test_inference import infer

pytestmark = pytest.mark.integration


def test_outputs_described_at_the_largest_gear_bind_and_serve(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "explicit", extra=["outputs_at_largest_gear"])
    om = double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 2 offset 1")],
                      gears="1,2,4,8", extra=["outputs_at_largest_gear"])
    write_model(npu_repo, "completed", "instance_group [{ kind: KIND_CPU, count: 1 }]\n", om)
    server = npu_triton(npu_repo)
    config = requests.get(f"{server.url}/v2/models/completed/config", timeout=10).json()
    assert config["max_batch_size"] == 8
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("y", [4])]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)  # gear 4 runs, 3 rows come back
    for model in ("explicit", "completed"):
        y = infer(server.process.grpc_url, model, {"x": x})["y"]
        np.testing.assert_array_equal(y, 2 * x + 1)


GEAR_KINDS = {
    # model: (inputs, .om directive, config dims of x, what the load error names)
    "seq_gears": ([("x", "FP32", "1,-1")], "dynamic_dims 8;16;32", "[1, -1]",
                  "compiled with dynamic dims gears [1,8], [1,16], [1,32] (atc --dynamic_dims)"),
    "image_gears": ([("x", "FP32", "1,3,-1,-1")], "dynamic_image_size 224,224;448,448",
                    "[1, 3, -1, -1]", "compiled with dynamic image size gears [224x224, 448x448] "
                    "(atc --dynamic_image_size)"),
}


def test_dims_and_image_size_gears_fail_the_load_naming_the_gears(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    for name, (inputs, directive, dims, _) in GEAR_KINDS.items():
        om = double_model(inputs, [("y", "FP32", inputs[0][2], "from x scale 1 offset 0")],
                          extra=[directive])
        write_model(npu_repo, name, "max_batch_size: 0\n"
                    f'input [{{ name: "x", data_type: TYPE_FP32, dims: {dims} }}]\n'
                    f'output [{{ name: "y", data_type: TYPE_FP32, dims: {dims} }}]\n', om)
    affine_model(npu_repo, "batch_gears")
    server = npu_triton(npu_repo, models=["batch_gears"])
    held = settled_live_resources(server.state_file)
    for name, (_, _, _, message) in GEAR_KINDS.items():
        status, error = load(server.url, name)
        assert status == 400, (name, error)
        assert message in error, (name, error)
        assert "npu_ge serves dynamic batch gears only" in error and "--dynamic_batch_size" in error
        assert not model_ready(server.url, name)
    assert model_ready(server.url, "batch_gears")
    assert settled_live_resources(server.state_file) == held  # nothing of the failed loads left
