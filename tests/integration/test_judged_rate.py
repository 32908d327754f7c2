"""A judged rate is offered in full: the real perf_analyzer against a real tritonserver serving
a python model that answers every execute in 250 ms and batches up to 16 requests (64 req/s
of capacity). At 30 req/s about 8 requests are in flight; perf_analyzer's own 4 sync threads
offer at most 16 req/s of it and say they sent late, so a judge reading that run blames the
model. With the threads a judged rate gets (`judged_sender_threads`) the same model serves
the full rate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.ops.bench.load_test import BenchSettings, run_perf_analyzer
from geadmin.ops.bench.params import NO_STABILITY_GATE, judged_sender_threads
from geadmin.ops.bench.results import REQUEST_RATE, BenchPoint, describe_sent_late
from geadmin.stack.tritonserver import TritonProcess
from tests.support.auth import admin_auth

pytestmark = pytest.mark.integration

MODEL = "slow_batcher"
RATE_RPS = 30.0
OBJECTIVE_P99_MS = 1000.0
CONFIG = f"""name: "{MODEL}"
backend: "python"
max_batch_size: 16
input [{{ name: "x" data_type: TYPE_FP32 dims: [1] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [1] }}]
dynamic_batching {{ max_queue_delay_microseconds: 2000 }}
instance_group [{{ count: 1 kind: KIND_CPU }}]
"""
SERVICE_250_MS_AN_EXECUTE = """import time


class TritonPythonModel:
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils
        time.sleep(0.250)
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
"""


def measure(url: str, threads: int | None) -> BenchPoint:
    settings = BenchSettings(MODEL, url, mode=REQUEST_RATE, loads=(RATE_RPS,), measurement_interval_ms=2000,
                             stability_percentage=NO_STABILITY_GATE, max_trials=3, max_threads=threads)
    return run_perf_analyzer(settings, auth=admin_auth()).points[0]


def test_a_judged_rate_is_offered_in_full_where_four_threads_fell_short(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    (repository / MODEL / "1").mkdir(parents=True)
    (repository / MODEL / "config.pbtxt").write_text(CONFIG)
    (repository / MODEL / "1" / "model.py").write_text(SERVICE_250_MS_AN_EXECUTE)
    triton = triton_factory(repository, models=[MODEL])

    capped = measure(triton.http_url, None)  # perf_analyzer's default: 4 threads, 16 req/s at most
    assert capped.throughput_per_s < 20.0, capped
    assert capped.sent_late_pct > 50.0, capped
    assert describe_sent_late(capped).startswith(f"perf_analyzer sent {capped.sent_late_pct:.3g} % of")

    threads = judged_sender_threads(RATE_RPS, OBJECTIVE_P99_MS)
    assert threads == 60
    judged = measure(triton.http_url, threads)
    assert judged.throughput_per_s >= 0.9 * RATE_RPS, judged
    assert judged.p99_ms < OBJECTIVE_P99_MS, judged
