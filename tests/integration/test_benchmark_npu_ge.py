"""benchmarks/backend_npu_ge.py runs end to end (real tritonserver, npu_ge with the ACL
double, perf_analyzer) with very short windows and prints every figure as a number.
Behaviour only: the figures' values are not checked here (that is what the benchmark is for)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "benchmarks" / "backend_npu_ge.py"
FIGURES = (
    "npu_ge_overhead_us", "python_overhead_us", "npu_ge_overhead_ratio",
    "npu_ge_host_path_us", "memcpy_8mb_us", "npu_ge_host_path_ratio",
    "npu_ge_batching_on_per_s", "npu_ge_batching_off_per_s", "npu_ge_batching_gain",
    "npu_ge_batching_efficiency", "npu_ge_batching_efficiency_grpc", "npu_ge_batching_efficiency_c32",
    "npu_ge_overlap_on_per_s", "npu_ge_overlap_off_per_s", "npu_ge_overlap_gain",
)
BENCH_LINE = re.compile(r"^BENCH (\S+) (\S+) (\S+)")


def test_the_npu_ge_benchmark_prints_every_figure_as_a_positive_number() -> None:
    done = subprocess.run(
        # The widest stability band there is (100 %) and up to 12 windows to find 3 inside it:
        # perf_analyzer stops at the first stable 3, so a quiet machine still takes ~3 windows,
        # and a busy one (4 windows failed on CI-like load) gets room instead of an error.
        [sys.executable, str(SCRIPT), "--window-ms", "200", "--rounds", "1", "--max-trials", "12",
         "--stability-percent", "100", "--memcpy-repeats", "3"],
        capture_output=True, text=True, timeout=540, check=False, cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed: dict[str, float] = {}
    for line in done.stdout.splitlines():
        match = BENCH_LINE.match(line)
        if match:
            printed[match[1]] = float(match[2])
    assert sorted(printed) == sorted(FIGURES), done.stdout
    assert all(math.isfinite(v) and v > 0 for v in printed.values()), printed


def test_an_unknown_section_is_refused_before_anything_starts() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "overhead,nonsense"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT)
    assert done.returncode == 2 and "unknown sections ['nonsense']" in done.stderr
