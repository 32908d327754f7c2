"""Gears of .om models. Batch gears as different CANN versions describe them: a model whose
outputs are reported with the largest gear's shape ([8,4]) while its inputs say [-1,4] (the
double's `outputs_at_largest_gear`) binds, auto-completes and serves like one reporting -1.
Dims gears (atc --dynamic_dims, e.g. sequence lengths) and image size gears
(--dynamic_image_size) are served with max_batch_size 0: the config declares -1 where the
gears vary (checked against the gears at load), each request's shapes pick its gear, a shape
no gear has fails that request only, and outputs come back with the gear's dims."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.support.npu_ge import (
    BackendBuild,
    SharedNpuServer,
    StartServer,
    affine_model,
    double_model,
    infer,
    load,
    model_ready,
    settled_live_resources,
    write_model,
)

pytestmark = pytest.mark.integration


def test_outputs_described_at_the_largest_gear_bind_and_serve(
    npu_shared: SharedNpuServer
) -> None:
    affine_model(npu_shared.repo, "explicit", extra=["outputs_at_largest_gear"])
    om = double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 2 offset 1")],
                      gears="1,2,4,8", extra=["outputs_at_largest_gear"])
    write_model(npu_shared.repo, "completed", "instance_group [{ kind: KIND_CPU, count: 1 }]\n", om)
    server = npu_shared.load_all()
    config = requests.get(f"{server.url}/v2/models/completed/config", timeout=10).json()
    assert config["max_batch_size"] == 8
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("y", [4])]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)  # gear 4 runs, 3 rows come back
    for model in ("explicit", "completed"):
        y = infer(server.grpc_url, model, {"x": x})["y"]
        np.testing.assert_array_equal(y, 2 * x + 1)


DIMS_GEARS = "compiled with dynamic dims gears [1,8], [1,16] (atc --dynamic_dims)"
IMAGE_GEARS = "compiled with dynamic image size gears [4x4, 8x6] (atc --dynamic_image_size)"


def dims_gear_om() -> str:
    """A sequence model: x [1,-1] (lengths 8 or 16), y = 2x + 1 shaped like x."""
    return double_model([("x", "FP32", "1,-1")],
                        [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                        extra=["dynamic_dims 8;16"])


def image_gear_om() -> str:
    """An image model: x [1,3,-1,-1] (H,W 4x4 or 8x6), y = 3x - 1 shaped like x."""
    return double_model([("x", "FP32", "1,3,-1,-1")],
                        [("y", "FP32", "1,3,-1,-1", "from x scale 3 offset -1")],
                        extra=["dynamic_image_size 4,4;8,6"])


def gear_config(dims: str, out_dims: str | None = None, max_batch: int = 0) -> str:
    return (f"max_batch_size: {max_batch}\n"
            f'input [{{ name: "x", data_type: TYPE_FP32, dims: {dims} }}]\n'
            f'output [{{ name: "y", data_type: TYPE_FP32, dims: {out_dims or dims} }}]\n')


def values(shape: tuple[int, ...]) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float32) - 5).reshape(shape)


def infer_error(url: str, model: str, x: np.ndarray) -> str:
    with pytest.raises(InferenceServerException) as failed:
        infer(url, model, {"x": x})
    return str(failed.value)


def test_dims_gears_serve_each_sequence_length_and_refuse_others_per_request(
    npu_shared: SharedNpuServer
) -> None:
    write_model(npu_shared.repo, "seq", gear_config("[1, -1]"), dims_gear_om())
    server = npu_shared.load(*["seq"])
    grpc = server.grpc_url
    for length in (16, 8, 16):  # switching gears back and forth on one instance
        x = values((1, length))
        y = infer(grpc, "seq", {"x": x})["y"]
        assert y.shape == (1, length)
        np.testing.assert_array_equal(y, 2 * x + 1)
    error = infer_error(grpc, "seq", values((1, 12)))
    assert "input shape [1,12] matches no gear: the model was " + DIMS_GEARS in error, error
    x = values((1, 8))  # the instance keeps serving after the refused request
    np.testing.assert_array_equal(infer(grpc, "seq", {"x": x})["y"], 2 * x + 1)


def test_a_gear_request_after_the_instance_was_rebuilt_runs_its_own_gear_not_the_first(
    npu_shared: SharedNpuServer
) -> None:
    # a failed execution makes the next request rebuild the instance, which resets each
    # set's gear: that request must still run the gear its shape picked (it got gear 0's
    # shape and half its data back, answered as a success)
    om = double_model([("x", "FP32", "1,-1")], [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                      extra=["dynamic_dims 8;16", "fail_execute_on_value -7"])
    write_model(npu_shared.repo, "seq_fragile", gear_config("[1, -1]"), om)
    grpc = npu_shared.load(*["seq_fragile"]).grpc_url
    x = values((1, 16))
    np.testing.assert_array_equal(infer(grpc, "seq_fragile", {"x": x})["y"], 2 * x + 1)
    poisoned = x.copy()
    poisoned[0, 3] = -7.0
    infer_error(grpc, "seq_fragile", poisoned)
    y = infer(grpc, "seq_fragile", {"x": x})["y"]
    assert y.shape == (1, 16)
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_image_size_gears_serve_each_size_and_refuse_others_per_request(
    npu_shared: SharedNpuServer
) -> None:
    write_model(npu_shared.repo, "image", gear_config("[1, 3, -1, -1]"), image_gear_om())
    server = npu_shared.load(*["image"])
    grpc = server.grpc_url
    for hw in ((8, 6), (4, 4)):
        x = values((1, 3, *hw))
        y = infer(grpc, "image", {"x": x})["y"]
        assert y.shape == (1, 3, *hw)
        np.testing.assert_array_equal(y, 3 * x - 1)
    for hw in ((6, 8), (4, 6)):  # transposed, and a mix of two gears' H and W
        error = infer_error(grpc, "image", values((1, 3, *hw)))
        expected = f"input shape [1,3,{hw[0]},{hw[1]}] matches no gear: the model was "
        assert expected + IMAGE_GEARS in error, error
    x = values((1, 3, 4, 4))
    np.testing.assert_array_equal(infer(grpc, "image", {"x": x})["y"], 3 * x - 1)


def test_two_inputs_sharing_a_length_must_match_one_gear_together(
    npu_shared: SharedNpuServer
) -> None:
    """Like BERT's input_ids and attention_mask: CANN lists each gear as both inputs' dims
    concatenated; a request must match one gear with both."""
    om = double_model([("ids", "FP32", "1,-1"), ("mask", "FP32", "1,-1")],
                      [("y", "FP32", "1,-1", "from ids,mask scale 1 offset 0")],
                      extra=["dynamic_dims 8,8;16,16"])
    write_model(npu_shared.repo, "bert", "max_batch_size: 0\n"
                'input [{ name: "mask", data_type: TYPE_FP32, dims: [1, -1] },\n'
                '       { name: "ids", data_type: TYPE_FP32, dims: [1, -1] }]\n'
                'output [{ name: "y", data_type: TYPE_FP32, dims: [1, -1] }]\n', om)
    server = npu_shared.load(*["bert"])
    grpc = server.grpc_url
    for length in (8, 16):
        ids, mask = values((1, length)), np.full((1, length), 100, dtype=np.float32)
        y = infer(grpc, "bert", {"mask": mask, "ids": ids})["y"]
        np.testing.assert_array_equal(y, ids + mask)
    with pytest.raises(InferenceServerException) as failed:
        infer(grpc, "bert", {"mask": values((1, 16)), "ids": values((1, 8))})
    assert ("input shapes [1,16] and [1,8] match no gear: the model was compiled with dynamic "
            "dims gears [1,8,1,8], [1,16,1,16] (atc --dynamic_dims)") in str(failed.value)


def test_a_gear_list_in_atc_input_shape_order_binds_to_the_inputs_it_names(
    npu_shared: SharedNpuServer
) -> None:
    """CANN's aclmdlGetInputDynamicDims lists the inputs of atc --input_shape in that order, not
    the model's: here "mask:2,-1;x:1,-1" for inputs (x, mask). The double lists them so
    (dynamic_dims_order) and expects aclmdlSetInputDynamicDims in that order too."""
    om = double_model([("x", "FP32", "1,-1"), ("mask", "FP32", "2,-1")],
                      [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                      extra=["dynamic_dims 4,8;6,16", "dynamic_dims_order mask,x"])
    write_model(npu_shared.repo, "reordered", "max_batch_size: 0\n"
                'input [{ name: "x", data_type: TYPE_FP32, dims: [1, -1] },\n'
                '       { name: "mask", data_type: TYPE_FP32, dims: [2, -1] }]\n'
                'output [{ name: "y", data_type: TYPE_FP32, dims: [1, -1] }]\n', om)
    server = npu_shared.load(*["reordered"])
    grpc = server.grpc_url
    for x_len, mask_len in ((8, 4), (16, 6), (8, 4)):
        x = values((1, x_len))
        y = infer(grpc, "reordered", {"x": x, "mask": values((2, mask_len))})["y"]
        assert y.shape == (1, x_len)
        np.testing.assert_array_equal(y, 2 * x + 1)
    with pytest.raises(InferenceServerException) as failed:
        infer(grpc, "reordered", {"x": values((1, 8)), "mask": values((2, 6))})
    assert ("input shapes [1,8] and [2,6] match no gear: the model was compiled with dynamic dims "
            "gears [2,4,1,8], [2,6,1,16] (atc --dynamic_dims)") in str(failed.value)


def test_concurrent_requests_of_different_lengths_each_get_their_own_gear(
    npu_shared: SharedNpuServer
) -> None:
    """Two buffer sets in flight with different gears: each answer has its own shape."""
    write_model(npu_shared.repo, "seq", gear_config("[1, -1]") +
                "instance_group [{ kind: KIND_CPU, count: 2 }]\n", dims_gear_om())
    server = npu_shared.load(*["seq"])
    lengths = [8, 16] * 12
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(
            lambda n: infer(server.grpc_url, "seq", {"x": values((1, n)) + n})["y"],
            lengths))
    for n, y in zip(lengths, answers, strict=True):
        np.testing.assert_array_equal(y, 2 * (values((1, n)) + n) + 1)


GEAR_CONFIG_ERRORS = {
    # model: (om text, config, what the load error says)
    "unvarying_dim_as_dynamic": (
        dims_gear_om(), gear_config("[-1, -1]"),
        "input 'x': expected dims [1,-1] (model.om dims [1,-1]), got [-1,-1]; model.om was "
        + DIMS_GEARS),
    "fixed_length_the_gears_vary": (
        dims_gear_om(), gear_config("[1, 16]"),
        "input 'x': expected dims [1,-1] (model.om dims [1,-1]), got [1,16]; model.om was "
        + DIMS_GEARS),
    "fixed_image_size": (
        image_gear_om(), gear_config("[1, 3, 4, 4]"),
        "input 'x': expected dims [1,3,-1,-1] (model.om dims [1,3,-1,-1]), got [1,3,4,4]; "
        "model.om was " + IMAGE_GEARS),
    "output_fixed": (
        dims_gear_om(), gear_config("[1, -1]", out_dims="[1, 8]"),
        "output 'y': expected dims [1,-1] (model.om dims [1,-1]), got [1,8]; model.om was "
        + DIMS_GEARS),
    "batched": (
        dims_gear_om(), gear_config("[-1]", max_batch=4),
        "model.om was " + DIMS_GEARS + ", which fix every dim (dim 0 included); expected "
        "max_batch_size 0, got 4"),
    # a -1 outside the batch dimension and no gears: a row's size is unknown, refused at load
    "dynamic_without_gears": (
        double_model([("x", "FP32", "-1,-1,4")], [("y", "FP32", "-1,-1,4", "from x scale 2 offset 1")],
                     gears="1,2"),
        gear_config("[-1, 4]", max_batch=2),
        "input 'x': model.om has dynamic dims [-1,-1,4]; only a dynamic batch dimension is supported"),
}


def test_config_dims_that_contradict_the_gears_fail_the_load(
    npu_shared: SharedNpuServer
) -> None:
    for name, (om, config, _) in GEAR_CONFIG_ERRORS.items():
        write_model(npu_shared.repo, name, config, om)
    affine_model(npu_shared.repo, "batch_gears")
    server = npu_shared.load(*["batch_gears"])
    held = settled_live_resources(server.state_file)
    for name, (_, _, message) in GEAR_CONFIG_ERRORS.items():
        status, error = load(server.url, name)
        assert status == 400, (name, error)
        assert message in error, (name, error)
        assert not model_ready(server.url, name)
    assert model_ready(server.url, "batch_gears")
    assert settled_live_resources(server.state_file) == held  # nothing of the failed loads left


def test_auto_complete_writes_minus_one_where_the_gears_vary(
    npu_shared: SharedNpuServer
) -> None:
    write_model(npu_shared.repo, "seq", "", dims_gear_om())
    write_model(npu_shared.repo, "image", "", image_gear_om())
    server = npu_shared.load(*["seq", "image"])
    for name, dims in (("seq", [1, -1]), ("image", [1, 3, -1, -1])):
        config = requests.get(f"{server.url}/v2/models/{name}/config", timeout=10).json()
        assert config.get("max_batch_size", 0) == 0, config
        assert [(t["name"], t["dims"]) for t in config["input"]] == [("x", dims)]
        assert [(t["name"], t["dims"]) for t in config["output"]] == [("y", dims)]
    x = values((1, 16))
    np.testing.assert_array_equal(infer(server.grpc_url, "seq", {"x": x})["y"], 2 * x + 1)


def test_a_runtime_that_cannot_set_gears_fails_the_load_naming_the_call(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    write_model(npu_repo, "seq", gear_config("[1, -1]"), dims_gear_om())
    write_model(npu_repo, "image", gear_config("[1, 3, -1, -1]"), image_gear_om())
    affine_model(npu_repo, "batch_gears")
    build = dataclasses.replace(
        npu_build, double_dir=npu_build.build_dir / "acl_double_no_shape_gears")
    server = npu_triton(npu_repo, models=["batch_gears"], build=build)
    for name, gears, call in (("seq", DIMS_GEARS, "aclmdlSetInputDynamicDims"),
                              ("image", IMAGE_GEARS, "aclmdlSetDynamicHWSize")):
        status, error = load(server.url, name)
        assert status == 400, (name, error)
        assert (f"{gears}, which need {call} (documented in CANN 6.0.1 and later); this "
                "libascendcl.so does not export it") in error, error
    assert model_ready(server.url, "batch_gears")


def test_a_negative_or_huge_dimension_is_refused_by_its_shape_not_a_wrapped_byte_count(
    npu_shared: SharedNpuServer
) -> None:
    """gRPC carries int64 dims (HTTP's JSON parser refuses a negative one itself)."""
    write_model(npu_shared.repo, "seq", gear_config("[1, -1]"), dims_gear_om())
    server = npu_shared.load(*["seq"])
    channel = grpc.insecure_channel(server.grpc_url.removeprefix("grpc://"))
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    said: dict[tuple[int, ...], str] = {}
    try:
        for shape in ([1, -4], [1, 2**62]):
            request = service_pb2.ModelInferRequest(model_name="seq", inputs=[
                service_pb2.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=shape)])
            request.raw_input_contents.append(b"")
            with pytest.raises(grpc.RpcError) as refused:
                stub.ModelInfer(request, timeout=30)
            said[tuple(shape)] = refused.value.details()
    finally:
        channel.close()
    # Triton's own check refuses the negative one; 2**62 x 4 bytes wraps to the 0 bytes sent.
    assert "input byte size mismatch for input 'x'" in said[(1, -4)], said
    assert said[(1, 2**62)] == ("input 'x': shape [1,4611686018427387904] has a negative dimension or more "
                                "elements than fit in memory"), said
    x = values((1, 8))  # the instance keeps serving
    np.testing.assert_array_equal(infer(server.grpc_url, "seq", {"x": x})["y"], 2 * x + 1)
