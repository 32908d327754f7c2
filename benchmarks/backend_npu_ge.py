"""npu_ge with the ACL runtime test double in the real tritonserver, loaded by perf_analyzer.

One server, every model loaded at once, each comparison measured side by side in this run:
rounds interleave the two sides (the order flips each round). Times (figures 1 and 2)
take each side's best round, since noise only adds to a time; throughput comparisons
(3 and 4) take the round with the median on/off ratio, reported whole. The load is the
tritonclient wheel's perf_analyzer (C++, gRPC) with system shared memory: tensors do not
travel on the wire, so the client stays cheap even at 4 MB and the figures are the
server's. Server-side times come from Triton's statistics (/v2/models/<m>/stats), read
just before and just after each perf_analyzer invocation; every model's first response is
checked (y = 2x + 1) before it is measured.

1. Backend overhead (goal: ratio <= 0.047, the figure before issue 13): compute input +
   infer + output per inference, npu_ge with a zero-delay double vs the python backend
   computing the same, 1 KB per request, concurrency 1 (no batching, so per request =
   per inference).
2. Host path vs the physical limit (goal <= 1.5x): npu_ge's compute input + output per
   inference at 4 MB in and 4 MB out vs libc memcpy (through ctypes) of 4 MB + 4 MB
   between warm buffers, best of the rounds on both sides.
3. Dynamic batching (goal: efficiency >= 0.9): the double at `delay_us` 5000 +
   `delay_per_row_us` 50, max_batch_size 16 (gears 1..16, so an execute costs exactly its
   rows), concurrency 16, dynamic batching on (preferred_batch_size 16, queue delay
   20 ms) vs off. Efficiency = gain / ideal gain,
   ideal = 16 * (5 + 0.05) / (5 + 16 * 0.05) from the double's cost model. The goal's
   figure drives Triton in-process (perf_analyzer --service-kind triton_c_api, the same
   libtritonserver and backends): at concurrency 16 all clients wait on one batch, so the
   clients' turnaround runs in series with every execution, and over gRPC on this 2-core
   machine that turnaround (16 requests through the protocol stacks, ~2.5 ms) is what the
   figure would measure. The gRPC figure is printed beside it, with a line saying where
   the batched instance's time went (batch size, busy share, queue, CPU), and a gRPC run at
   concurrency 32, where a queued batch hides the turnaround;
   benchmarks/harness/trace_batching.py splits the time between two batches further, from
   Triton's per-request trace.
4. Copy/execute overlap: throughput with the model parameter copy_overlap "true" vs
   "false" at 4 MB in/out (FP64), batches of up to 2, concurrency 4 (two batches in
   flight), a 1 ms execute delay. The double's element-wise compute (host CPU, inside execute)
   outweighs the copies even at FP64, so a diagnostic line prints the ceiling full overlap
   could reach from the measured copy and execute times.

Prints `BENCH <name> <value> <unit>` lines. Whole run: about 2 minutes with the defaults.
Run: python benchmarks/backend_npu_ge.py [--window-ms 1000] [--rounds 3] [--only overhead,...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from harness.npu_ge import (  # noqa: E402
    InProcess,
    Load,
    Memcpy,
    Window,
    check_affine,
    measure,
    npu_server,
    parameter,
    python_affine_model,
)

from geadmin.ops.bench_results import BenchPoint  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from tests.support.npu_ge import affine_model  # noqa: E402

SMALL_WIDTH = 256  # FP32 elements: 1 KB per request
LARGE_WIDTH = 1 << 20  # FP32 elements: 4 MB per request
LARGE_BYTES = LARGE_WIDTH * 4
# Overlap: FP64, so 4 MB is half as many elements for the double's element-wise compute
# (which runs on the host CPU inside "execute" and would otherwise dwarf the copies).
OVERLAP_WIDTH = LARGE_BYTES // 8
BATCH = 16
PREVIOUS_OVERHEAD_RATIO = 0.047
COLD_COPIES = 16  # 16 x (4 MB source + 4 MB destination): larger than the last-level cache
SECTIONS = ("overhead", "host_path", "batching", "overlap")


def bench(name: str, value: float, unit: str, note: str = "") -> None:
    print(f"BENCH {name} {value:.4g} {unit}" + (f"  # {note}" if note else ""), flush=True)


def repository(repo: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    """Every model of every section; {section: models}."""
    gears_all = ",".join(str(g) for g in range(1, BATCH + 1))
    # copy_overlap off: at concurrency 1 nothing overlaps, and the completion thread's hand-off
    # would only add the double's thread switches to the backend's own cost
    affine_model(repo, "ovh_npu", max_batch=BATCH, gears="1,2,4,8,16", width=SMALL_WIDTH, batching="",
                 config_extra=parameter("copy_overlap", "false"))
    python_affine_model(repo, "ovh_python", width=SMALL_WIDTH, max_batch=BATCH)
    affine_model(repo, "host_npu", max_batch=1, gears=None, width=LARGE_WIDTH, batching="")
    cost = [f"delay_us {args.delay_us}", f"delay_per_row_us {args.delay_per_row_us:g}"]
    batcher = (f"dynamic_batching {{ preferred_batch_size: [{BATCH}] "
               f"max_queue_delay_microseconds: {args.queue_delay_us} }}")
    affine_model(repo, "batch_on", max_batch=BATCH, gears=gears_all, width=SMALL_WIDTH,
                 batching=batcher, extra=cost)
    affine_model(repo, "batch_off", max_batch=BATCH, gears=gears_all, width=SMALL_WIDTH,
                 batching="", extra=cost)
    for name, overlap in (("overlap_on", "true"), ("overlap_off", "false")):
        affine_model(repo, name, max_batch=2, gears="1,2", width=OVERLAP_WIDTH, dtype="FP64",
                     batching="dynamic_batching { }", extra=[f"delay_us {args.overlap_delay_us}"],
                     config_extra=parameter("copy_overlap", overlap))
    return {"overhead": ["ovh_npu", "ovh_python"], "host_path": ["host_npu"],
            "batching": ["batch_on", "batch_off"], "overlap": ["overlap_on", "overlap_off"]}


@dataclass(frozen=True)
class Rig:
    """What every section measures with: the running server (gRPC), the repository it
    serves, how perf_analyzer drives it, and perf_analyzer's in-process mode."""

    server: TritonProcess
    repo: Path
    load: Load
    in_process: InProcess


Measured = TypeVar("Measured", Window, BenchPoint)


def interleaved(rounds: int, models: Sequence[str],
                run: Callable[[str], Measured]) -> dict[str, list[Measured]]:
    """`run` each model once per round for `rounds` rounds, interleaved (the order flips
    each round so neither side always runs first); {model: its windows in round order}."""
    seen: dict[str, list[Measured]] = {m: [] for m in models}
    for r in range(rounds):
        for model in (models if r % 2 == 0 else list(reversed(models))):
            seen[model].append(run(model))
    return seen


def best_rounds(rounds: int, models: Sequence[str], run: Callable[[str], Window],
                key: Callable[[Window], float]) -> list[Window]:
    """Each model's lowest-`key` window over interleaved rounds (for times: noise only adds)."""
    seen = interleaved(rounds, models, run)
    return [min(seen[m], key=key) for m in models]


def median_pair(rounds: int, a: str, b: str, run: Callable[[str], Measured]) -> tuple[Measured, Measured]:
    """The round whose throughput ratio a/b is the median of the rounds' (paired: both sides
    of a round see the same machine, so a burst of load on this shared machine moves one
    round, not the figure)."""
    seen = interleaved(rounds, [a, b], run)
    pairs = sorted(zip(seen[a], seen[b], strict=True),
                   key=lambda pair: pair[0].throughput_per_s / pair[1].throughput_per_s)
    return pairs[(len(pairs) - 1) // 2]


COMPUTE = ("compute_input", "compute_infer", "compute_output")


def overhead(rig: Rig, args: argparse.Namespace) -> None:
    def compute_us(w: Window) -> float:
        return w.per_inference_us(*COMPUTE)

    npu, py = best_rounds(args.rounds, ["ovh_npu", "ovh_python"],
                          lambda m: measure(rig.server, m, 1, rig.load, SMALL_WIDTH * 4), compute_us)
    ratio = compute_us(npu) / compute_us(py)
    bench("npu_ge_overhead_us", compute_us(npu), "us", "compute input+infer+output per inference, "
          "zero-delay double, 1 KB, concurrency 1")
    bench("python_overhead_us", compute_us(py), "us", "same for the python backend (y = 2x + 1)")
    bench("npu_ge_overhead_ratio", ratio, "x", f"npu_ge / python; goal <= {PREVIOUS_OVERHEAD_RATIO}: "
          + ("met" if ratio <= PREVIOUS_OVERHEAD_RATIO else "missed"))


def host_path(rig: Rig, args: argparse.Namespace) -> None:
    copies = Memcpy(LARGE_BYTES, copies=2)  # 4 MB in + 4 MB out
    staged = Memcpy(LARGE_BYTES, copies=4)  # diagnostic: in and out each staged once more
    cold = Memcpy(LARGE_BYTES, copies=COLD_COPIES)  # diagnostic: 2 x 4 MB out of 2 x 64 MB
    memcpy_us: list[float] = []
    staged_us: list[float] = []
    cold_us: list[float] = []

    def host_us(w: Window) -> float:
        return w.per_inference_us("compute_input", "compute_output")

    def npu_then_memcpy(model: str) -> Window:
        window = measure(rig.server, model, 1, rig.load, LARGE_BYTES)
        memcpy_us.append(copies.mean_us(args.memcpy_repeats))  # right after, on the idle server
        staged_us.append(staged.mean_us(args.memcpy_repeats))
        cold_us.append(cold.mean_us(max(args.memcpy_repeats // 8, 1)) / (COLD_COPIES / 2))
        return window

    (npu,) = best_rounds(args.rounds, ["host_npu"], npu_then_memcpy, host_us)
    baseline = min(memcpy_us)
    ratio = host_us(npu) / baseline
    bench("npu_ge_host_path_us", host_us(npu), "us", "compute input + output per inference, "
          "4 MB in + 4 MB out, system shared memory")
    bench("memcpy_8mb_us", baseline, "us", "libc memcpy via ctypes, 4 MB + 4 MB, warm buffers")
    bench("npu_ge_host_path_ratio", ratio, "x", "goal <= 1.5: " + ("met" if ratio <= 1.5 else "missed"))
    print(f"  host path: compute input {npu.per_inference_us('compute_input'):.0f} us, compute output "
          f"{npu.per_inference_us('compute_output'):.0f} us; memcpy of 4 x 4 MB (request -> staging -> "
          f"device, device -> staging -> response, as this build copies) {min(staged_us):.0f} us; "
          f"memcpy of 4 MB + 4 MB with buffers cycling through 128 MB (no last-level cache hits) "
          f"{min(cold_us):.0f} us", flush=True)


def batching(rig: Rig, args: argparse.Namespace) -> None:
    fixed_ms, row_ms = args.delay_us / 1000.0, args.delay_per_row_us / 1000.0
    ideal = BATCH * (fixed_ms + row_ms) / (fixed_ms + BATCH * row_ms)
    cost = f"concurrency {BATCH}, {args.delay_us} us + {args.delay_per_row_us:g} us/row"
    # The goal's figure: perf_analyzer in-process (Triton's C API). At concurrency 16 every
    # client waits on the one batch, so each round pays the clients' turnaround in series
    # with the execution; over gRPC on 2 cores that is ~2.5 ms of 16 requests' protocol work,
    # a cost of the wire and this machine, not of the batcher or the backend.
    on, off = median_pair(args.rounds, "batch_on", "batch_off",
                          lambda m: rig.in_process.measure(rig.repo, m, BATCH, rig.load))
    gain = on.throughput_per_s / off.throughput_per_s
    efficiency = gain / ideal
    bench("npu_ge_batching_on_per_s", on.throughput_per_s, "infer/s",
          f"dynamic batching, {cost}, perf_analyzer in-process (C API)")
    bench("npu_ge_batching_off_per_s", off.throughput_per_s, "infer/s", "same model, no dynamic batching")
    bench("npu_ge_batching_gain", gain, "x", f"ideal {ideal:.2f}x from the cost model")
    bench("npu_ge_batching_efficiency", efficiency, "ratio",
          "gain / ideal gain; goal >= 0.9: " + ("met" if efficiency >= 0.9 else "missed"))
    print(f"  in-process, batching on: execute {on.compute_infer_ms:.2f} ms per request's batch "
          f"(cost model {fixed_ms + BATCH * row_ms:.2f}), queue {on.queue_ms:.2f} ms; batching off: "
          f"execute {off.compute_infer_ms:.2f} ms (cost model {fixed_ms + row_ms:.2f})", flush=True)

    wire_on, wire_off = median_pair(args.rounds, "batch_on", "batch_off",
                                    lambda m: measure(rig.server, m, BATCH, rig.load, SMALL_WIDTH * 4))
    bench("npu_ge_batching_efficiency_grpc", wire_on.throughput_per_s / wire_off.throughput_per_s / ideal,
          "ratio", f"diagnostic: the same over gRPC + system shared memory ({wire_on.throughput_per_s:.0f} "
          f"vs {wire_off.throughput_per_s:.0f} infer/s)")
    print(explain_batching(wire_on, wire_off, fixed_ms + BATCH * row_ms, fixed_ms + row_ms), flush=True)
    if args.diagnose_concurrency:
        c = args.diagnose_concurrency
        deeper = measure(rig.server, "batch_on", c, rig.load, SMALL_WIDTH * 4)
        bench(f"npu_ge_batching_efficiency_c{c}", deeper.throughput_per_s / wire_off.throughput_per_s / ideal,
              "ratio", f"diagnostic: over gRPC at concurrency {c} (a batch queued while one "
              f"executes, so the turnaround overlaps), over off at {BATCH}; mean batch "
              f"{deeper.mean_batch:.2f}, instance busy {deeper.busy_fraction:.0%}")


def explain_batching(on: Window, off: Window, full_ms: float, single_ms: float) -> str:
    """Where the batched instance's time went, from Triton's statistics."""
    queue_ms = on.per_inference_us("queue") / 1000.0
    cycle_ms = BATCH / on.throughput_per_s * 1000.0  # one full round of the 16 clients
    return (f"  gRPC, batching on: mean batch {on.mean_batch:.2f}, execute {on.execute_ms:.2f} ms "
            f"(cost model {full_ms:.2f}), instance busy {on.busy_fraction:.0%}, queue wait "
            f"{queue_ms:.2f} ms/request, a round of {BATCH} requests every {cycle_ms:.2f} ms "
            f"(client-side latency {on.client_latency_ms:.2f} ms); "
            f"batching off: mean batch {off.mean_batch:.2f}, execute {off.execute_ms:.2f} ms "
            f"(cost model {single_ms:.2f}), instance busy {off.busy_fraction:.0%}; batching on "
            + (on.cpu.describe() if on.cpu else "CPU not measured"))


def overlap(rig: Rig, args: argparse.Namespace) -> None:
    on, off = median_pair(args.rounds, "overlap_on", "overlap_off",
                          lambda m: measure(rig.server, m, args.overlap_concurrency, rig.load, LARGE_BYTES))
    gain = on.throughput_per_s / off.throughput_per_s
    bench("npu_ge_overlap_on_per_s", on.throughput_per_s, "infer/s",
          f"copy_overlap true, 4 MB in/out (FP64), batch <= 2, delay {args.overlap_delay_us} us, "
          f"concurrency {args.overlap_concurrency}")
    bench("npu_ge_overlap_off_per_s", off.throughput_per_s, "infer/s", "copy_overlap false")
    bench("npu_ge_overlap_gain", gain, "x", "on / off: host gather/scatter of batch N+1 behind the "
          "execution of batch N (see the ceiling below)")
    copy_us = off.per_inference_us("compute_input", "compute_output")
    infer_us = off.per_inference_us("compute_infer")
    bound = (copy_us + infer_us) / max(copy_us, infer_us)
    print(f"  overlap off, per batch: copies (compute input + output) {copy_us:.0f} us, execute "
          f"(compute infer: the double's element-wise compute + delay) {infer_us:.0f} us, mean batch "
          f"{off.mean_batch:.2f}; full overlap could reach ~{bound:.2f}x",
          flush=True)


RUNNERS = {"overhead": overhead, "host_path": host_path, "batching": batching, "overlap": overlap}
SHAPES = {"ovh_npu": (SMALL_WIDTH, "FP32"), "ovh_python": (SMALL_WIDTH, "FP32"),
          "host_npu": (LARGE_WIDTH, "FP32"), "batch_on": (SMALL_WIDTH, "FP32"),
          "batch_off": (SMALL_WIDTH, "FP32"), "overlap_on": (OVERLAP_WIDTH, "FP64"),
          "overlap_off": (OVERLAP_WIDTH, "FP64")}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-ms", type=int, default=1000, help="perf_analyzer measurement interval")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best counts)")
    parser.add_argument("--max-trials", type=int, default=10, help="perf_analyzer windows before it gives up")
    parser.add_argument("--stability-percent", type=float, default=50.0,
                        help="perf_analyzer's stability band for its last 3 windows")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--memcpy-repeats", type=int, default=200, help="memcpy rounds per baseline round")
    parser.add_argument("--delay-us", type=int, default=5000, help="batching: fixed execute time")
    parser.add_argument("--delay-per-row-us", type=float, default=50.0, help="batching: per executed row")
    parser.add_argument("--queue-delay-us", type=int, default=20000,
                        help="batching: max_queue_delay_microseconds (with preferred_batch_size 16); "
                             "longer than one execute, so a request that missed a batch waits for "
                             "the others instead of running alone and splitting the clients in two")
    parser.add_argument("--diagnose-concurrency", type=int, default=2 * BATCH,
                        help="batching: also measure batching on at this concurrency (0: skip)")
    parser.add_argument("--overlap-delay-us", type=int, default=1000, help="overlap: execute delay")
    parser.add_argument("--overlap-concurrency", type=int, default=4, help="overlap: concurrency")
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown or args.rounds < 1:
        parser.error(f"unknown sections {unknown} (known: {SECTIONS})" if unknown else "--rounds >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load = Load(args.window_ms, args.stability_percent, args.max_trials)
    with tempfile.TemporaryDirectory(prefix="npu_ge_bench_") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        repo.mkdir()
        sections = repository(repo, args)
        models = [m for s in args.sections for m in sections[s]]
        with npu_server(repo, tmp, models) as server:
            for model in models:
                check_affine(server, model, *SHAPES[model])
            print(f"npu_ge (ACL test double) in tritonserver, perf_analyzer gRPC + system shared "
                  f"memory, {args.window_ms} ms windows, {args.rounds} interleaved rounds (times: best; "
                  "throughput ratios: median round)",
                  flush=True)
            rig = Rig(server, repo, load, InProcess.prepare(tmp))
            for section in args.sections:
                RUNNERS[section](rig, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
