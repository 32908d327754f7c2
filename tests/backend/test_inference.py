"""npu_ge inside the real tritonserver with the ACL runtime test double: results,
dynamic batching, batch gears, several inputs/outputs and data types."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.support.npu_ge import (
    SharedNpuServer,
    affine_model,
    double_model,
    infer,
    model_stats,
    write_model,
)

pytestmark = pytest.mark.integration


def test_single_and_batched_requests_are_correct(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "affine")
    server = npu_shared.load_all()
    one = np.array([[1, 2, 3, 4]], dtype=np.float32)
    out = infer(server.grpc_url, "affine", {"x": one})["y"]
    np.testing.assert_array_equal(out, 2 * one + 1)
    three = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    out = infer(server.grpc_url, "affine", {"x": three})["y"]
    assert out.shape == (3, 4)  # gear 4 ran; the padding row is not returned
    np.testing.assert_array_equal(out, 2 * three + 1)


def test_dynamic_batching_happens_and_every_concurrent_result_is_right(
    npu_shared: SharedNpuServer
) -> None:
    affine_model(
        npu_shared.repo, "batched", max_batch=16, gears="1,2,4,8,16", extra=["delay_us 3000"],
        batching="dynamic_batching { max_queue_delay_microseconds: 20000 }",
    )
    server = npu_shared.load_all()
    url = server.grpc_url
    requests_n = 96

    def one(i: int) -> tuple[int, np.ndarray]:
        x = np.full((1, 4), float(i), dtype=np.float32) + np.arange(4, dtype=np.float32)
        return i, infer(url, "batched", {"x": x})["y"]

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(requests_n)))
    for i, y in results:
        np.testing.assert_array_equal(y, 2 * (np.full((1, 4), float(i)) + np.arange(4)) + 1)
    stats = model_stats(server.url, "batched")
    assert stats["inference_count"] == requests_n
    assert 0 < stats["execution_count"] < requests_n, stats
    assert max(int(b["batch_size"]) for b in stats["batch_stats"]) > 1


def test_several_inputs_and_outputs_map_by_name(npu_shared: SharedNpuServer) -> None:
    # The .om declares its inputs in the other order than the config.
    om = double_model(
        [("b", "INT32", "-1,3"), ("a", "INT32", "-1,3")],
        [("sum", "INT32", "-1,3", "from a,b scale 1 offset 0"),
         ("twice_a", "INT32", "-1,3", "from a scale 2 offset 0")],
        gears="1,2,4",
    )
    config = (
        "max_batch_size: 4\n"
        'input [{ name: "a", data_type: TYPE_INT32, dims: [3] },'
        ' { name: "b", data_type: TYPE_INT32, dims: [3] }]\n'
        'output [{ name: "twice_a", data_type: TYPE_INT32, dims: [3] },'
        ' { name: "sum", data_type: TYPE_INT32, dims: [3] }]\n'
        "dynamic_batching {}\n"
    )
    write_model(npu_shared.repo, "two_io", config, om)
    server = npu_shared.load_all()
    a = np.array([[1, 2, 3], [10, 20, 30]], dtype=np.int32)
    b = np.array([[100, 200, 300], [7, 8, 9]], dtype=np.int32)
    out = infer(server.grpc_url, "two_io", {"a": a, "b": b})
    np.testing.assert_array_equal(out["sum"], a + b)
    np.testing.assert_array_equal(out["twice_a"], 2 * a)


DTYPES = {"FP16": np.float16, "FP64": np.float64, "INT8": np.int8, "INT16": np.int16,
          "INT64": np.int64, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
          "UINT64": np.uint64, "FP32": np.float32, "INT32": np.int32}


def test_every_fixed_size_dtype_round_trips(npu_shared: SharedNpuServer) -> None:
    for name in [*DTYPES, "BF16"]:
        affine_model(npu_shared.repo, f"typed_{name.lower()}", dtype=name)
    server = npu_shared.load_all()
    for name, np_type in DTYPES.items():
        x = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], dtype=np_type)
        y = infer(server.grpc_url, f"typed_{name.lower()}", {"x": x})["y"]
        assert y.dtype == np.dtype(np_type), name
        np.testing.assert_array_equal(y, (2 * x.astype(np.float64) + 1).astype(np_type), err_msg=name)
    # BF16 has no numpy type: tritonclient sends float32 arrays as bfloat16 and returns
    # float32. Values whose 2x + 1 is exact in bfloat16 (8 significant bits).
    x = np.array([[0, 0.5, -3, 100], [1.5, -0.25, 64, -120]], dtype=np.float32)
    y = infer(server.grpc_url, "typed_bf16", {"x": x}, datatype="BF16")["y"]
    assert y.shape == (2, 4)
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_bool_tensors_pass_through(npu_shared: SharedNpuServer) -> None:
    om = double_model([("x", "BOOL", "-1,4")], [("y", "BOOL", "-1,4", "from x scale 1 offset 0")],
                      gears="1,2")
    write_model(npu_shared.repo, "flags", "max_batch_size: 2\n"
                'input [{ name: "x", data_type: TYPE_BOOL, dims: [4] }]\n'
                'output [{ name: "y", data_type: TYPE_BOOL, dims: [4] }]\n', om)
    server = npu_shared.load_all()
    x = np.array([[True, False, True, False]])
    np.testing.assert_array_equal(infer(server.grpc_url, "flags", {"x": x})["y"], x)


def test_static_batch_model_pads_and_returns_only_real_rows(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "static4", max_batch=4, gears=None)  # .om dims [4,4]
    server = npu_shared.load_all()
    x = np.array([[1, 1, 1, 1], [2, 2, 2, 2]], dtype=np.float32)
    y = infer(server.grpc_url, "static4", {"x": x})["y"]
    assert y.shape == (2, 4)
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_unbatched_model_serves_full_tensors(npu_shared: SharedNpuServer) -> None:
    om = double_model([("x", "FP32", "2,3")], [("y", "FP32", "2,3", "from x scale -1 offset 0")])
    write_model(npu_shared.repo, "nobatch", "max_batch_size: 0\n"
                'input [{ name: "x", data_type: TYPE_FP32, dims: [2, 3] }]\n'
                'output [{ name: "y", data_type: TYPE_FP32, dims: [2, 3] }]\n', om)
    server = npu_shared.load_all()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(infer(server.grpc_url, "nobatch", {"x": x})["y"], -x)
