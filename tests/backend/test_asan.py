"""The integration workload once more, with npu_ge and the ACL test double built with
AddressSanitizer (LeakSanitizer on) and loaded into the real tritonserver through
LD_PRELOAD: zero ASan errors, and zero leak reports with a frame in our code."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.asan import sanitizer_reports, shut_down_after_leak_check, start_asan_server
from tests.support.npu_ge import (
    StartServer,
    affine_model,
    build_backend,
    double_model,
    infer,
    live_resources,
    load,
    model_ready,
    unload,
    wait_for,
    write_model,
)

pytestmark = pytest.mark.integration

def workload(server_url: str, grpc_url: str) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def one(i: int) -> None:
        xi = x + i
        np.testing.assert_array_equal(infer(grpc_url, "batched", {"x": xi})["y"], 2 * xi + 1)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(64)))
    with pytest.raises(InferenceServerException, match="ACL error 507011"):
        infer(grpc_url, "fragile", {"x": np.full((1, 4), -7, dtype=np.float32)})
    np.testing.assert_array_equal(infer(grpc_url, "fragile", {"x": x})["y"], 2 * x + 1)
    status, error = load(server_url, "breaks")
    assert status == 400 and "fail_load" in error
    for _ in range(10):
        assert load(server_url, "cycled", timeout_s=60) == (200, "")
        unload(server_url, "cycled")
        wait_for(lambda: not model_ready(server_url, "cycled"), 60, "unload")


def gear_workload(grpc_url: str) -> None:
    """Dims gears: two lengths served, a third refused per request (gear set per dataset,
    output dims read back)."""
    for length in (16, 8):
        x = np.arange(length, dtype=np.float32).reshape(1, length)
        np.testing.assert_array_equal(infer(grpc_url, "seq", {"x": x})["y"], 2 * x + 1)
    with pytest.raises(InferenceServerException, match="matches no gear"):
        infer(grpc_url, "seq", {"x": np.zeros((1, 12), dtype=np.float32)})


def test_integration_workload_is_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    affine_model(npu_repo, "batched", instances=2, device_ids="0,1", extra=["delay_us 500"],
                 batching="dynamic_batching { max_queue_delay_microseconds: 5000 }")
    affine_model(npu_repo, "fragile", extra=["fail_execute_on_value -7"])
    affine_model(npu_repo, "breaks", extra=["fail_load"])
    affine_model(npu_repo, "cycled", instances=2)
    write_model(npu_repo, "seq", "max_batch_size: 0\n"
                'input [{ name: "x", data_type: TYPE_FP32, dims: [1, -1] }]\n'
                'output [{ name: "y", data_type: TYPE_FP32, dims: [1, -1] }]\n',
                double_model([("x", "FP32", "1,-1")], [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                             extra=["dynamic_dims 8;16"]))
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["batched", "fragile", "seq"], {})
    workload(server.url, server.process.grpc_url)
    gear_workload(server.process.grpc_url)
    assert live_resources(server.state_file) != {}  # the loaded models hold resources
    leaks = shut_down_after_leak_check(server)
    assert live_resources(server.state_file) == {}
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())


def test_older_cann_and_auto_complete_are_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    # the optional telemetry symbols missing (older CANN), and a config completed from the
    # .om (describe, JSON written back, TRITONBACKEND_ModelSetConfig) on every reload
    write_model(npu_repo, "bare", "instance_group [{ kind: KIND_CPU, count: 2 }]\n",
                double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 2 offset 1")],
                             gears="1,2,4,8"))
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["bare"], {},
                                        double_variant="no_telemetry")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for _ in range(3):
        np.testing.assert_array_equal(infer(server.process.grpc_url, "bare", {"x": x})["y"], 2 * x + 1)
        unload(server.url, "bare")
        wait_for(lambda: not model_ready(server.url, "bare"), 60, "unload")
        assert load(server.url, "bare", timeout_s=60) == (200, "")
    assert "optional ACL functions missing from" in server.log()
    leaks = shut_down_after_leak_check(server)
    assert live_resources(server.state_file) == {}
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())


def test_the_leak_check_does_see_a_leak(npu_triton: StartServer, npu_repo: Path, tmp_path: Path) -> None:
    affine_model(npu_repo, "one")
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["one"],
                                        {"NPU_GE_DOUBLE_LEAK_ON_PURPOSE": "1"})
    assert shut_down_after_leak_check(server) == 1
    _, our_leaks = sanitizer_reports(log_dir)
    assert len(our_leaks) == 1 and "Direct leak of 4242 byte(s)" in our_leaks[0], our_leaks


def test_unit_tests_are_clean_under_address_sanitizer() -> None:
    build = build_backend(asan=True)
    done = subprocess.run(["ctest", "--test-dir", str(build.build_dir), "--output-on-failure", "-j2"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:]
    assert "100% tests passed" in done.stdout
