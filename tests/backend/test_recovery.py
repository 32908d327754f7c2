"""Recovery after a failed wait as CANN documents it, in the real tritonserver with the ACL
double made as strict (tests/backend/acl_double/streams.h): aclrtStreamAbort is refused on
the products CANN's tables mark unsupported (NPU_GE_DOUBLE_PRODUCT=atlas_inference, a 310P),
and aclrtDestroyStreamForce does not stop the running task, which goes on writing into its
buffers after the call. So npu_ge parks everything the abandoned execution may touch,
rebuilds with fresh buffers, and frees the parked ones at unload only after a bounded
device synchronize returned; else it leaves them allocated and says so (log line and
npu_ge_parked_leaked_total). A device-lost class of error breaks the instance for good.

Not tested here: model readiness through TRITONBACKEND_ModelInstanceReady (Triton 2.51,
the one in these tests, never calls it; docs/verification.md)."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import take_snapshot
from geadmin.diagnose.verdict import Level, VerdictRule
from geadmin.triton.client import TritonClient
from tests.support.asan import sanitizer_reports, shut_down_after_leak_check, start_asan_server
from tests.support.npu_ge import (
    BackendBuild,
    NpuServer,
    StartServer,
    affine_model,
    infer,
    live_resources,
    metric_samples,
    settled_live_resources,
    unload,
    wait_for,
)

pytestmark = pytest.mark.integration

POISON = -7.0  # fail_execute_on_value: the execution fails on the device
LOST = -9.0  # NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE: the device is lost
HANG = 99.0  # hang_on_value: the execution never finishes
ON_310P = {"NPU_GE_DOUBLE_PRODUCT": "atlas_inference"}  # no aclrtStreamAbort (CANN's tables)
ROW_US = 250_000  # delay_per_row_us of the slow model: 1 row 0.25 s, 8 rows 2 s


def params(**values: str) -> str:
    return "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
                   for k, v in values.items())


def rows_of(value: float, rows: int = 1) -> np.ndarray:
    return np.full((rows, 4), value, dtype=np.float32) + np.arange(4, dtype=np.float32)


def try_infer(server: NpuServer, model: str, x: np.ndarray) -> np.ndarray | str:
    try:
        return infer(server.grpc_url, model, {"x": x})["y"]
    except InferenceServerException as exc:
        return str(exc)


def metric(server: NpuServer, family: str, model: str | None = None) -> float:
    samples = metric_samples(server.metrics_url, family)
    return sum(v for labels, v in samples if model is None or labels.get("model") == model)


def late_work(server: NpuServer) -> dict[str, int]:
    """The double's counts of work done by force-destroyed streams after the call."""
    path = Path(f"{server.state_file}.streams")
    state = json.loads(path.read_text()) if path.exists() else {}
    return {k: int(state.get(k, 0)) for k in ("orphan_streams", "late_writes", "touched_freed_memory")}


def test_on_a_310p_the_forced_stream_is_parked_and_its_late_writes_never_reach_the_rebuilt_instance(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # 8 rows take 2 s and time out at 1 s; the abandoned execution goes on for another second
    # and then writes its outputs (and its queued copy-out) into the buffers it was given.
    affine_model(npu_repo, "slow", batching="", extra=[f"delay_per_row_us {ROW_US}"],
                 config_extra=params(execute_timeout_ms="1000"))
    server = npu_triton(npu_repo, env=ON_310P)
    error = try_infer(server, "slow", rows_of(1, rows=8))
    assert isinstance(error, str) and "execute_timeout_ms=1000" in error, error
    y = try_infer(server, "slow", rows_of(3))  # rebuilt with fresh buffers, at once
    np.testing.assert_array_equal(y, 2 * rows_of(3) + 1)
    log = server.log()
    assert "aclrtStreamAbort failed: ACL error 207000" in log  # refused, as on a 310P
    assert "destroyed the stream of the failed execution with aclrtDestroyStreamForce" in log
    assert "parked the abandoned execution's buffers, staging, model and context" in log
    assert metric(server, "npu_ge_parked_executions", "slow") == 1
    assert metric(server, "npu_ge_instance_recoveries", "slow") == 1
    # The abandoned execution finishes late: its writes land in the parked buffers and pinned
    # staging (still allocated, the same allocations); none lands in memory freed since it was
    # queued, which is where a write into the rebuilt instance's buffers would have to go.
    wait_for(lambda: late_work(server)["late_writes"] >= 2, 10, "the late writes")
    assert late_work(server)["touched_freed_memory"] == 0
    for v in (4, 5):  # the rebuilt instance's answers are its own
        np.testing.assert_array_equal(try_infer(server, "slow", rows_of(v)), 2 * rows_of(v) + 1)
    # At unload the device confirms (bounded) that nothing runs any more: everything is freed.
    unload(server.url, "slow")
    wait_for(lambda: live_resources(server.state_file).get("allocations", 0) == 0, 30,
             "the parked buffers freed at unload")
    assert settled_live_resources(server.state_file) == {}
    assert metric(server, "npu_ge_parked_leaked") == 0
    assert late_work(server)["touched_freed_memory"] == 0


def test_every_failed_wait_aborts_then_forces_and_parks_and_too_many_put_the_instance_out_of_service(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # Not a timeout: an execution that fails on the device. Its stream is stopped the same way
    # (aclrtDestroyStream is never trusted after a failed wait), and parked on a 310P.
    affine_model(npu_repo, "fragile", batching="", extra=[f"fail_execute_on_value {POISON}"])
    server = npu_triton(npu_repo, env=ON_310P)
    for parked in range(1, 5):
        error = try_infer(server, "fragile", rows_of(POISON))
        assert isinstance(error, str) and "ACL error 507011" in error, error
        np.testing.assert_array_equal(try_infer(server, "fragile", rows_of(1)), 2 * rows_of(1) + 1)
        assert metric(server, "npu_ge_parked_executions", "fragile") == parked
    assert server.log().count("aclrtStreamAbort failed: ACL error 207000") == 4
    assert metric(server, "npu_ge_instance_broken", "fragile") == 0
    # A fifth would hold a fifth copy of the model until unload: the instance stops serving.
    assert "ACL error 507011" in str(try_infer(server, "fragile", rows_of(POISON)))
    error = try_infer(server, "fragile", rows_of(1))
    assert isinstance(error, str) and "were abandoned to streams destroyed by force" in error, error
    assert "reload the model" in error
    assert metric(server, "npu_ge_instance_broken", "fragile") == 1
    unload(server.url, "fragile")  # the failed executions ended: all five are freed
    wait_for(lambda: live_resources(server.state_file).get("models", 0) == 0, 30, "all freed at unload")
    assert settled_live_resources(server.state_file) == {}
    assert metric(server, "npu_ge_parked_leaked") == 0


def test_a_hung_execution_forced_off_its_stream_is_leaked_at_unload_with_a_metric_and_a_log_line(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "stuck", batching="", extra=[f"hang_on_value {HANG}"],
                 config_extra=params(execute_timeout_ms="300"))
    server = npu_triton(npu_repo, env=ON_310P)
    assert "execute_timeout_ms=300" in str(try_infer(server, "stuck", rows_of(HANG)))
    np.testing.assert_array_equal(try_infer(server, "stuck", rows_of(1)), 2 * rows_of(1) + 1)
    assert metric(server, "npu_ge_parked_executions", "stuck") == 1
    unload(server.url, "stuck")  # returns: the device synchronize is bounded
    wait_for(lambda: metric(server, "npu_ge_parked_leaked") == 1, 30, "the leak counted")
    assert metric_samples(server.metrics_url, "npu_ge_parked_leaked")[0][0] == {"device": "0"}
    log = server.log()
    assert "leaving an abandoned execution's buffers, staging, model and context allocated" in log
    assert "aclrtSynchronizeDeviceWithTimeout failed: ACL error 507046" in log
    # exactly the parked execution is left: the rebuilt instance's resources were freed
    left = live_resources(server.state_file)
    assert left.get("models") == 1 and left.get("contexts") == 1, left
    assert late_work(server)["touched_freed_memory"] == 0


def test_a_lost_device_breaks_the_instance_for_good_and_other_devices_serve(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    affine_model(npu_repo, "on_lost", batching="", device_ids="0")
    affine_model(npu_repo, "elsewhere", batching="", device_ids="1")
    server = npu_triton(npu_repo, env={"NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE": str(LOST)})
    error = try_infer(server, "on_lost", rows_of(LOST))
    assert isinstance(error, str), error
    assert "ACL error 507010" in error and "device 0 is lost" in error, error
    wait_for(lambda: metric(server, "npu_ge_device_lost", "on_lost") == 1, 10, "the loss counted")
    assert metric(server, "npu_ge_instance_broken", "on_lost") == 1
    # Triton 2.51 keeps the model READY (it never asks TRITONBACKEND_ModelInstanceReady): geadmin's
    # verdict reads the broken instance from the metrics and says it, with the next step.
    with TritonClient(server.url) as client:
        verdict = assess(take_snapshot("npu", client), EvidenceSources(metrics_url=server.metrics_url))
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.INSTANCE_BROKEN], verdict.reasons
    (reason,) = verdict.reasons
    assert reason.model == "on_lost" and "no instance left that can execute" in reason.text, reason
    assert "geadmin models reload on_lost" in reason.fix
    # the ticket's bundle weighs what status weighs: its verdict reads the same metrics
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", server.metrics_url)
    bundle = tmp_path / "bundle.tar.gz"
    assert main(["bundle", "--output", str(bundle)]) == ExitCode.OK
    capsys.readouterr()
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("geadmin-bundle/verdict.json")
        assert member is not None
        bundled = json.load(member)
    assert (bundled["verdict"], bundled["rules"]) == ("DEGRADED", ["instance-broken"]), bundled
    for _ in range(2):  # answered at once with the reason, never rebuilt on the lost device
        error = try_infer(server, "on_lost", rows_of(1))
        assert isinstance(error, str) and "a device-lost class of error: the instance is broken" in error
    assert metric(server, "npu_ge_instance_recoveries", "on_lost") == 0
    assert metric(server, "npu_ge_device_lost", "on_lost") == 1
    np.testing.assert_array_equal(try_infer(server, "elsewhere", rows_of(2)), 2 * rows_of(2) + 1)
    # Nothing of the lost device is freed: it cannot confirm that nothing touches it any more.
    unload(server.url, "on_lost")
    wait_for(lambda: metric(server, "npu_ge_parked_leaked") == 1, 30, "the leak counted")
    assert "ACL error 507010" in server.log().split("leaving an abandoned execution's")[1]
    np.testing.assert_array_equal(try_infer(server, "elsewhere", rows_of(3)), 2 * rows_of(3) + 1)


def test_without_a_bounded_device_synchronize_parked_resources_are_leaked_not_waited_for(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    # An older CANN without aclrtSynchronizeDeviceWithTimeout: aclrtSynchronizeDevice could
    # block the unload for ever, so npu_ge never calls it.
    affine_model(npu_repo, "fragile", batching="", extra=[f"fail_execute_on_value {POISON}"])
    build = dataclasses.replace(npu_build, double_dir=npu_build.build_dir / "acl_double_no_device_sync")
    server = npu_triton(npu_repo, env=ON_310P, build=build)
    assert "ACL error 507011" in str(try_infer(server, "fragile", rows_of(POISON)))
    np.testing.assert_array_equal(try_infer(server, "fragile", rows_of(1)), 2 * rows_of(1) + 1)
    unload(server.url, "fragile")
    wait_for(lambda: metric(server, "npu_ge_parked_leaked") == 1, 30, "the leak counted")
    assert "has no aclrtSynchronizeDeviceWithTimeout" in server.log()


def test_parking_and_freeing_at_unload_are_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    # The 310P path under ASan: a late write into parked buffers and pinned staging, parked
    # executions freed at unload and at shutdown, a rebuild after an execution error.
    affine_model(npu_repo, "slow", batching="", extra=[f"delay_per_row_us {ROW_US}"],
                 config_extra=params(execute_timeout_ms="1000"))
    affine_model(npu_repo, "fragile", batching="", extra=[f"fail_execute_on_value {POISON}"])
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["slow", "fragile"], ON_310P)
    assert "execute_timeout_ms=1000" in str(try_infer(server, "slow", rows_of(1, rows=8)))
    assert "ACL error 507011" in str(try_infer(server, "fragile", rows_of(POISON)))
    for model in ("slow", "fragile"):
        np.testing.assert_array_equal(try_infer(server, model, rows_of(2)), 2 * rows_of(2) + 1)
    wait_for(lambda: late_work(server)["late_writes"] >= 2, 20, "the late writes")
    unload(server.url, "slow")  # "fragile" keeps its parked execution until shutdown
    leaks = shut_down_after_leak_check(server)
    assert live_resources(server.state_file) == {}
    assert late_work(server)["touched_freed_memory"] == 0
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())
