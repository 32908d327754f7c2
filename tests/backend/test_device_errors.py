"""Device errors of a two-device npu_ge model, in the real tritonserver with the ACL double
putting one device in error ($NPU_GE_DOUBLE_DEVICE_ERROR, tests/backend/acl_double/execution.cc):
npu_ge counts each failed execution whose ACL error is of CANN's device class in
npu_ge_device_errors_total{device,code} (the table in backend_src/src/device_errors.cc), the
faulted device's instance does what its class says (a memory error breaks it for good; an AI
Core exception makes it rebuild), and the other device's instance goes on serving.

What is verified only with the double: which code a real device returns (read from
rt_error_codes.h, not observed), and that it keeps returning it (the double's device stays in
error until the process ends)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.asan import sanitizer_reports, shut_down_after_leak_check, start_asan_server
from tests.support.npu_ge import (
    NpuServer,
    StartServer,
    affine_model,
    double_state,
    infer,
    live_resources,
    metric_samples,
    wait_for,
)

pytestmark = pytest.mark.integration

HBM_ECC = 507054  # ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR: device-lost class (memory)
AICORE_EXCEPTION = 507015  # ACL_ERROR_RT_AICORE_EXCEPTION: counted, the instance rebuilds
README = Path(__file__).resolve().parents[2] / "backend_src" / "README.md"
TABLE = Path(__file__).resolve().parents[2] / "backend_src" / "src" / "device_errors.cc"


def rows(value: float) -> np.ndarray:
    return np.full((1, 4), value, dtype=np.float32) + np.arange(4, dtype=np.float32)


def try_infer(server: NpuServer, model: str, x: np.ndarray) -> np.ndarray | str:
    try:
        return infer(server.grpc_url, model, {"x": x})["y"]
    except InferenceServerException as exc:
        return str(exc)


def device_errors(server: NpuServer) -> dict[tuple[str, str], float]:
    return {(labels["device"], labels["code"]): value
            for labels, value in metric_samples(server.metrics_url, "npu_ge_device_errors")}


def by_instance(server: NpuServer, family: str, model: str) -> dict[str, float]:
    return {labels["instance"]: value for labels, value in metric_samples(server.metrics_url, family)
            if labels.get("model") == model}


def placements(server: NpuServer, model: str) -> dict[str, str]:
    return {labels["instance"]: labels["device"]
            for labels, value in metric_samples(server.metrics_url, "npu_ge_instance_device")
            if labels["model"] == model and value == 1}


def ran_on(server: NpuServer) -> dict[str, int]:
    """The double's count of executions run to their end, per device."""
    return {k: int(v) for k, v in double_state(server.state_file).get("executions_by_device", {}).items()}


def serve_until(
    server: NpuServer, model: str, *, errors: int, answers: int, limit: int = 60
) -> tuple[list[str], int]:
    """Sends requests one at a time (Triton hands each to whichever instance is free) until
    `errors` failed and `answers` were answered after the first failure; every answer is
    checked. Returns the error texts and the number of answers."""
    failed: list[str] = []
    answered = after_fault = 0
    for i in range(limit):
        out = try_infer(server, model, rows(i))
        if isinstance(out, str):
            failed.append(out)
        else:
            np.testing.assert_array_equal(out, 2 * rows(i) + 1)
            answered += 1
            after_fault += 1 if failed else 0
        if len(failed) >= errors and after_fault >= answers:
            return failed, answered
    raise AssertionError(f"{limit} requests: {len(failed)} failed, {after_fault} answered after the fault")


def test_a_memory_error_on_one_device_is_counted_breaks_its_instance_and_the_other_device_serves(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "faulty", instances=2, device_ids="0,1", batching="")
    # device 1 runs two executions, then reports a multi-bit ECC error on its third
    server = npu_triton(npu_repo, env={"NPU_GE_DOUBLE_DEVICE_ERROR": f"1:{HBM_ECC}:2"})
    where = placements(server, "faulty")
    assert sorted(where.values()) == ["0", "1"], where
    on_1 = next(name for name, device in where.items() if device == "1")
    failed, answered = serve_until(server, "faulty", errors=3, answers=4)
    first, *later = failed
    assert f"device 1 is lost (ACL error {HBM_ECC}, ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR" in first, first
    for text in later:  # answered at once with the reason, never run on device 1 again
        assert "device 1" in text and "a device-lost class of error: the instance is broken" in text, text
    wait_for(lambda: device_errors(server) == {("1", str(HBM_ECC)): 1}, 10, "the device error counted")
    assert by_instance(server, "npu_ge_device_lost", "faulty") == {
        name: float(device == "1") for name, device in where.items()}
    assert by_instance(server, "npu_ge_instance_broken", "faulty")[on_1] == 1
    # every answer was an execution; device 1 ran exactly its two, device 0 all the others
    assert ran_on(server) == {"0": answered - 2, "1": 2}, (ran_on(server), answered)
    # the placements stay readable for the fault view: the broken instance is still on device 1
    assert placements(server, "faulty") == where
    assert device_errors(server) == {("1", str(HBM_ECC)): 1}  # counted once: nothing ran again


def test_an_ai_core_exception_is_counted_and_the_instance_tries_to_rebuild_instead_of_breaking(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "core", instances=2, device_ids="0,1", batching="")
    server = npu_triton(npu_repo, env={"NPU_GE_DOUBLE_DEVICE_ERROR": f"1:{AICORE_EXCEPTION}"})
    failed, _ = serve_until(server, "core", errors=2, answers=2)
    first, second = failed[0], failed[1]
    assert (f"device 1 reported a device fault (ACL error {AICORE_EXCEPTION}, ACL_ERROR_RT_AICORE_EXCEPTION, "
            "counted in npu_ge_device_errors_total); the instance rebuilds") in first, first
    # not of the lost class: the instance rebuilds; the double's device stays in error, so the
    # rebuild fails with the same code (and is not counted as another failed execution)
    assert "cannot rebuild the instance" in second and f"ACL error {AICORE_EXCEPTION}" in second, second
    counted = {("1", str(AICORE_EXCEPTION)): 1}
    wait_for(lambda: device_errors(server) == counted, 10, "the device error counted")
    assert sum(by_instance(server, "npu_ge_device_lost", "core").values()) == 0
    assert sum(by_instance(server, "npu_ge_instance_broken", "core").values()) == 0
    assert sorted(placements(server, "core").values()) == ["0", "1"]


def test_device_errors_and_failed_rebuilds_are_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    # counting (a metric created at the first error), the rebuild that fails half way on the
    # device in error, again and again, and the unload of both instances
    affine_model(npu_repo, "core", instances=2, device_ids="0,1", batching="")
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["core"],
                                        {"NPU_GE_DOUBLE_DEVICE_ERROR": f"1:{AICORE_EXCEPTION}"})
    failed, _ = serve_until(server, "core", errors=4, answers=4)
    assert f"ACL error {AICORE_EXCEPTION}" in failed[0] and "cannot rebuild the instance" in failed[-1]
    counted = {("1", str(AICORE_EXCEPTION)): 1}
    wait_for(lambda: device_errors(server) == counted, 10, "the device error counted")
    leaks = shut_down_after_leak_check(server)
    assert live_resources(server.state_file) == {}
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())


def test_the_readme_lists_every_code_of_the_table_with_its_header_name() -> None:
    table = dict(re.findall(r"\{(\d{6}), \"(ACL_ERROR_RT_\w+)\"", TABLE.read_text()))
    assert len(table) == 11, table
    section = README.read_text().split("**Device errors.**")[1].split("\n\n")[0]
    listed = dict(re.findall(r"(\d{6})\s+`(ACL_ERROR_RT_\w+)`", section))
    assert listed == table
