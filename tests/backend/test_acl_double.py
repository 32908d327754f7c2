"""The ACL runtime test double itself, called through ctypes as a backend would: streams
are asynchronous and ordered, a bounded synchronize times out with CANN's code, destroying
a stream waits for its work while aclrtStreamAbort / aclrtDestroyStreamForce do not (as
CANN documents them), aclrtDestroyStreamForce promises no more than that (the running task
goes on and writes late, into memory that may have been freed meanwhile: counted), the
products whose CANN tables mark aclrtStreamAbort unsupported refuse it, a bounded device
synchronize waits for work of force-destroyed streams too, failures of queued work surface
at the synchronize, a device put in error ($NPU_GE_DOUBLE_DEVICE_ERROR) returns its code
from the synchronize and from every later call on it, and utilization follows the device's
busy time.
The backend tests rely on these behaviours (a backend that skipped a sync would read
stale outputs), so they are checked here directly."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support.npu_ge import BackendBuild, double_model, wait_for

pytestmark = pytest.mark.integration

ACL_SUCCESS = 0
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046  # rt_error_codes.h in the CANN headers
ACL_ERROR_RT_STREAM_ABORT = 107023
ACL_ERROR_RT_AICORE_OVER_FLOW = 207003
ACL_ERROR_RT_MODEL_EXECUTE = 507011
ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000
ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR = 507054
ACL_ERROR_INVALID_PARAM = 100000  # acl_base.h
H2D, D2H = 1, 2  # aclrtMemcpyKind
FLOATS = 4
NBYTES = 4 * FLOATS


class UtilizationInfo(ctypes.Structure):
    _fields_ = [("cube", ctypes.c_int32), ("vector", ctypes.c_int32), ("aicpu", ctypes.c_int32),
                ("memory", ctypes.c_int32), ("extend", ctypes.c_void_p)]


@dataclass
class Device:
    lib: ctypes.CDLL
    stream: ctypes.c_void_p
    x_dev: ctypes.c_void_p
    y_dev: ctypes.c_void_p
    inputs: ctypes.c_void_p  # aclmdlDataset*
    outputs: ctypes.c_void_p
    context: ctypes.c_void_p | None = None  # of the module's device 0

    def ok(self, rc: int) -> None:
        assert rc == ACL_SUCCESS, (rc, self.recent_error())

    def recent_error(self) -> str:
        msg = self.lib.aclGetRecentErrMsg()
        return msg.decode() if msg else ""

    def load(self, path: Path) -> int:
        model_id = ctypes.c_uint32()
        self.ok(self.lib.aclmdlLoadFromFile(str(path).encode(), ctypes.byref(model_id)))
        return model_id.value

    def run_async(self, model_id: int, x: np.ndarray, y: np.ndarray) -> None:
        """Queue copy-in, execution and copy-out; returns before any of it ran."""
        self.ok(self.lib.aclrtMemcpyAsync(self.x_dev, NBYTES, x.ctypes.data_as(ctypes.c_void_p), NBYTES,
                                          H2D, self.stream))
        self.ok(self.lib.aclmdlExecuteAsync(model_id, self.inputs, self.outputs, self.stream))
        self.ok(self.lib.aclrtMemcpyAsync(y.ctypes.data_as(ctypes.c_void_p), NBYTES, self.y_dev, NBYTES,
                                          D2H, self.stream))

    def sync(self, timeout_ms: int | None = None) -> int:
        if timeout_ms is None:
            return int(self.lib.aclrtSynchronizeStream(self.stream))
        return int(self.lib.aclrtSynchronizeStreamWithTimeout(self.stream, timeout_ms))

    def utilization(self) -> int:
        info = UtilizationInfo()
        self.ok(self.lib.aclrtGetDeviceUtilizationRate(0, ctypes.byref(info)))
        return int(info.cube)


def open_device(lib: ctypes.CDLL, device_id: int) -> tuple[Device, ctypes.c_void_p]:
    """A context (made current), a stream, an input and an output buffer on `device_id`."""
    assert lib.aclrtSetDevice(device_id) == ACL_SUCCESS
    ctx, stream, x_dev, y_dev = (ctypes.c_void_p() for _ in range(4))
    assert lib.aclrtCreateContext(ctypes.byref(ctx), device_id) == ACL_SUCCESS
    assert lib.aclrtCreateStream(ctypes.byref(stream)) == ACL_SUCCESS
    for buf in (x_dev, y_dev):
        assert lib.aclrtMalloc(ctypes.byref(buf), NBYTES, 0) == ACL_SUCCESS
    inputs, outputs = ctypes.c_void_p(lib.aclmdlCreateDataset()), ctypes.c_void_p(lib.aclmdlCreateDataset())
    for dataset, buf in ((inputs, x_dev), (outputs, y_dev)):
        assert lib.aclmdlAddDatasetBuffer(dataset, lib.aclCreateDataBuffer(buf, NBYTES)) == ACL_SUCCESS
    return Device(lib, stream, x_dev, y_dev, inputs, outputs), ctx


@pytest.fixture(scope="module")
def device(npu_build: BackendBuild, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Device]:
    os.environ["NPU_GE_DOUBLE_OTHER_LOAD"] = "0"  # read by the double at every call
    lib = ctypes.CDLL(str(npu_build.double_dir / "libascendcl.so"))
    lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
    lib.aclmdlCreateDataset.restype = ctypes.c_void_p
    lib.aclCreateDataBuffer.restype = ctypes.c_void_p
    lib.aclCreateDataBuffer.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.aclmdlAddDatasetBuffer.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.aclmdlExecuteAsync.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.aclrtMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_int, ctypes.c_void_p]
    lib.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]
    lib.aclrtSynchronizeStreamWithTimeout.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.aclrtDestroyStream.argtypes = [ctypes.c_void_p]
    lib.aclrtDestroyStreamForce.argtypes = [ctypes.c_void_p]
    lib.aclrtStreamAbort.argtypes = [ctypes.c_void_p]
    lib.aclrtSynchronizeDeviceWithTimeout.argtypes = [ctypes.c_int32]
    lib.aclrtFree.argtypes = [ctypes.c_void_p]
    lib.aclrtSetCurrentContext.argtypes = [ctypes.c_void_p]
    assert lib.aclInit(None) == ACL_SUCCESS
    dev, ctx = open_device(lib, 0)
    dev.context = ctx
    yield dev
    os.environ.pop("NPU_GE_DOUBLE_OTHER_LOAD")


def model_file(tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "model.om"
    path.write_text(double_model([("x", "FP32", "1,4")], [("y", "FP32", "1,4", "from x scale 2 offset 1")],
                                 extra=extra))
    return path


def test_queued_work_runs_in_order_and_only_a_sync_makes_results_visible(
    device: Device, tmp_path: Path
) -> None:
    model = device.load(model_file(tmp_path, "delay_us 1000000"))
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    y = np.zeros(FLOATS, dtype=np.float32)
    started = time.monotonic()
    device.run_async(model, x, y)
    assert time.monotonic() - started < 0.5  # queued, not run (the run takes 1 s)
    np.testing.assert_array_equal(y, 0)  # a read without a sync sees stale memory
    assert device.sync(timeout_ms=0) == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT  # 0: only checks
    assert device.sync() == ACL_SUCCESS
    assert time.monotonic() - started >= 1.0  # the execution's fixed cost
    # copy-in before execute before copy-out: any other order gives 1s or zeros
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_timed_work_runs_on_its_own_and_zero_cost_work_waits_for_the_synchronizing_thread(
    device: Device, tmp_path: Path
) -> None:
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    timed, y_timed = device.load(model_file(tmp_path, "delay_us 20000")), np.zeros(FLOATS, dtype=np.float32)
    device.run_async(timed, x, y_timed)
    deadline = time.monotonic() + 5.0
    while device.sync(timeout_ms=0) != ACL_SUCCESS:  # 0 only checks: it finishes without a sync
        assert time.monotonic() < deadline, "timed work never ran on the stream's thread"
        time.sleep(0.01)
    np.testing.assert_array_equal(y_timed, 2 * x + 1)

    instant, y_instant = device.load(model_file(tmp_path, "delay_us 0")), np.zeros(FLOATS, dtype=np.float32)
    device.run_async(instant, x, y_instant)
    time.sleep(0.2)
    np.testing.assert_array_equal(y_instant, 0)  # nobody was woken: it runs in the sync's thread
    assert device.sync() == ACL_SUCCESS
    np.testing.assert_array_equal(y_instant, 2 * x + 1)


def own_stream(device: Device) -> Device:
    """The device's buffers on a stream of the test's own (for tests that destroy it)."""
    stream = ctypes.c_void_p()
    device.ok(device.lib.aclrtCreateStream(ctypes.byref(stream)))
    return Device(device.lib, stream, device.x_dev, device.y_dev, device.inputs, device.outputs)


def in_thread(call: Callable[[], int]) -> tuple[threading.Thread, list[int]]:
    """Runs an ACL call on a daemon thread (ctypes releases the GIL); its code lands in the list.
    Returns once the thread is about to make the call."""
    codes: list[int] = []
    about_to_call = threading.Event()

    def run() -> None:
        about_to_call.set()
        codes.append(int(call()))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert about_to_call.wait(30)
    return thread, codes


def test_a_bounded_sync_times_out_with_canns_code(device: Device, tmp_path: Path) -> None:
    own = own_stream(device)
    x, y = np.full(FLOATS, 99, dtype=np.float32), np.zeros(FLOATS, dtype=np.float32)
    own.run_async(device.load(model_file(tmp_path, "hang_on_value 99")), x, y)
    started = time.monotonic()
    assert own.sync(timeout_ms=150) == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert time.monotonic() - started >= 0.15  # bounded below by the timeout; the work never ends
    assert "did not finish within 150 ms" in own.recent_error()
    device.ok(device.lib.aclrtStreamAbort(own.stream))  # stopped: no hang outlives the test
    device.ok(device.lib.aclrtDestroyStream(own.stream))
    np.testing.assert_array_equal(y, 0)  # aborted work wrote nothing


def test_destroying_a_stream_waits_for_its_queued_work_as_cann_documents(
    device: Device, tmp_path: Path
) -> None:
    # CANN: aclrtDestroyStream waits for the stream's unfinished tasks; the queued
    # execution and copy-out still run, so their result lands in host memory.
    own = own_stream(device)
    x, y = np.array([1, 2, 3, 4], dtype=np.float32), np.zeros(FLOATS, dtype=np.float32)
    own.run_async(device.load(model_file(tmp_path, "delay_us 300000")), x, y)
    device.ok(device.lib.aclrtDestroyStream(own.stream))  # no sync before it
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_a_hung_stream_blocks_sync_and_destroy_until_aborted(device: Device, tmp_path: Path) -> None:
    lib = device.lib
    model = device.load(model_file(tmp_path, "hang_on_value 99"))
    x = np.full(FLOATS, 99, dtype=np.float32)
    # an unbounded sync waits for ever; aclrtStreamAbort makes it return CANN's abort code
    waited, y = own_stream(device), np.zeros(FLOATS, dtype=np.float32)
    waited.run_async(model, x, y)
    syncing, sync_codes = in_thread(lambda: waited.sync())
    time.sleep(1.5)  # the thread only had to enter the call
    assert syncing.is_alive()  # a hang holds it for ever...
    device.ok(lib.aclrtStreamAbort(waited.stream))  # ...until the stream is aborted
    syncing.join(30)
    assert sync_codes == [ACL_ERROR_RT_STREAM_ABORT]
    np.testing.assert_array_equal(y, 0)  # the aborted execution and its copy-out never ran
    device.ok(lib.aclrtDestroyStream(waited.stream))  # nothing left on it to wait for
    # CANN: aclrtDestroyStream waits for unfinished tasks, so a hang holds it too
    destroyed = own_stream(device)
    destroyed.run_async(model, x, y)
    destroying, destroy_codes = in_thread(lambda: lib.aclrtDestroyStream(destroyed.stream))
    time.sleep(1.5)
    assert destroying.is_alive()
    device.ok(lib.aclrtStreamAbort(destroyed.stream))
    destroying.join(30)
    assert destroy_codes == [ACL_SUCCESS]
    assert lib.aclrtStreamAbort(None) != ACL_SUCCESS  # CANN: NULL is refused


def test_an_aborted_stream_stays_usable_and_force_destroy_abandons_a_hang(
    device: Device, tmp_path: Path
) -> None:
    lib = device.lib
    hang = device.load(model_file(tmp_path, "hang_on_value 99"))
    own = own_stream(device)
    y = np.zeros(FLOATS, dtype=np.float32)
    own.run_async(hang, np.full(FLOATS, 99, dtype=np.float32), y)
    device.ok(lib.aclrtStreamAbort(own.stream))
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    own.run_async(hang, x, y)  # a value that does not hang: runs normally after the abort
    assert own.sync() == ACL_SUCCESS
    np.testing.assert_array_equal(y, 2 * x + 1)
    device.ok(lib.aclrtDestroyStream(own.stream))


@pytest.fixture
def stream_state(tmp_path: Path) -> Iterator[Path]:
    """The double's late-work counts (streams.h), written next to a state file of the test's."""
    state = tmp_path / "state.json"
    os.environ["NPU_GE_DOUBLE_STATE_FILE"] = str(state)  # read by the double at every write
    yield Path(f"{state}.streams")
    os.environ.pop("NPU_GE_DOUBLE_STATE_FILE")


def late_work(path: Path) -> dict[str, int]:
    state = json.loads(path.read_text()) if path.exists() else {}
    return {k: int(state.get(k, 0)) for k in ("late_writes", "touched_freed_memory")}


def pinned(lib: ctypes.CDLL) -> tuple[ctypes.c_void_p, np.ndarray]:
    """A host block from aclrtMallocHost (tracked by the double) and a numpy view of it."""
    block = ctypes.c_void_p()
    assert lib.aclrtMallocHost(ctypes.byref(block), NBYTES) == ACL_SUCCESS
    view = np.ctypeslib.as_array(ctypes.cast(block, ctypes.POINTER(ctypes.c_float)), shape=(FLOATS,))
    view[:] = 0
    return block, view


def test_force_destroy_does_not_stop_the_running_task_it_writes_after_the_call(
    device: Device, tmp_path: Path, stream_state: Path
) -> None:
    # CANN promises only that aclrtDestroyStreamForce does not wait: the running execution
    # and the copy-out queued behind it still run, into the buffers they were given.
    lib = device.lib
    lib.aclrtFreeHost.argtypes = [ctypes.c_void_p]
    own = own_stream(device)
    block, y = pinned(lib)
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    own.run_async(device.load(model_file(tmp_path, "delay_us 400000")), x, y)
    time.sleep(0.1)  # the execution is running
    started = time.monotonic()
    device.ok(lib.aclrtDestroyStreamForce(own.stream))
    assert time.monotonic() - started < 0.2  # it did not wait
    np.testing.assert_array_equal(y, 0)
    before = late_work(stream_state)["late_writes"]
    device.ok(lib.aclrtSynchronizeDeviceWithTimeout(5000))  # the device waits for it, bounded
    np.testing.assert_array_equal(y, 2 * x + 1)  # written after the stream was destroyed
    assert late_work(stream_state) == {"late_writes": before + 2, "touched_freed_memory": 0}
    device.ok(lib.aclrtFreeHost(block))


def test_a_late_write_into_memory_freed_meanwhile_is_counted_and_not_done(
    device: Device, tmp_path: Path, stream_state: Path
) -> None:
    lib = device.lib
    own = own_stream(device)
    out = ctypes.c_void_p()
    device.ok(lib.aclrtMalloc(ctypes.byref(out), NBYTES, 0))
    outputs = ctypes.c_void_p(lib.aclmdlCreateDataset())
    device.ok(lib.aclmdlAddDatasetBuffer(outputs, lib.aclCreateDataBuffer(out, NBYTES)))
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    device.ok(lib.aclrtMemcpyAsync(device.x_dev, NBYTES, x.ctypes.data_as(ctypes.c_void_p), NBYTES, H2D,
                                   own.stream))
    model = device.load(model_file(tmp_path, "delay_us 300000"))
    device.ok(lib.aclmdlExecuteAsync(model, device.inputs, outputs, own.stream))
    time.sleep(0.05)
    device.ok(lib.aclrtDestroyStreamForce(own.stream))
    device.ok(lib.aclrtFree(out))  # what npu_ge did before it parked: the task still runs
    again = ctypes.c_void_p()
    device.ok(lib.aclrtMalloc(ctypes.byref(again), NBYTES, 0))  # may well reuse the address
    device.ok(lib.aclrtSynchronizeDeviceWithTimeout(5000))
    assert late_work(stream_state)["touched_freed_memory"] >= 1  # on a device: someone else's memory
    device.ok(lib.aclrtFree(again))


def test_stream_abort_is_refused_on_the_products_canns_tables_mark_unsupported(
    device: Device, tmp_path: Path
) -> None:
    lib = device.lib
    hang = device.load(model_file(tmp_path, "hang_on_value 99"))
    own = own_stream(device)
    y = np.zeros(FLOATS, dtype=np.float32)
    own.run_async(hang, np.full(FLOATS, 99, dtype=np.float32), y)
    try:
        for product in ("atlas_inference", "atlas_training", "atlas_200i_500_a2"):
            os.environ["NPU_GE_DOUBLE_PRODUCT"] = product
            assert lib.aclrtStreamAbort(own.stream) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT, product
            assert "not supported on this product" in own.recent_error()
            assert own.sync(timeout_ms=50) == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT  # still hung
        os.environ["NPU_GE_DOUBLE_PRODUCT"] = "no_such_product"
        assert lib.aclrtStreamAbort(own.stream) not in (ACL_SUCCESS, ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
        assert "unknown NPU_GE_DOUBLE_PRODUCT 'no_such_product'" in own.recent_error()
    finally:
        os.environ.pop("NPU_GE_DOUBLE_PRODUCT")
    device.ok(lib.aclrtStreamAbort(own.stream))  # the default product (Atlas A2) has it
    device.ok(lib.aclrtDestroyStream(own.stream))


def test_a_bounded_device_synchronize_times_out_on_work_of_a_force_destroyed_stream(
    device: Device, tmp_path: Path
) -> None:
    lib = device.lib
    own = own_stream(device)
    y = np.zeros(FLOATS, dtype=np.float32)
    own.run_async(device.load(model_file(tmp_path, "delay_us 600000")), np.ones(FLOATS, dtype=np.float32), y)
    device.ok(lib.aclrtDestroyStreamForce(own.stream))
    assert lib.aclrtSynchronizeDeviceWithTimeout(100) == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert "did not finish within 100 ms" in own.recent_error()
    assert lib.aclrtSynchronizeDeviceWithTimeout(0) != ACL_SUCCESS  # CANN: -1 or > 0
    device.ok(lib.aclrtSynchronizeDeviceWithTimeout(5000))
    np.testing.assert_array_equal(y, 3)


def test_an_overflow_status_surfaces_at_the_sync_once_and_the_work_completes(
    device: Device, tmp_path: Path
) -> None:
    model = device.load(model_file(tmp_path, "overflow_on_value 5"))
    x, y = np.array([5, 1, 2, 3], dtype=np.float32), np.zeros(FLOATS, dtype=np.float32)
    device.run_async(model, x, y)
    device.run_async(model, x + 1, y2 := np.zeros(FLOATS, dtype=np.float32))  # queued after it: still runs
    assert device.sync() == ACL_ERROR_RT_AICORE_OVER_FLOW  # CANN's runtime logs this as success
    assert "overflow" in device.recent_error()
    np.testing.assert_array_equal(y, 2 * x + 1)  # the execution and its copy-out ran
    np.testing.assert_array_equal(y2, 2 * (x + 1) + 1)
    assert device.sync() == ACL_SUCCESS  # reported once


def test_a_failure_of_queued_work_surfaces_at_the_sync_once(device: Device, tmp_path: Path) -> None:
    model = device.load(model_file(tmp_path, "fail_execute_on_value -7"))
    y = np.zeros(FLOATS, dtype=np.float32)
    device.run_async(model, np.full(FLOATS, -7, dtype=np.float32), y)  # the calls themselves succeed
    assert device.sync() == ACL_ERROR_RT_MODEL_EXECUTE
    assert "poison value" in device.recent_error()
    np.testing.assert_array_equal(y, 0)  # the copy-out queued after the failure never ran
    x = np.ones(FLOATS, dtype=np.float32)
    device.run_async(model, x, y)
    assert device.sync() == ACL_SUCCESS  # the error was reported once; the stream runs again
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_utilization_follows_the_busy_time_of_the_last_second(device: Device, tmp_path: Path) -> None:
    model = device.load(model_file(tmp_path, "delay_us 100000"))
    # earlier tests' executions leave the window (at most 1 s; often already gone)
    wait_for(lambda: device.utilization() == 0, 5, "an idle device's utilization of 0")
    x = np.ones(FLOATS, dtype=np.float32)
    y = np.zeros(FLOATS, dtype=np.float32)
    for _ in range(6):  # 600 ms busy
        device.run_async(model, x, y)
    assert device.sync() == ACL_SUCCESS
    busy = device.utilization()
    assert 45 <= busy <= 75, busy  # ~60% of the last second
    time.sleep(1.1)
    assert device.utilization() == 0


class IODims(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 128), ("count", ctypes.c_size_t), ("dims", ctypes.c_int64 * 128)]


@pytest.mark.parametrize("directive", [None, "outputs_at_largest_gear"])
def test_outputs_are_described_with_a_batch_gear_or_the_largest_gears_shape(
    device: Device, tmp_path: Path, directive: str | None
) -> None:
    lib = device.lib
    path = tmp_path / "gears.om"
    path.write_text(double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 1 offset 0")],
                                 gears="1,2,8", extra=[directive] if directive else []))
    model = device.load(path)
    lib.aclmdlCreateDesc.restype = ctypes.c_void_p
    lib.aclmdlGetDesc.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.aclmdlGetInputDims.argtypes = lib.aclmdlGetOutputDims.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(IODims)]
    lib.aclmdlDestroyDesc.argtypes = [ctypes.c_void_p]
    desc = lib.aclmdlCreateDesc()
    device.ok(lib.aclmdlGetDesc(desc, model))
    got_in, got_out = IODims(), IODims()
    device.ok(lib.aclmdlGetInputDims(desc, 0, ctypes.byref(got_in)))
    device.ok(lib.aclmdlGetOutputDims(desc, 0, ctypes.byref(got_out)))
    assert list(got_in.dims[: got_in.count]) == [-1, 4]
    assert list(got_out.dims[: got_out.count]) == ([8, 4] if directive else [-1, 4])
    device.ok(lib.aclmdlDestroyDesc(desc))


def dims_of(dims: IODims) -> list[int]:
    return list(dims.dims[: dims.count])


def test_dims_gears_are_set_per_dataset_and_execution_follows_the_gear(
    device: Device, tmp_path: Path
) -> None:
    """Like CANN: an execution needs its dataset's gear set (aclmdlSetInputDynamicDims with a
    gear of the model), computes only the gear's elements, and aclmdlGetCurOutputDims
    reports the largest gear until a gear is set, then the gear's dims."""
    lib = device.lib
    path = tmp_path / "seq.om"
    path.write_text(double_model([("x", "FP32", "1,-1")], [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                                 extra=["dynamic_dims 2;4"]))
    model = device.load(path)
    lib.aclmdlCreateDesc.restype = ctypes.c_void_p
    lib.aclmdlGetDesc.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.aclmdlGetCurOutputDims.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(IODims)]
    lib.aclmdlSetInputDynamicDims.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                                              ctypes.POINTER(IODims)]
    lib.aclmdlDestroyDesc.argtypes = lib.aclmdlDestroyDataset.argtypes = [ctypes.c_void_p]
    desc = lib.aclmdlCreateDesc()
    device.ok(lib.aclmdlGetDesc(desc, model))
    shape_dev = ctypes.c_void_p()
    device.ok(lib.aclrtMalloc(ctypes.byref(shape_dev), 8, 0))
    inputs = ctypes.c_void_p(lib.aclmdlCreateDataset())  # x, then the dynamic-shape input
    for buf, size in ((device.x_dev, NBYTES), (shape_dev, 8)):
        device.ok(lib.aclmdlAddDatasetBuffer(inputs, lib.aclCreateDataBuffer(buf, size)))

    cur = IODims()
    device.ok(lib.aclmdlGetCurOutputDims(desc, 0, ctypes.byref(cur)))
    assert dims_of(cur) == [1, 4]  # no gear set yet: the largest
    assert lib.aclmdlExecuteAsync(model, inputs, device.outputs, device.stream) != ACL_SUCCESS
    assert "dynamic dims not set" in device.recent_error()
    not_a_gear = IODims(count=2)
    not_a_gear.dims[0], not_a_gear.dims[1] = 1, 3
    assert lib.aclmdlSetInputDynamicDims(model, inputs, 1, ctypes.byref(not_a_gear)) != ACL_SUCCESS
    assert "dims [1,3] is not a gear of the model" in device.recent_error()

    gear = IODims(count=2)
    gear.dims[0], gear.dims[1] = 1, 2
    device.ok(lib.aclmdlSetInputDynamicDims(model, inputs, 1, ctypes.byref(gear)))
    device.ok(lib.aclmdlGetCurOutputDims(desc, 0, ctypes.byref(cur)))
    assert dims_of(cur) == [1, 2]
    x = np.array([[3, 4, 5, 6]], dtype=np.float32)
    y = np.full((1, 4), -9, dtype=np.float32)
    device.ok(lib.aclrtMemcpy(device.y_dev, NBYTES, y.ctypes.data_as(ctypes.c_void_p), NBYTES, H2D))
    device.ok(lib.aclrtMemcpy(device.x_dev, NBYTES, x.ctypes.data_as(ctypes.c_void_p), NBYTES, H2D))
    device.ok(lib.aclmdlExecuteAsync(model, inputs, device.outputs, device.stream))
    device.ok(device.sync())
    device.ok(lib.aclrtMemcpy(y.ctypes.data_as(ctypes.c_void_p), NBYTES, device.y_dev, NBYTES, D2H))
    np.testing.assert_array_equal(y, [[7, 9, -9, -9]])  # the gear's 2 elements only
    device.ok(lib.aclmdlDestroyDataset(inputs))
    device.ok(lib.aclrtFree(shape_dev))
    device.ok(lib.aclmdlDestroyDesc(desc))


def test_a_device_error_surfaces_at_the_sync_and_the_device_stays_in_error_alone(
    device: Device, tmp_path: Path
) -> None:
    # device 3, which no other test here uses: the error lasts as long as the process
    lib, x = device.lib, np.ones(FLOATS, dtype=np.float32)
    os.environ["NPU_GE_DOUBLE_DEVICE_ERROR"] = "3:bad"
    try:
        y = np.zeros(FLOATS, dtype=np.float32)
        device.run_async(device.load(model_file(tmp_path)), x, y)
        assert device.sync() == ACL_ERROR_INVALID_PARAM  # malformed: refused, naming it
        assert "NPU_GE_DOUBLE_DEVICE_ERROR is not <device>:<aclError>" in device.recent_error()
        os.environ["NPU_GE_DOUBLE_DEVICE_ERROR"] = f"3:{ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR}:1"
        faulty, _ = open_device(lib, 3)
        model = faulty.load(model_file(tmp_path))
        faulty.run_async(model, x, y)  # its first execution runs
        faulty.ok(faulty.sync())
        np.testing.assert_array_equal(y, 3)
        faulty.run_async(model, x + 1, y)  # the calls succeed: the error is the task's
        assert faulty.sync() == ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
        assert "device 3 reported ACL error 507054" in faulty.recent_error()
        np.testing.assert_array_equal(y, 3)  # nothing after it ran
        stream = ctypes.c_void_p()
        assert lib.aclrtCreateStream(ctypes.byref(stream)) == ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
        assert lib.aclmdlExecuteAsync(model, faulty.inputs, faulty.outputs, faulty.stream) == 507054
        assert lib.aclrtSynchronizeDeviceWithTimeout(1000) == ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
    finally:
        os.environ.pop("NPU_GE_DOUBLE_DEVICE_ERROR")
        device.ok(lib.aclrtSetCurrentContext(device.context))
    device.run_async(device.load(model_file(tmp_path)), x, y := np.zeros(FLOATS, dtype=np.float32))
    device.ok(device.sync())  # device 0 never noticed
    np.testing.assert_array_equal(y, 3)
