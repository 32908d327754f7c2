"""npu_ge's host path in the real tritonserver with the ACL double (whose streams are
asynchronous, tests/backend/test_acl_double.py): the double's cost model as Triton
measures it, pipelined executions with two buffer sets (copy_overlap) and without, a
bounded wait (execute_timeout_ms) and the rebuild after a timeout or device error
(npu_ge_instance_recoveries_total), and an older CANN without pinned memory."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.asan import sanitizer_reports, shut_down_after_leak_check, start_asan_server
from tests.support.npu_ge import (
    BackendBuild,
    NpuServer,
    SharedNpuServer,
    StartServer,
    affine_model,
    double_state,
    infer,
    live_resources,
    load,
    metric_samples,
    model_ready,
    model_stats,
    settled_live_resources,
    unload,
    wait_for,
)

pytestmark = pytest.mark.integration

HANG = 99.0  # hang_on_value: the execution never finishes
POISON = -7.0  # fail_execute_on_value: the execution fails on the device
EXECUTION_US = 1_500_000  # the overlap test's execution: long beside any host stall


def params(**values: str) -> str:
    return "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
                   for k, v in values.items())


def overlap(on: bool) -> str:
    return params(copy_overlap="true" if on else "false")


def rows_of(value: float, rows: int = 1) -> np.ndarray:
    return np.full((rows, 4), value, dtype=np.float32) + np.arange(4, dtype=np.float32)


def try_infer(server: NpuServer, model: str, x: np.ndarray) -> np.ndarray | str:
    try:
        return infer(server.process.grpc_url, model, {"x": x})["y"]
    except InferenceServerException as exc:
        return str(exc)


def recoveries(server: NpuServer, model: str) -> float:
    samples = metric_samples(server.metrics_url, "npu_ge_instance_recoveries")
    return sum(value for labels, value in samples if labels["model"] == model)


def held_requests(server: NpuServer, model: str) -> float:
    samples = metric_samples(server.metrics_url, "npu_ge_instance_held_requests")
    return sum(v for labels, v in samples if labels.get("model") == model)


def overflows(server: NpuServer, model: str) -> float:
    samples = metric_samples(server.metrics_url, "npu_ge_execution_overflows")
    return sum(value for labels, value in samples if labels["model"] == model)


# -- the double's cost model, as Triton's statistics see it ---------------------------
def test_execution_time_is_the_fixed_plus_per_row_cost(npu_shared: SharedNpuServer) -> None:
    """Each execution's compute time is read alone (Triton's statistics before and after it) and
    the fastest of five counts: a stall of a busy host only adds to one, so the minimum is the
    cost model's, where a mean over three once put 64 ms on a 23 ms execution."""
    fixed_us, per_row_us = 20_000, 3_000
    for name in ("cost_1row", "cost_8rows"):
        affine_model(npu_shared.repo, name, batching="",
                     extra=[f"delay_us {fixed_us}", f"delay_per_row_us {per_row_us}"])
    server = npu_shared.load_all()

    def compute_infer(model: str) -> tuple[float, int]:
        infer_stats = model_stats(server.url, model)["inference_stats"]["compute_infer"]
        return float(infer_stats["ns"]), int(infer_stats["count"])

    def fastest_us(model: str, x: np.ndarray) -> float:
        times = []
        for _ in range(5):
            ns_before, count_before = compute_infer(model)
            np.testing.assert_array_equal(try_infer(server, model, x), 2 * x + 1)
            ns_after, count_after = compute_infer(model)
            assert count_after == count_before + 1
            times.append((ns_after - ns_before) / 1000)
        return min(times)

    one, eight = fastest_us("cost_1row", rows_of(1)), fastest_us("cost_8rows", rows_of(2, 8))  # gears 1, 8
    assert one >= fixed_us + per_row_us, one
    assert eight >= fixed_us + 8 * per_row_us, eight
    assert eight - one >= 0.7 * 7 * per_row_us, (one, eight)  # the per-row part is there
    assert one < 5 * (fixed_us + per_row_us), one  # loosely bounded above too


# -- pipelining ------------------------------------------------------------------------
@pytest.mark.parametrize("on", [True, False], ids=["overlap", "no_overlap"])
def test_every_concurrent_result_is_right_with_and_without_overlap(
    npu_shared: SharedNpuServer, on: bool
) -> None:
    affine_model(npu_shared.repo, "busy", max_batch=8, instances=2,
                 extra=["delay_us 1500", "delay_per_row_us 100"],
                 batching="dynamic_batching { max_queue_delay_microseconds: 1000 }", config_extra=overlap(on))
    server = npu_shared.load_all()
    assert f"{2 if on else 1} buffer set(s)" in server.log()

    def client(c: int) -> list[tuple[np.ndarray, np.ndarray | str]]:
        out = []
        for k in range(12):
            x = rows_of(1000 * c + k, rows=1 + (c + k) % 3)  # 1-3 rows: batches mix sizes
            out.append((x, try_infer(server, "busy", x)))
        return out

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = [r for rs in pool.map(client, range(24)) for r in rs]
    for x, y in results:
        assert not isinstance(y, str), y
        np.testing.assert_array_equal(y, 2 * x + 1)  # each request gets its own rows back
    stats = model_stats(server.url, "busy")
    assert stats["inference_stats"]["success"]["count"] == 24 * 12
    assert max(int(b["batch_size"]) for b in stats["batch_stats"]) > 1
    assert recoveries(server, "busy") == 0


@pytest.mark.parametrize("on", [True, False], ids=["overlap", "no_overlap"])
def test_with_overlap_the_next_request_is_taken_while_the_device_runs(
    npu_shared: SharedNpuServer, on: bool
) -> None:
    # One instance, no batching, 1.5 s per execution, two requests at once. With overlap
    # the second leaves Triton's queue at once (npu_ge gathers it while the first runs);
    # without, it waits in the queue for the whole first execution. The device runs them one
    # after the other either way. The execution is long so that a busy host (CI's other
    # worker) cannot blur the two: with overlap a queue wait is host time only.
    affine_model(npu_shared.repo, "serial", batching="", extra=[f"delay_us {EXECUTION_US}"],
                 config_extra=overlap(on))
    server = npu_shared.load_all()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try_infer(server, "serial", rows_of(0))  # connections up before the timed pair
    started = time.monotonic()
    answers = send_async(client, "serial", [1.0, 2.0])
    elapsed = time.monotonic() - started
    for v, (result, error) in answers.items():
        assert error is None, error
        np.testing.assert_array_equal(result.as_numpy("y"), 2 * rows_of(v) + 1)  # type: ignore[attr-defined]
    execution_s = EXECUTION_US / 1e6
    assert elapsed >= 2 * execution_s  # serialized on the stream
    queue = model_stats(server.url, "serial")["inference_stats"]["queue"]
    queue_s = queue["ns"] / 1e9  # of the three requests
    if on:
        assert queue_s < execution_s / 2, queue
    else:
        assert queue_s >= execution_s * 0.8, queue


def send_async(client: grpcclient.InferenceServerClient, model: str, values: list[float],
               timeout_s: float = 30) -> dict[float, tuple[object, object]]:
    """Sends one request per value at once; returns value -> (result, error)."""
    answers: dict[float, tuple[object, object]] = {}
    done = threading.Event()
    for v in values:
        x = grpcclient.InferInput("x", [1, 4], "FP32")
        x.set_data_from_numpy(rows_of(v))

        def callback(result: object, error: object, v: float = v) -> None:
            answers[v] = (result, error)
            if len(answers) == len(values):
                done.set()

        client.async_infer(model, [x], callback, client_timeout=timeout_s)
    assert done.wait(timeout_s)
    return answers


def test_a_request_cancelled_while_held_for_the_device_is_not_run(
    npu_shared: SharedNpuServer
) -> None:
    affine_model(npu_shared.repo, "held", batching="", extra=["delay_us 1000000"], config_extra=overlap(True))
    server = npu_shared.load_all()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: dict[str, tuple[object, object]] = {}
    done = threading.Event()

    def send(tag: str, value: float) -> grpcclient.CallContext:
        x = grpcclient.InferInput("x", [1, 4], "FP32")
        x.set_data_from_numpy(rows_of(value))

        def callback(result: object, error: object) -> None:
            answers[tag] = (result, error)
            if len(answers) == 2:
                done.set()

        return client.async_infer("held", [x], callback, client_timeout=30)

    ran = double_state(server.state_file)["executions"]  # the shared server's count so far
    send("first", 1.0)
    wait_for(lambda: double_state(server.state_file)["executions"] == ran + 1, 10, "the first execution")
    second = send("second", 2.0)
    # npu_ge takes it from Triton at once and holds it until the device is free
    wait_for(lambda: held_requests(server, "held") == 1, 10, "the second request held for the device")
    second.cancel()
    assert done.wait(30)
    assert answers["first"][1] is None, answers["first"]
    error = answers["second"][1]
    assert isinstance(error, InferenceServerException) and "CANCELLED" in str(error.status()), error
    wait_for(lambda: model_stats(server.url, "held")["inference_stats"]["fail"]["count"] == 1, 10,
             "the cancelled request to be answered")
    assert double_state(server.state_file)["executions"] == ran + 1  # never run


# -- timeout and recovery -------------------------------------------------------------
@pytest.mark.parametrize("on", [True, False], ids=["overlap", "no_overlap"])
def test_an_execution_longer_than_execute_timeout_ms_fails_and_the_instance_recovers(
    npu_shared: SharedNpuServer, on: bool
) -> None:
    affine_model(npu_shared.repo, "stuck", batching="", extra=[f"hang_on_value {HANG}", "delay_us 2000"],
                 config_extra=overlap(on) + params(execute_timeout_ms="400"))
    server = npu_shared.load_all()
    held = settled_live_resources(server.state_file)
    started = time.monotonic()
    error = try_infer(server, "stuck", rows_of(HANG))
    assert isinstance(error, str), error
    assert 0.4 <= time.monotonic() - started < 5
    assert "execution did not finish within execute_timeout_ms=400 ms" in error
    # 507046: ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert "aclrtSynchronizeStreamWithTimeout failed: ACL error 507046" in error
    assert "model 'stuck' version 1 instance 'stuck_0_0'" in error
    for v in range(5):  # the next execution rebuilds the instance first, then all serve
        np.testing.assert_array_equal(try_infer(server, "stuck", rows_of(v)), 2 * rows_of(v) + 1)
    assert recoveries(server, "stuck") == 1
    assert "rebuilt context, stream, model and buffers after a failed execution" in server.log()
    # the double's aclrtDestroyStream waits for queued work as CANN's does: the hung execution
    # is stopped first, or the rebuild (and every later request) would wait for ever
    assert "stopped the failed execution with aclrtStreamAbort" in server.log()
    assert settled_live_resources(server.state_file) == held  # the abandoned stream and buffers are gone
    stats = model_stats(server.url, "stuck")["inference_stats"]
    assert stats["fail"]["count"] == 1 and stats["success"]["count"] == 5


def test_a_device_error_under_load_rebuilds_the_instance_and_only_its_requests_fail(
    npu_shared: SharedNpuServer
) -> None:
    affine_model(npu_shared.repo, "faulty", batching="",
                 extra=[f"fail_execute_on_value {POISON}", "delay_us 1000"])
    server = npu_shared.load_all()
    values = [POISON if i in (7, 21) else float(i) for i in range(40)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda v: (v, try_infer(server, "faulty", rows_of(v))), values))
    for v, y in results:
        if v == POISON:
            assert isinstance(y, str) and "ACL error 507011" in y and "poison value" in y, y
        else:
            assert not isinstance(y, str), y
            np.testing.assert_array_equal(y, 2 * rows_of(v) + 1)
    wait_for(lambda: recoveries(server, "faulty") == 2, 10, "two rebuilds")
    assert model_ready(server.url, "faulty")


def test_without_stream_abort_a_timed_out_stream_is_destroyed_by_force(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    affine_model(npu_repo, "stuck", batching="", extra=[f"hang_on_value {HANG}"],
                 config_extra=params(execute_timeout_ms="300"))
    build = dataclasses.replace(npu_build, double_dir=npu_build.build_dir / "acl_double_no_stream_abort")
    server = npu_triton(npu_repo, build=build)
    held = settled_live_resources(server.state_file)
    assert "aclrtStreamAbort (stopping a timed-out execution with aclrtStreamAbort off)" in server.log()
    assert "execute_timeout_ms=300" in str(try_infer(server, "stuck", rows_of(HANG)))
    np.testing.assert_array_equal(try_infer(server, "stuck", rows_of(1)), 2 * rows_of(1) + 1)
    assert recoveries(server, "stuck") == 1
    assert "destroyed the stream of the failed execution with aclrtDestroyStreamForce" in server.log()
    # CANN does not say the hung task stopped: everything it may touch stays parked until
    # unload (tests/backend/test_recovery.py), beside the rebuilt instance's own resources
    parked = settled_live_resources(server.state_file)
    assert parked["models"] == held["models"] + 1 and parked["contexts"] == held["contexts"] + 1


def test_when_nothing_can_stop_a_hung_stream_the_instance_leaves_it_and_fails_fast(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    # A CANN without aclrtStreamAbort and aclrtDestroyStreamForce: aclrtDestroyStream would
    # wait for the hung execution for ever, so npu_ge never calls it on that stream.
    affine_model(npu_repo, "stuck", batching="", extra=[f"hang_on_value {HANG}"],
                 config_extra=params(execute_timeout_ms="300"))
    affine_model(npu_repo, "other", batching="")
    build = dataclasses.replace(npu_build, double_dir=npu_build.build_dir / "acl_double_no_stream_stop")
    server = npu_triton(npu_repo, build=build)
    assert "has neither aclrtStreamAbort nor aclrtDestroyStreamForce" in server.log()
    assert "execute_timeout_ms=300" in str(try_infer(server, "stuck", rows_of(HANG)))
    for _ in range(2):  # answered (the client's bound is 30 s), never served again
        error = try_infer(server, "stuck", rows_of(1))
        assert isinstance(error, str), error
        assert "exports neither aclrtStreamAbort nor aclrtDestroyStreamForce" in error
        assert "serves no more requests" in error
    assert double_state(server.state_file)["streams"] >= 1  # left allocated, never destroyed
    np.testing.assert_array_equal(try_infer(server, "other", rows_of(2)), 2 * rows_of(2) + 1)
    unload(server.url, "stuck")  # returns: the unload does not wait for the hung stream either
    wait_for(lambda: not model_ready(server.url, "stuck"), 30, "the stuck model unloaded")
    np.testing.assert_array_equal(try_infer(server, "other", rows_of(3)), 2 * rows_of(3) + 1)


# -- sync codes that are a status, not a failure ----------------------------------------
OVERFLOW = 555.0  # overflow_on_value: the execution completes and the sync returns an overflow code


@pytest.mark.parametrize(("on", "code"), [(True, 207003), (False, 207017)], ids=["overlap", "no_overlap"])
def test_an_overflow_status_from_the_sync_answers_the_requests_and_is_counted(
    npu_shared: SharedNpuServer, on: bool, code: int
) -> None:
    # CANN's runtime logs ACL_ERROR_RT_AICORE_OVER_FLOW (207003), ..._AIVEC_OVER_FLOW (207016) and
    # ..._OVER_FLOW (207017) as a successful synchronize: the outputs exist, nothing is broken
    affine_model(npu_shared.repo, "flows", batching="",
                 extra=[f"overflow_on_value {OVERFLOW} {code}", f"fail_execute_on_value {POISON}"],
                 config_extra=overlap(on))
    server = npu_shared.load_all()
    for v in (OVERFLOW, 1.0, OVERFLOW):
        np.testing.assert_array_equal(try_infer(server, "flows", rows_of(v)), 2 * rows_of(v) + 1)
    assert overflows(server, "flows") == 2
    assert recoveries(server, "flows") == 0
    assert server.log().count(f"the stream synchronize returned ACL code {code}, an overflow status") == 1
    assert "ACL error 507011" in str(try_infer(server, "flows", rows_of(POISON)))  # a real error still fails
    np.testing.assert_array_equal(try_infer(server, "flows", rows_of(2)), 2 * rows_of(2) + 1)
    assert recoveries(server, "flows") == 1 and overflows(server, "flows") == 2
    stats = model_stats(server.url, "flows")["inference_stats"]
    assert stats["success"]["count"] == 4 and stats["fail"]["count"] == 1


# -- older CANN, resources ---------------------------------------------------------------
def test_without_pinned_memory_or_bounded_sync_the_host_path_still_serves(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    affine_model(npu_repo, "plain", extra=["delay_us 1000", f"fail_execute_on_value {POISON}",
                                           f"overflow_on_value {OVERFLOW}"],
                 batching="dynamic_batching { max_queue_delay_microseconds: 1000 }")
    build = dataclasses.replace(npu_build, double_dir=npu_build.build_dir / "acl_double_no_host_path")
    server = npu_triton(npu_repo, build=build)
    log = server.log()
    assert "aclrtMallocHost (pinned host staging and asynchronous copies off)" in log
    assert "aclrtSynchronizeStreamWithTimeout (execute_timeout_ms off)" in log
    assert double_state(server.state_file)["host_allocations"] == 0  # pageable staging
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda v: (v, try_infer(server, "plain", rows_of(v, 2))), range(48)))
    for v, y in results:
        np.testing.assert_array_equal(y, 2 * rows_of(v, 2) + 1)
    assert "ACL error 507011" in str(try_infer(server, "plain", rows_of(POISON)))
    np.testing.assert_array_equal(try_infer(server, "plain", rows_of(3)), 2 * rows_of(3) + 1)
    np.testing.assert_array_equal(try_infer(server, "plain", rows_of(OVERFLOW)), 2 * rows_of(OVERFLOW) + 1)
    assert recoveries(server, "plain") == 1 and overflows(server, "plain") == 1


def threads_of(server: NpuServer) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def test_load_unload_cycles_free_pinned_memory_and_join_every_thread(
    npu_shared: SharedNpuServer
) -> None:
    affine_model(npu_shared.repo, "cycled", instances=2, extra=["delay_us 500"])
    server = npu_shared
    x = rows_of(5, 2)

    def cycle() -> None:
        assert load(server.url, "cycled", timeout_s=30) == (200, "")
        # pinned staging: 2 instances x 2 buffer sets x (input, output)
        assert double_state(server.state_file)["host_allocations"] == 2 * 2 * 2
        np.testing.assert_array_equal(try_infer(server, "cycled", x), 2 * x + 1)
        unload(server.url, "cycled")
        wait_for(lambda: live_resources(server.state_file) == {}, 30, "device and pinned memory released")

    cycle()  # Triton's own per-model threads exist from here on
    time.sleep(0.5)
    baseline = threads_of(server)
    for _ in range(10):
        cycle()
    wait_for(lambda: threads_of(server) <= baseline, 10, f"thread count back to {baseline}")


def test_host_path_failures_are_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    # timeout + rebuild with the completion thread, device error + rebuild without it,
    # and pipelined concurrency: every abandoned stream, buffer and thread is released
    affine_model(npu_repo, "stuck", batching="", extra=[f"hang_on_value {HANG}"],
                 config_extra=overlap(True) + params(execute_timeout_ms="300"))
    affine_model(npu_repo, "faulty", extra=[f"fail_execute_on_value {POISON}"], config_extra=overlap(False))
    affine_model(npu_repo, "busy", instances=2, extra=["delay_us 500"],
                 batching="dynamic_batching { max_queue_delay_microseconds: 1000 }")
    server, log_dir = start_asan_server(npu_triton, npu_repo, tmp_path, ["stuck", "faulty", "busy"], {})
    assert "execute_timeout_ms=300" in str(try_infer(server, "stuck", rows_of(HANG)))
    assert "ACL error 507011" in str(try_infer(server, "faulty", rows_of(POISON)))
    for model in ("stuck", "faulty"):
        np.testing.assert_array_equal(try_infer(server, model, rows_of(1)), 2 * rows_of(1) + 1)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda v: (v, try_infer(server, "busy", rows_of(v))), range(64)))
    for v, y in results:
        np.testing.assert_array_equal(y, 2 * rows_of(v) + 1)
    assert recoveries(server, "stuck") == 1 and recoveries(server, "faulty") == 1
    leaks = shut_down_after_leak_check(server)
    assert live_resources(server.state_file) == {}
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())
