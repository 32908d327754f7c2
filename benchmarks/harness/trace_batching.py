"""Diagnosis for the batching figure of benchmarks/backend_npu_ge.py: where a batched
instance's time goes between two executions, from Triton's own per-request trace.

The batched model of the benchmark (double at 5 ms + 0.05 ms/row, max_batch_size 16,
preferred batch 16) runs under perf_analyzer with Triton tracing every request
(`--trace-config level=TIMESTAMPS rate=1`; tracing slows the server a little, so read the
shares, not the absolute times). Per pair of consecutive batches it prints the median of:
- execute: COMPUTE_START -> COMPUTE_END of a batch (the backend's Execute up to its
  statistics' end, i.e. before it sends the responses);
- responses: COMPUTE_END -> the batch's last REQUEST_END (npu_ge sending 16 responses,
  reporting statistics, releasing the requests, one after the other);
- next arrives: COMPUTE_END -> the next batch's last REQUEST_START (negative: it was
  already waiting);
- gap: COMPUTE_END -> the next batch's COMPUTE_START (the instance does not execute).
Run: python benchmarks/harness/trace_batching.py [--concurrency 16,32]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from harness.npu_ge import Load, measure, npu_server  # noqa: E402
from tests.support.npu_ge import affine_model  # noqa: E402

BATCH = 16


def batches(trace_path: Path) -> list[list[dict[str, int]]]:
    """Requests (their first timestamp of each kind) grouped by batch, in time order."""
    events: dict[int, dict[str, int]] = defaultdict(dict)
    for entry in json.loads(trace_path.read_text()):
        for stamp in entry.get("timestamps", []):
            events[entry["id"]].setdefault(stamp["name"], int(stamp["ns"]))
    grouped: dict[int, list[dict[str, int]]] = defaultdict(list)
    for request in events.values():
        if "COMPUTE_START" in request and "REQUEST_END" in request:
            grouped[request["COMPUTE_START"]].append(request)
    return [grouped[k] for k in sorted(grouped)]


def decompose(runs: list[list[dict[str, int]]]) -> dict[str, float]:
    rows: dict[str, list[float]] = defaultdict(list)
    steady = runs[len(runs) // 5:]  # the first fifth is warm-up
    for this, following in itertools.pairwise(steady):
        start, end = this[0]["COMPUTE_START"], max(r["COMPUTE_END"] for r in this)
        rows["execute"].append(end - start)
        rows["responses"].append(max(r["REQUEST_END"] for r in this) - end)
        rows["next arrives"].append(max(r["REQUEST_START"] for r in following) - end)
        rows["gap"].append(following[0]["COMPUTE_START"] - end)
        rows["batch"].append(len(this) * 1000)
    return {k: statistics.median(v) / 1000.0 for k, v in rows.items()}  # us (batch: count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="16,32")
    parser.add_argument("--queue-delay-us", type=int, default=20000)
    parser.add_argument("--window-ms", type=int, default=1500)
    args = parser.parse_args()
    gears = ",".join(str(g) for g in range(1, BATCH + 1))
    with tempfile.TemporaryDirectory(prefix="npu_ge_trace_") as tmp_name:
        tmp = Path(tmp_name)
        for c in (int(v) for v in args.concurrency.split(",")):
            repo = tmp / f"repo{c}"
            repo.mkdir()
            affine_model(repo, "batch_on", max_batch=BATCH, gears=gears, width=256,
                         batching=f"dynamic_batching {{ preferred_batch_size: [{BATCH}] "
                                  f"max_queue_delay_microseconds: {args.queue_delay_us} }}",
                         extra=["delay_us 5000", "delay_per_row_us 50"])
            trace = tmp / f"trace{c}.json"
            flags = [f"--trace-config=triton,file={trace}", "--trace-config=level=TIMESTAMPS",
                     "--trace-config=rate=1", "--trace-config=log_frequency=0"]
            with npu_server(repo, tmp / f"server{c}", ["batch_on"], flags) as server:
                window = measure(server, "batch_on", c, Load(args.window_ms), 1024)
            parts = decompose(batches(trace))  # the trace is written when the server stops
            print(f"concurrency {c}: {window.throughput_per_s:.0f} infer/s (traced), median batch "
                  f"{parts['batch']:.0f}; execute {parts['execute']:.0f} us, then responses sent by "
                  f"{parts['responses']:+.0f} us, next batch's last request arrives at "
                  f"{parts['next arrives']:+.0f} us, next execute starts at {parts['gap']:+.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
