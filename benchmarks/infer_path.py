"""The Playground's request path against raw tritonclient, side by side.

A real tritonserver serves the sample `digits_classifier` (python backend) on 127.0.0.1.

- playground: what the page runs per Send, through geadmin.ops.infer.request — `build_request`
  (the model's spec read once, as the page caches it; random features, seeded), `send`
  through the `TritonClient` facade, the outputs decoded to numpy;
- raw: tritonclient alone with the same model and payload — `InferInput`,
  `set_data_from_numpy`, `infer`, `as_numpy` — on a payload built once;
- send: the playground's path without the build (the same request, built once), to tell
  the facade's cost (`infer_send_ratio`) from the cost of building the tensors.

The breakdown (Triton's statistics read before and after) is off in the measured path: it
costs two extra calls by design, and is measured on its own line (`infer_breakdown_ms`).
One warm-up of each, then interleaved rounds (the order flips each round) of `--requests`
requests per path. The ratio is the median over rounds of playground / raw in that round
(paired: both halves of a round see the same machine load); the times are medians of the
mean wall time per request. `infer_cpu_ratio` compares the client process's CPU time per
request (all its threads), which other load on the machine does not inflate.
Prints `BENCH <name> <value> <unit>` lines. Goal: playground <= 1.05x raw.
Run: python benchmarks/infer_path.py [--rounds 40] [--requests 50] [--transport http|grpc]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from geadmin.ops.infer.request import build_request, prepare, send  # noqa: E402
from geadmin.ops.infer.spec import ModelSpec  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.triton.client import TritonClient  # noqa: E402

SAMPLES = REPO_ROOT / "geadmin" / "samples" / "model_repository"
MODEL = "digits_classifier"
INPUT, OUTPUT = "features", "probabilities"
SEED = 0
START_TIMEOUT_S = 120.0
MAX_ROUNDS = 200
BREAKDOWN_REQUESTS = 20


def playground_request(client: TritonClient, spec: ModelSpec) -> np.ndarray:
    result = send(client, build_request(spec, seed=SEED), statistics=False)
    return result.output(OUTPUT).data


def raw_request(client: Any, module: Any, payload: np.ndarray) -> np.ndarray:
    item = module.InferInput(INPUT, list(payload.shape), "FP32")
    item.set_data_from_numpy(payload)
    return client.infer(MODEL, [item]).as_numpy(OUTPUT)


def per_request_s(fn: Callable[[], object], requests: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) per request."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(requests):
        fn()
    return (time.perf_counter() - start) / requests, (time.process_time() - cpu) / requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help=f"measured rounds (1..{MAX_ROUNDS})")
    parser.add_argument("--requests", type=int, default=50, help="requests per round and path")
    parser.add_argument("--transport", choices=("http", "grpc"), default="http")
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, MAX_ROUNDS))
    requests = max(1, args.requests)

    scratch = Path(tempfile.mkdtemp(prefix="geadmin-bench-infer-"))
    try:
        repository = scratch / "model_repository"
        shutil.copytree(SAMPLES / MODEL, repository / MODEL, ignore=shutil.ignore_patterns("__pycache__"))
        server = TritonProcess(repository, models=[MODEL], log_path=scratch / "tritonserver.log")
        server.start(timeout_s=START_TIMEOUT_S)
        try:
            grpc = args.transport == "grpc"
            url = f"grpc://{server.grpc_url}" if grpc else server.http_url
            module: Any = grpcclient if grpc else httpclient
            address = url.split("://", 1)[1]
            with TritonClient(url) as client:
                raw_client = module.InferenceServerClient(address)
                spec = prepare(client, MODEL)  # once: the page caches it
                payload = build_request(spec, seed=SEED).input(INPUT).data
                ours = playground_request(client, spec)  # warm-up of each, and the same answer
                theirs = raw_request(raw_client, module, payload)
                if not np.array_equal(ours, theirs):
                    raise SystemExit("the two paths disagree: they do not send the same payload")
                built = build_request(spec, seed=SEED)
                paths: list[tuple[str, Callable[[], object]]] = [
                    ("raw", lambda: raw_request(raw_client, module, payload)),
                    ("playground", lambda: playground_request(client, spec)),
                    ("send", lambda: send(client, built, statistics=False).output(OUTPUT).data),
                ]
                timings: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in paths}
                for index in range(rounds):
                    for name, fn in paths if index % 2 == 0 else reversed(paths):
                        timings[name].append(per_request_s(fn, requests))
                breakdown, _ = per_request_s(
                    lambda: send(client, build_request(spec, seed=SEED), statistics=True), BREAKDOWN_REQUESTS)
                raw_client.close()
        finally:
            server.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    raw, playground = timings["raw"], timings["playground"]
    ratio = statistics.median(p[0] / r[0] for p, r in zip(playground, raw, strict=True))
    send_ratio = statistics.median(p[0] / r[0] for p, r in zip(timings["send"], raw, strict=True))
    cpu_ratio = statistics.median(p[1] for p in playground) / statistics.median(r[1] for r in raw)
    raw_s, playground_s = statistics.median(r[0] for r in raw), statistics.median(p[0] for p in playground)
    print(f"# {args.transport}, {rounds} rounds x {requests} requests per path; ms per request, raw: "
          f"{', '.join(f'{r[0] * 1e3:.3f}' for r in raw)}; playground: "
          f"{', '.join(f'{p[0] * 1e3:.3f}' for p in playground)}")
    print(f"BENCH infer_raw_ms {raw_s * 1e3:.3f} ms")
    print(f"BENCH infer_playground_ms {playground_s * 1e3:.3f} ms")
    print(f"BENCH infer_breakdown_ms {breakdown * 1e3:.3f} ms")
    print(f"BENCH infer_cpu_ratio {cpu_ratio:.3f} x")
    print(f"BENCH infer_send_ratio {send_ratio:.3f} x")
    print(f"BENCH infer_path_ratio {ratio:.3f} x")
    print(f"# goal (playground <= 1.05x raw): {'met' if ratio <= 1.05 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
