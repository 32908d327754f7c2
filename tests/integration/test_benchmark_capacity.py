"""benchmarks/capacity.py runs end to end (a python model with a known service time in the real
tritonserver, a recorded rate ramp, a searched and an exhaustive sweep with perf_analyzer, the
objective-tuned config replayed at the recorded peak) and prints every figure, slo_hold a 0 or 1.
The goal (capacity_error <= 0.15) is `make bench`'s to measure on a quiet machine; here, beside
another test worker, the test holds the prediction to the right saturation within 0.5: a sweep
that found a wrong rate (half or double) still fails it, the machine's noise does not. Its
exhaustive sweep steps 10 % (9 rates, not the benchmark's 17): a 10 % grid still tells a
right rate from half or double, in half the sweep's time."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("capacity_error", "capacity_search_time_ratio", "slo_hold")
BENCH_LINE = re.compile(r"^BENCH (\S+) (\S+) (\S+)")


def test_the_capacity_benchmark_prints_every_figure_and_predicts_the_saturation() -> None:
    benchmark = REPO_ROOT / "benchmarks" / "capacity.py"
    done = subprocess.run([sys.executable, str(benchmark), "--grid-step", "0.1"], capture_output=True,
                          text=True, timeout=900, check=False, cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = {m.group(1): float(m.group(2)) for line in done.stdout.splitlines()
               if (m := BENCH_LINE.match(line))}
    assert sorted(printed) == sorted(FIGURES), done.stdout
    assert all(math.isfinite(v) for v in printed.values()), printed
    assert 0 <= printed["capacity_error"] <= 0.5, done.stdout
    assert printed["capacity_search_time_ratio"] > 0, done.stdout
    assert printed["slo_hold"] in (0.0, 1.0), done.stdout
