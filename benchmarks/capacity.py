"""Capacity from objectives against a model whose saturation rate is known, in one run.

A python model in the real tritonserver sleeps S per request (--service-ms, default 40) with
one instance, so it saturates at 1 / S requests/s (25/s). Its objective is p99 <= --p99-ms
(default 200 ms); a recorded request-rate ramp (10 -> 40 req/s over 24 one-minute windows) is
written into the workspace history the way the sampler writes it.

- `BENCH capacity_error`: |geadmin's saturation rate (`capacity_report --measure`: doubling,
  then bisection) - the exhaustive sweep's (every rate from 0.5x to 1.3x of 1 / S, 5 % apart
  (--grid-step), same windows, same trial machinery)| / the exhaustive sweep's (goal <= 0.15). Beside it, the
  error against the known 1 / S.
- `BENCH capacity_search_time_ratio`: the search's wall time / the exhaustive sweep's.
- `BENCH slo_hold`: 1 when the config `geadmin tune MODEL --objective` picks (at the recorded
  peak), applied with `geadmin tune --apply-run`, holds the p99 objective when the recorded peak
  rate is replayed against the live model with perf_analyzer; else 0.
Run: python benchmarks/capacity.py [--service-ms 40] [--p99-ms 200] [--grid-step 0.05] [--skip-tune]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from geadmin.access import guard  # noqa: E402
from geadmin.ops.bench.load_test import run_perf_analyzer  # noqa: E402
from geadmin.ops.bench.params import BenchSettings  # noqa: E402
from geadmin.ops.bench.results import REQUEST_RATE  # noqa: E402
from geadmin.ops.capacity.report import CapacityOptions, capacity_report  # noqa: E402
from geadmin.ops.capacity.sweep import run_saturation_sweep  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.telemetry.alerting.objectives import Objective  # noqa: E402
from geadmin.telemetry.alerting.objectives import store as store_objective  # noqa: E402
from geadmin.telemetry.history.reader import WorkspaceHistory  # noqa: E402
from geadmin.triton.client import TritonClient  # noqa: E402
from tests.support.capacity_models import add_paced_model, record_ramp  # noqa: E402

MODEL = "paced"
RAMP = [10.0 + 30.0 * i / 23 for i in range(24)]  # req/s, one-minute windows, peak 40


def bench(name: str, value: float, unit: str, note: str = "") -> None:
    print(f"BENCH {name} {value:.4g} {unit}" + (f"  # {note}" if note else ""), flush=True)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def geadmin(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "geadmin.cli", *args], capture_output=True, text=True,
                          env=env, timeout=900, check=False, cwd=REPO_ROOT)


def slo_hold(server: TritonProcess, home: Path, p99_ms: float) -> tuple[int, str]:
    """Tune to the objective through the CLI, apply the winner, replay the recorded peak."""
    env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_TRITON_URL": server.http_url,
           "GEADMIN_TRITON_METRICS_URL": server.metrics_url, "GEADMIN_REPOSITORY": str(server.repository)}
    tuned = geadmin(["tune", MODEL, "--objective", "--json"], env)
    if tuned.returncode != 0:
        return -1, (f"`geadmin tune {MODEL} --objective` exited {tuned.returncode}: "
                    f"{tuned.stderr.strip()[-800:]}")
    document = json.loads(tuned.stdout)
    if not document.get("best"):
        return 0, f"no config met the objective: {document.get('headline', '')}"
    applied = geadmin(["tune", MODEL, "--apply-run", str(document["id"])], env)
    if applied.returncode != 0:
        return -1, (f"apply of run {document['id']} exited {applied.returncode}: "
                    f"{applied.stdout}{applied.stderr}")
    peak = max(RAMP)
    run = run_perf_analyzer(BenchSettings(MODEL, server.http_url, mode=REQUEST_RATE, loads=(peak,),
                                          measurement_interval_ms=3000, stability_percentage=20.0,
                                          max_trials=5),
                            auth=guard.os_user())
    point = run.points[0]
    held = point.p99_ms <= p99_ms and point.throughput_per_s >= 0.9 * peak
    return int(held), (f"tuned: {document.get('headline', '')}; replayed {peak:g} req/s: "
                       f"p99 {point.p99_ms:.1f} "
                       f"ms, {point.throughput_per_s:.1f}/s (objective p99 <= {p99_ms:g} ms)")


def grid_step(text: str) -> float:
    """A step of the exhaustive sweep: more than 0, at most the grid's 0.8 span."""
    try:
        step = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid-step takes a number, got {text!r}") from None
    if not 0 < step <= 0.8:
        raise argparse.ArgumentTypeError(f"--grid-step is more than 0 and at most 0.8, got {text}")
    return step


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--service-ms", type=float, default=40.0)
    parser.add_argument("--p99-ms", type=float, default=200.0)
    parser.add_argument("--window-ms", type=int, default=1500)
    parser.add_argument("--grid-step", type=grid_step, default=0.05,
                        help="the exhaustive sweep's step, a fraction of 1 / S (default 0.05)")
    parser.add_argument("--skip-tune", action="store_true", help="leave out slo_hold (no tune --objective)")
    args = parser.parse_args(argv)
    known = 1000.0 / args.service_ms
    with tempfile.TemporaryDirectory(prefix="geadmin-capacity-bench-") as scratch_name:
        scratch = Path(scratch_name)
        repository, home = scratch / "repo", scratch / "home"
        repository.mkdir()
        add_paced_model(repository, MODEL, service_s=args.service_ms / 1000.0, instances=1)
        goal = Objective(MODEL, p99_ms=args.p99_ms, error_budget=0.01)
        store_objective(goal, "benchmark", home=home)
        server = TritonProcess(repository, models=[MODEL], log_path=scratch / "tritonserver.log",
                               exit_timeout_s=1)
        server.start()
        try:
            record_ramp(server.metrics_url, MODEL, RAMP, end_s=time.time(), step_s=60.0, home=home)
            with TritonClient(server.http_url) as client:
                started = time.monotonic()
                report = capacity_report(
                    client, model=MODEL, repository=repository, home=home, auth=guard.os_user(),
                    history=WorkspaceHistory(home), source=server.metrics_url, progress=say,
                    options=CapacityOptions(measure=True, window_ms=args.window_ms))
                search_s = time.monotonic() - started
                started = time.monotonic()
                grid = [known * (0.5 + args.grid_step * i) for i in range(round(0.8 / args.grid_step) + 1)]
                sweep = run_saturation_sweep(client, repository, MODEL, goal, auth=guard.os_user(), home=home,
                                             rates=grid, window_ms=args.window_ms, progress=say)
                sweep_s = time.monotonic() - started
            hold = (-1, "left out (--skip-tune)") if args.skip_tune else slo_hold(server, home, args.p99_ms)
        finally:
            server.stop()
    [row] = report.models
    predicted, measured = row.saturation.value, sweep.rate_rps
    if not predicted or not measured:
        say(f"no saturation rate: search {predicted}, exhaustive {measured} ({sweep.curve})")
        return 1
    bench("capacity_error", abs(predicted - measured) / measured, "ratio",
          f"search {predicted:.1f} req/s vs exhaustive {measured:.1f} req/s; known 1/S {known:.1f} req/s "
          f"(error {abs(predicted - known) / known:.2f}); goal <= 0.15")
    bench("capacity_search_time_ratio", search_s / sweep_s, "x",
          f"search {search_s:.0f} s vs exhaustive sweep {sweep_s:.0f} s ({len(sweep.curve)} rates)")
    say(f"capacity: {row.short or 'fine'}; peak {row.peak.text()}; headroom {row.headroom.text()}")
    if hold[0] < 0:
        say(f"slo_hold not measured: {hold[1]}")
        return 0 if args.skip_tune else 1
    bench("slo_hold", hold[0], "bool", hold[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
