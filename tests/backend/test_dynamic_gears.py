"""Batch gears as different CANN versions describe them: a model whose outputs are
reported with the largest gear's shape ([8,4]) while its inputs say [-1,4] (the double's
`outputs_at_largest_gear`) binds, auto-completes and serves like one reporting -1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import requests

from tests.backend.conftest import StartServer
from tests.backend.support import affine_model, double_model, write_model
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
