"""The tuner against an exhaustive sweep of the same space, side by side in one run.

npu_ge with the ACL runtime double in the real tritonserver serves `affine`: an .om with
batch gears 1..16 whose execute costs 5 ms + 0.05 ms per row (the double's cost model), live
config max_batch_size 1 and no dynamic batching. Both searches run `geadmin.ops.tune.search.tune`
on the same server with the same constraint (p99 <= --max-p99-ms at concurrency 16): the
tuner (ceiling by loading, cost model from two measurements, a shortlist) and the sweep
(`exhaustive`: every candidate of the space measured). The order flips with --tuner-first.

- `BENCH tune_quality`: the tuner's best throughput / the sweep's best (goal >= 0.9). Both
  are perf_analyzer measurements of separate trials, so the ratio carries their noise
  (printed beside it: the sweep's own spread between its two best candidates).
- `BENCH tune_time_ratio`: the tuner's wall time / the sweep's (goal <= 0.25).
- `BENCH tune_gain`: the tuner's best / the live config's throughput, measured in the same run.
Run: python benchmarks/tune.py [--max-p99-ms 60] [--window-ms 1000] [--tuner-first]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from harness.npu_ge import npu_server  # noqa: E402

from geadmin.access import guard  # noqa: E402
from geadmin.ops.tune.search import TuneResult, TuneSettings, tune  # noqa: E402
from geadmin.triton.client import TritonClient  # noqa: E402
from tests.support.npu_ge import affine_model  # noqa: E402

GEARS = ",".join(str(g) for g in range(1, 17))


def search(client: TritonClient, repo: Path, home: Path, args: argparse.Namespace,
           exhaustive: bool) -> TuneResult:
    settings = TuneSettings("affine", max_p99_ms=args.max_p99_ms, budget_s=1800.0, concurrency=16,
                            window_ms=args.window_ms, max_batch_size=16, exhaustive=exhaustive)
    return tune(client, repo, settings, auth=guard.os_user(), home=home)


def bench(name: str, value: float, unit: str, note: str = "") -> None:
    print(f"BENCH {name} {value:.4g} {unit}" + (f"  # {note}" if note else ""), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-p99-ms", type=float, default=60.0)
    parser.add_argument("--window-ms", type=int, default=1000)
    parser.add_argument("--tuner-first", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="geadmin-tune-bench-") as scratch_name:
        scratch = Path(scratch_name)
        repo = scratch / "repo"
        repo.mkdir()
        affine_model(repo, "affine", max_batch=1, gears=GEARS, width=16, batching="",
                     extra=["delay_us 5000", "delay_per_row_us 50"])
        with npu_server(repo, scratch, ["affine"]) as server, TritonClient(server.http_url) as client:
            order = (False, True) if args.tuner_first else (True, False)
            runs = {exhaustive: search(client, repo, scratch / "home", args, exhaustive)
                    for exhaustive in order}
    tuner, sweep = runs[False], runs[True]
    if tuner.best is None or sweep.best is None or not tuner.best.throughput or not sweep.best.throughput:
        print(f"no winner: tuner {tuner.headline()}; sweep {sweep.headline()}", file=sys.stderr)
        return 1
    ranked = sorted((t.throughput for t in sweep.trials if t.meets(sweep.settings) and t.throughput),
                    reverse=True)
    spread = (f"the sweep's two best differ by {abs(ranked[0] - ranked[1]) / ranked[0]:.1%}"
              if len(ranked) > 1 else "")
    bench("tune_quality", tuner.best.throughput / sweep.best.throughput, "x",
          f"tuner {tuner.best.throughput:.0f}/s ({tuner.best.candidate.describe()}) vs sweep "
          f"{sweep.best.throughput:.0f}/s ({sweep.best.candidate.describe()}); {spread}; goal >= 0.9")
    bench("tune_time_ratio", tuner.seconds / sweep.seconds, "x",
          f"tuner {tuner.seconds:.0f} s ({len(tuner.trials)} trials) vs sweep {sweep.seconds:.0f} s "
          f"({len(sweep.trials)} trials); goal <= 0.25")
    live = tuner.live_trial
    if live is not None and live.throughput:
        bench("tune_gain", tuner.best.throughput / live.throughput, "x",
              f"live config {live.throughput:.0f}/s at p99 {live.p99_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
