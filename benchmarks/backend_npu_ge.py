"""npu_ge throughput with the ACL runtime test double, in the real tritonserver.

1. Requests/s at concurrency 1, 8 and 32: npu_ge (double, y = 2x + 1) vs a python-backend
   model computing the same on the same tensor sizes.
2. Dynamic-batching gain with the double set to a fixed 2 ms per execute (max batch 16,
   concurrency 16): with vs without dynamic batching.

The load generator is our own (gRPC, one client per thread, closed loop, fixed duration).
Run: python benchmarks/backend_npu_ge.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from geadmin.stack.tritonserver import TritonProcess, prepare_backend_directory  # noqa: E402
from tests.backend.support import affine_model, build_backend, load  # noqa: E402

WIDTH = 256  # FP32 elements per request row

PYTHON_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            y = (2 * x + 1).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", y)]))
        return responses
"""


def python_model(repo: Path) -> None:
    model = repo / "py_affine"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'name: "py_affine"\nbackend: "python"\nmax_batch_size: 16\n'
        f'input [{{ name: "x", data_type: TYPE_FP32, dims: [{WIDTH}] }}]\n'
        f'output [{{ name: "y", data_type: TYPE_FP32, dims: [{WIDTH}] }}]\n'
        "instance_group [{ kind: KIND_CPU, count: 1 }]\ndynamic_batching {}\n"
    )
    (model / "1" / "model.py").write_text(PYTHON_MODEL)


def requests_per_second(url: str, model: str, concurrency: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * concurrency
    errors: list[str] = []

    def worker(i: int) -> None:
        client = grpcclient.InferenceServerClient(url)
        x = np.full((1, WIDTH), float(i), dtype=np.float32)
        t = grpcclient.InferInput("x", [1, WIDTH], "FP32")
        t.set_data_from_numpy(x)
        while time.monotonic() < stop:
            try:
                y = client.infer(model, [t], client_timeout=30).as_numpy("y")
            except Exception as exc:  # counted, reported below
                errors.append(str(exc))
                return
            if y is None or y[0, 0] != 2 * i + 1:
                errors.append(f"wrong result from {model}")
                return
            counts[i] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=seconds + 60)
    if errors:
        raise RuntimeError(f"{model}: {errors[0]}")
    return sum(counts) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement")
    args = parser.parse_args()
    build = build_backend()
    with tempfile.TemporaryDirectory(prefix="npu_ge_bench_") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        repo.mkdir()
        batching = "dynamic_batching {}"  # same scheduling as the python model
        affine_model(repo, "npu_affine", max_batch=16, gears="1,2,4,8,16", width=WIDTH, batching=batching)
        python_model(repo)
        fixed = "dynamic_batching { max_queue_delay_microseconds: 2000 }"
        affine_model(repo, "npu_2ms_batched", max_batch=16, gears="1,2,4,8,16", width=WIDTH,
                     batching=fixed, extra=["delay_us 2000"])
        affine_model(repo, "npu_2ms_unbatched", max_batch=16, gears="1,2,4,8,16", width=WIDTH,
                     batching="", extra=["delay_us 2000"])
        bdir = prepare_backend_directory(tmp / "backends", extra={"npu_ge": build.lib_dir})
        server = TritonProcess(repo, backend_dir=bdir, log_path=tmp / "triton.log", models=[],
                               ld_library_path=[build.double_dir])
        with server:
            for name in ("npu_affine", "py_affine", "npu_2ms_batched", "npu_2ms_unbatched"):
                status, error = load(server.http_url, name, timeout_s=120)
                if status != 200:
                    raise SystemExit(f"cannot load {name}: {error}")
            url = server.grpc_url
            print(f"npu_ge (ACL test double) vs python backend, FP32 [1,{WIDTH}] per request, "
                  f"{args.seconds:.0f} s per point")
            print(f"{'concurrency':>11} {'npu_ge req/s':>13} {'python req/s':>13} {'ratio':>7}")
            for concurrency in (1, 8, 32):
                npu = requests_per_second(url, "npu_affine", concurrency, args.seconds)
                py = requests_per_second(url, "py_affine", concurrency, args.seconds)
                print(f"{concurrency:>11} {npu:>13.0f} {py:>13.0f} {npu / py:>7.2f}")
            with_batching = requests_per_second(url, "npu_2ms_batched", 16, args.seconds)
            without = requests_per_second(url, "npu_2ms_unbatched", 16, args.seconds)
            print("dynamic batching, 2 ms per execute, max batch 16, concurrency 16:")
            print(f"  with {with_batching:.0f} req/s, without {without:.0f} req/s, "
                  f"gain {with_batching / without:.1f}x (the seed article claims 3.6x for its case)")


if __name__ == "__main__":
    main()
