"""The tuner's search space and its cost model, on values only (no server): which serving
configs are candidates, and what a few measurements say the others would do.

A candidate is (max_batch_size, max queue delay, instance count); dynamic batching is on,
with the max as the one preferred batch size, whenever the max is above 1. The space keeps
max_batch_size within what the model allows — at most the ceiling found by loading
(`geadmin.ops.tune.search`: for an npu_ge .om, its largest batch gear), never below the
max_batch_size of an ensemble that runs the model (a smaller member breaks the ensemble).

The cost model is Triton's dynamic batcher over an execute that costs `fixed + per_row x
rows` (an NPU's launch cost and its per-row work): two measurements — batch 1, and the
largest batch — give both terms (a line fitted over Triton's per-batch-size statistics),
and with them each candidate's throughput and latency at the load's concurrency.
Candidates that cannot win (predicted over the p99 limit, or outside the fastest few
predicted) are pruned before anything is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
QUEUE_DELAYS_US = (0, 2000, 10000)
INSTANCE_COUNTS = (1, 2)
P99_OVER_MEAN = 1.5  # a batcher's p99 is about this much above its mean latency (measured, see docs)


@dataclass(frozen=True, order=True)
class Candidate:
    max_batch_size: int
    queue_delay_us: int = 0
    instances: int = 1

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 1

    def describe(self) -> str:
        if not self.batching:
            return f"max_batch_size {self.max_batch_size}, no dynamic batching, {self.instances} instance(s)"
        return (f"max_batch_size {self.max_batch_size}, preferred [{self.max_batch_size}], queue delay "
                f"{self.queue_delay_us / 1000:g} ms, {self.instances} instance(s)")


def space(floor: int, ceiling: int, *, batch_sizes: Sequence[int] = BATCH_SIZES,
          delays_us: Sequence[int] = QUEUE_DELAYS_US, instances: Sequence[int] = INSTANCE_COUNTS,
          no_batch_dim: bool = False) -> list[Candidate]:
    """Every candidate between `floor` and `ceiling` (a model without a batch dimension,
    max_batch_size 0, can only change its instances)."""
    if no_batch_dim:
        return [Candidate(0, 0, k) for k in instances]
    found = []
    for size in batch_sizes:
        if not floor <= size <= ceiling:
            continue
        for k in instances:
            found += [Candidate(size, d, k) for d in delays_us] if size > 1 else [Candidate(size, 0, k)]
    return found


@dataclass(frozen=True)
class CostModel:
    """An execute costs fixed_ms + per_row_ms x rows; instances run side by side."""

    fixed_ms: float
    per_row_ms: float

    @classmethod
    def fit(cls, points: Sequence[tuple[int, int, float]]) -> CostModel | None:
        """Least squares over (batch size, executions, mean execute ms) from Triton's batch
        statistics, weighted by executions; None without two batch sizes to tell the terms apart
        (one size: all of it is fixed cost)."""
        used = [(float(b), float(n), ms) for b, n, ms in points if n > 0 and ms > 0]
        if not used:
            return None
        total = sum(n for _, n, _ in used)
        mean_b = sum(b * n for b, n, _ in used) / total
        mean_t = sum(t * n for _, n, t in used) / total
        spread = sum(n * (b - mean_b) ** 2 for b, n, _ in used)
        if spread <= 1e-9:
            return cls(mean_t, 0.0)
        per_row = max(sum(n * (b - mean_b) * (t - mean_t) for b, n, t in used) / spread, 0.0)
        return cls(max(mean_t - per_row * mean_b, 0.0), per_row)

    def predict(self, candidate: Candidate, concurrency: int) -> Prediction:
        """Throughput (inferences/s) and p99 (ms) at `concurrency` clients of one row each."""
        k = candidate.instances
        rows = max(1.0, min(float(max(candidate.max_batch_size, 1)), concurrency / k))
        exec_ms = self.fixed_ms + self.per_row_ms * rows
        throughput = min(k * rows / exec_ms * 1000.0, math.inf)
        mean_ms = concurrency / throughput * 1000.0 if throughput > 0 else math.inf
        if candidate.batching and rows < candidate.max_batch_size:  # batches wait for the delay to fill
            mean_ms += candidate.queue_delay_us / 1000.0
        return Prediction(candidate, throughput, mean_ms * P99_OVER_MEAN)


@dataclass(frozen=True)
class Prediction:
    candidate: Candidate
    throughput: float
    p99_ms: float


def shortlist(predictions: Iterable[Prediction], *, max_p99_ms: float | None, keep: int = 4,
              slack: float = 1.3) -> list[Candidate]:
    """The candidates worth measuring, best predicted first: within the p99 limit (with
    `slack`, the model is rough), the fastest `keep`, ties to fewer instances and smaller delays."""
    allowed = [p for p in predictions if max_p99_ms is None or p.p99_ms <= max_p99_ms * slack]
    ranked = sorted(allowed, key=lambda p: (-round(p.throughput, 1), p.candidate.instances,
                                            p.candidate.queue_delay_us, p.candidate.max_batch_size))
    return [p.candidate for p in ranked[:keep]]
