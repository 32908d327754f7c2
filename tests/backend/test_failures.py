"""Failures stay with the requests or the model they belong to: the server and every
other model keep serving, and nothing is left allocated on the device."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.npu_ge import (
    SharedNpuServer,
    StartServer,
    affine_model,
    double_model,
    infer,
    live_resources,
    load,
    model_ready,
    model_stats,
    server_live,
    settled_live_resources,
    write_model,
)

pytestmark = pytest.mark.integration

POISON = -7.0


def try_infer(url: str, model: str, value: float) -> np.ndarray | str:
    x = np.full((1, 4), value, dtype=np.float32)
    try:
        return infer(url, model, {"x": x})["y"]
    except InferenceServerException as exc:
        return str(exc)


def test_failing_execute_answers_only_the_affected_requests(npu_shared: SharedNpuServer) -> None:
    # Without batching, each execution holds one request: exactly the poisoned ones fail.
    affine_model(npu_shared.repo, "fragile", batching="", instances=2,
                 extra=[f"fail_execute_on_value {POISON}", "delay_us 1000"])
    server = npu_shared.load_all()
    url = server.grpc_url
    values = [POISON if i % 5 == 0 else float(i) for i in range(40)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda v: try_infer(url, "fragile", v), values))
    for value, result in zip(values, results, strict=True):
        if value == POISON:
            assert isinstance(result, str), result
            # an execution's failure surfaces when its stream is synchronized
            assert "aclrtSynchronizeStreamWithTimeout failed: ACL error 507011" in result
            assert "queued work (input copies, aclmdlExecuteAsync, output copies) failed" in result
            assert "poison value" in result  # aclGetRecentErrMsg() is kept
            assert "model 'fragile' version 1 instance 'fragile_0_" in result
        else:
            assert not isinstance(result, str), result
            np.testing.assert_array_equal(result, np.full((1, 4), 2 * value + 1))
    stats = model_stats(server.url, "fragile")["inference_stats"]
    assert stats["fail"]["count"] == 8 and stats["success"]["count"] == 32
    assert server_live(server.url) and model_ready(server.url, "fragile")


def test_failing_batched_execute_keeps_the_server_serving(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "fragile_batched",
                 extra=[f"fail_execute_on_value {POISON}", "delay_us 2000"],
                 batching="dynamic_batching { max_queue_delay_microseconds: 20000 }")
    server = npu_shared.load_all()
    url = server.grpc_url
    values = [POISON, *[float(i) for i in range(1, 16)]]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda v: try_infer(url, "fragile_batched", v), values))
    assert isinstance(results[0], str) and "ACL error 507011" in results[0]
    failed = sum(isinstance(r, str) for r in results)
    stats = model_stats(server.url, "fragile_batched")
    # Only requests that shared the poisoned execution fail, each with the execute error.
    assert all("ACL error 507011" in r for r in results if isinstance(r, str))
    assert failed <= 8 and stats["inference_stats"]["fail"]["count"] == failed
    for value, result in zip(values, results, strict=True):
        if not isinstance(result, str):
            np.testing.assert_array_equal(result, np.full((1, 4), 2 * value + 1))
    # Afterwards everything succeeds again.
    for v in (1.0, 2.0, 3.0):
        np.testing.assert_array_equal(try_infer(url, "fragile_batched", v), np.full((1, 4), 2 * v + 1))


def test_without_cann_the_load_error_is_precise_and_other_models_serve(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "on_npu")
    python_model = npu_repo / "on_cpu"
    (python_model / "1").mkdir(parents=True)
    (python_model / "config.pbtxt").write_text(
        'name: "on_cpu"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "x", data_type: TYPE_FP32, dims: [4] }]\n'
        'output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]\n'
    )
    (python_model / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = []\n"
        "        for r in requests:\n"
        "            x = pb_utils.get_input_tensor_by_name(r, 'x').as_numpy()\n"
        "            out.append(pb_utils.InferenceResponse([pb_utils.Tensor('y', x * 3)]))\n"
        "        return out\n"
    )
    server = npu_triton(npu_repo, models=[], with_double=False,
                        env={"ASCEND_HOME_PATH": "", "ASCEND_TOOLKIT_HOME": ""})
    assert load(server.url, "on_cpu") == (200, "")
    status, error = load(server.url, "on_npu")
    assert status == 400
    assert "cannot load the ACL runtime libascendcl.so" in error
    assert "ASCEND_HOME_PATH" in error and "LD_LIBRARY_PATH" in error
    assert "set_env.sh" in error
    assert not model_ready(server.url, "on_npu")
    x = np.ones((4,), dtype=np.float32)
    client = grpcclient.InferenceServerClient(server.process.grpc_url)
    t = grpcclient.InferInput("x", [4], "FP32")
    t.set_data_from_numpy(x)
    y = client.infer("on_cpu", [t], client_timeout=30).as_numpy("y")
    np.testing.assert_array_equal(y, 3 * x)
    # A second attempt fails the same way, quickly, instead of hanging.
    assert load(server.url, "on_npu", timeout_s=30)[0] == 400
    assert server_live(server.url)


CONFIG_ERRORS = {
    # model name: (config change, .om change, message the load error must contain)
    "bad_dtype": ("TYPE_FP16", None, "input 'x': expected data type FP32 (as in model.om), got FP16"),
    "bad_dims": ("dims5", None, "input 'x': expected dims [4] (model.om dims [-1,4] without the batch "
                 "dimension), got [5]"),
    "bad_bytes": ("BYTES", None, "input 'x': data type BYTES is not supported by .om models"),
    "bad_mbs": ("mbs16", None, "expected max_batch_size <= 8 (largest batch gear of model.om), got 16"),
    "bad_missing": (None, "missing", "/bad_missing/1/model.om' not found (default_model_filename is "
                    "'model.om')"),
    "bad_garbage": (None, "garbage", "aclmdlLoadFromFile failed: ACL error 100014"),
    "bad_onnx": (None, "onnx", "model.onnx needs the ge_graph engine, which this build lacks: convert with "
                 "ATC to model.om, or use the image built with the CANN toolkit"),
}


def write_broken_model(repo: Path, name: str, config_change: str | None, om_change: str | None) -> None:
    dtype = {"TYPE_FP16": "TYPE_FP16", "BYTES": "TYPE_STRING"}.get(config_change or "", "TYPE_FP32")
    dims = "5" if config_change == "dims5" else "4"
    mbs = 16 if config_change == "mbs16" else 8
    config = (
        f"max_batch_size: {mbs}\n"
        f'input [{{ name: "x", data_type: {dtype}, dims: [{dims}] }}]\n'
        'output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]\n'
    )
    om = double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 2 offset 1")],
                      gears="1,2,4,8")
    if om_change == "garbage":
        om = "not a model\n"
    if om_change == "onnx":
        config += 'default_model_filename: "model.onnx"\n'
    write_model(repo, name, config, None if om_change == "missing" else om,
                filename="model.onnx" if om_change == "onnx" else "model.om")


def test_config_errors_name_what_was_expected(npu_shared: SharedNpuServer) -> None:
    for name, (config_change, om_change, _) in CONFIG_ERRORS.items():
        write_broken_model(npu_shared.repo, name, config_change, om_change)
    affine_model(npu_shared.repo, "good")
    server = npu_shared.load(*["good"])
    held_by_good = settled_live_resources(server.state_file)
    for name, (_, _, message) in CONFIG_ERRORS.items():
        status, error = load(server.url, name)
        assert status == 400, (name, error)
        assert message in error, (name, error)
        assert model_ready(server.url, "good")
        assert settled_live_resources(server.state_file) == held_by_good, name  # nothing of it left behind


def test_failed_instance_initialization_releases_everything(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "breaks_on_load", instances=2, extra=["fail_load"])
    affine_model(npu_shared.repo, "ok")
    server = npu_shared.load(*["ok"])
    before = settled_live_resources(server.state_file)
    for _ in range(3):
        status, error = load(server.url, "breaks_on_load")
        assert status == 400
        assert "aclmdlLoadFromFile failed: ACL error 107000: [acl double] fail_load set in" in error
    assert settled_live_resources(server.state_file) == before  # only "ok"'s resources


def test_injected_stream_failure_is_reported_and_cleaned_up(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "nostream")
    server = npu_triton(npu_repo, models=[], env={"NPU_GE_DOUBLE_FAIL_CALLS": "aclrtCreateStream"})
    status, error = load(server.url, "nostream")
    assert status == 400
    assert "aclrtCreateStream failed: ACL error 107000" in error
    assert live_resources(server.state_file) == {}
