"""Request cancellation. A gRPC client cancels a request that waits while the only
instance is busy with a slow execution (the double's delay_us):

- without dynamic batching Triton's default scheduler hands the cancelled request to
  TRITONBACKEND_ModelInstanceExecute, and npu_ge answers it CANCELLED without running it
  (the failure is the backend's: `reason="BACKEND"`, and the backend logs it);
- with dynamic batching the batcher drops cancelled requests it still holds
  (`reason="CANCELED"`), but one already placed in the next batch (here it usually is: the
  batcher forms it while the instance is busy) reaches npu_ge, which does not run it either
  (`reason="BACKEND"`). Which one answers is a race inside Triton; the test accepts either,
  exactly once, and nothing is executed.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.npu_ge import (
    NpuServer,
    StartServer,
    affine_model,
    double_state,
    metric_samples,
    model_stats,
    wait_for,
)

pytestmark = pytest.mark.integration

DELAY_US = 1_000_000  # the first request keeps the instance busy this long
# Without copy/execute overlap, so the second request waits in Triton's queue (pending)
# while the first runs; with overlap npu_ge takes it at once and holds it until the
# device is free (tests/backend/test_host_path.py covers cancellation there).
NO_OVERLAP = 'parameters { key: "copy_overlap" value { string_value: "false" } }\n'
BACKEND_LOG_LINE = "request cancelled before execution, not run"


@dataclass
class Outcome:
    first: np.ndarray
    cancelled_error: InferenceServerException
    failures: dict[str, float]  # nv_inference_request_failure by reason


def cancel_a_queued_request(server: NpuServer, model: str) -> Outcome:
    client = grpcclient.InferenceServerClient(server.process.grpc_url)
    answers: queue.Queue[tuple[str, object, object]] = queue.Queue()

    def send(tag: str, value: float) -> grpcclient.CallContext:
        x = grpcclient.InferInput("x", [1, 4], "FP32")
        x.set_data_from_numpy(np.full((1, 4), value, dtype=np.float32))
        callback = partial(lambda t, result, error: answers.put((t, result, error)), tag)
        return client.async_infer(model, [x], callback, client_timeout=30)

    send("first", 1.0)
    wait_for(lambda: double_state(server.state_file)["executions"] == 1, 10, "the first execution")
    second = send("second", 2.0)
    wait_for(lambda: pending(server, model) == 1, 10, "the second request to queue")
    second.cancel()
    got = {tag: (result, error) for tag, result, error in (answers.get(timeout=30) for _ in range(2))}
    result, error = got["first"]
    assert error is None, error
    cancelled_error = got["second"][1]
    assert isinstance(cancelled_error, InferenceServerException), got["second"]
    # Whoever handles the cancelled request counts it as a failure once it is done.
    wait_for(lambda: model_stats(server.url, model)["inference_stats"]["fail"]["count"] == 1, 10,
             "the cancelled request to be answered")
    failures = {labels["reason"]: value
                for labels, value in metric_samples(server.metrics_url, "nv_inference_request_failure")
                if labels["model"] == model}
    return Outcome(result.as_numpy("y"), cancelled_error, failures)  # type: ignore[attr-defined]


def pending(server: NpuServer, model: str) -> float:
    return sum(v for labels, v in metric_samples(server.metrics_url, "nv_inference_pending_request_count")
               if labels["model"] == model)


def test_backend_answers_a_cancelled_request_without_running_it(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "slow", batching="", extra=[f"delay_us {DELAY_US}"],
                 config_extra=NO_OVERLAP)
    server = npu_triton(npu_repo, extra_args=["--log-verbose=1"])
    outcome = cancel_a_queued_request(server, "slow")
    np.testing.assert_array_equal(outcome.first, np.full((1, 4), 3.0))
    assert "CANCELLED" in str(outcome.cancelled_error.status()), outcome.cancelled_error
    assert double_state(server.state_file)["executions"] == 1  # the cancelled one never ran
    stats = model_stats(server.url, "slow")
    assert stats["inference_stats"]["success"]["count"] == 1 and stats["execution_count"] == 1
    # It reached TRITONBACKEND_ModelInstanceExecute: npu_ge answered it, Triton did not.
    assert outcome.failures["BACKEND"] == 1 and outcome.failures["CANCELED"] == 0, outcome.failures
    assert server.log().count(BACKEND_LOG_LINE) == 1
    assert "model 'slow' version 1 instance 'slow_0_0' device 0: " + BACKEND_LOG_LINE in server.log()


def test_with_dynamic_batching_a_cancelled_request_is_answered_once_and_never_run(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "slow_batched", extra=[f"delay_us {DELAY_US}"], config_extra=NO_OVERLAP,
                 batching="dynamic_batching { max_queue_delay_microseconds: 100 }")
    server = npu_triton(npu_repo, extra_args=["--log-verbose=1"])
    outcome = cancel_a_queued_request(server, "slow_batched")
    np.testing.assert_array_equal(outcome.first, np.full((1, 4), 3.0))
    assert double_state(server.state_file)["executions"] == 1
    assert outcome.failures["CANCELED"] + outcome.failures["BACKEND"] == 1, outcome.failures
    assert server.log().count(BACKEND_LOG_LINE) == outcome.failures["BACKEND"]
