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
# A reduced run: a batching sweep of one concurrency with the headline's queue delay (20 ms,
# the headline's model) and none at all (0, a model of its own); two overhead rounds.
SWEEP = ("--concurrencies", "32", "--queue-delays-us", "0,20000", "--overhead-rounds", "2")
SWEEP_CELLS = [*(f"npu_ge_batching_c32_q{q}ms_{kind}" for q in (0, 20) for kind in ("vs_ceiling", "gain")),
               "npu_ge_batching_c32_q0ms_no_overlap_vs_ceiling"]
FIGURES = (
    "npu_ge_overhead_us", "python_overhead_us", "npu_ge_overhead_ratio", "python_overhead_spread",
    "npu_ge_overhead_ratio_baseline_noise",
    "npu_ge_host_path_us", "memcpy_floor_us", "npu_ge_host_path_vs_floor", "memcpy_8mb_us",
    "npu_ge_host_path_ratio", "memcpy_cold_us", "memcpy_staged_floor_us", "npu_ge_staging_copy_in_us",
    "npu_ge_staging_copy_out_us",
    "npu_ge_batching_on_per_s", "npu_ge_batching_off_per_s", "batching_vs_ceiling", "npu_ge_batching_gain",
    "npu_ge_batching_efficiency", "npu_ge_batching_turnaround_ms", "npu_ge_batching_efficiency_c32",
    *SWEEP_CELLS,
    "npu_ge_overlap_on_per_s", "npu_ge_overlap_off_per_s", "npu_ge_overlap_gain",
    "npu_ge_load_peak_ratio", "npu_ge_reload_peak_ratio",
)
BENCH_LINE = re.compile(r"^BENCH (\S+) (\S+) (\S+)")


def test_the_npu_ge_benchmark_prints_every_figure_as_a_positive_number() -> None:
    done = subprocess.run(
        # The widest stability band there is (100 %) and up to 12 windows to find 3 inside it:
        # perf_analyzer stops at the first stable 3, so a quiet machine still takes ~3 windows,
        # and a busy one (4 windows failed on CI-like load) gets room instead of an error.
        [sys.executable, str(SCRIPT), "--window-ms", "200", "--rounds", "1", "--max-trials", "12",
         "--stability-percent", "100", "--memcpy-repeats", "3", *SWEEP],
        capture_output=True, text=True, timeout=540, check=False, cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed: dict[str, float] = {}
    for line in done.stdout.splitlines():
        match = BENCH_LINE.match(line)
        if match:
            assert match[1] not in printed, f"{match[1]} printed twice"
            printed[match[1]] = float(match[2])
    assert sorted(printed) == sorted(FIGURES), done.stdout
    assert all(math.isfinite(v) and v > 0 for v in printed.values()), printed


@pytest.mark.parametrize(("flags", "message"), [
    (["--only", "overhead,nonsense"], "unknown sections ['nonsense']"),
    (["--concurrencies", "0,16"], "--concurrencies >= 1"),
    (["--queue-delays-us", ""], "at least one of each"),
    (["--overhead-rounds", "1"], "--overhead-rounds >= 2"),
])
def test_bad_flags_are_refused_before_anything_starts(flags: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *flags],
                          capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT)
    assert done.returncode == 2 and message in done.stderr, done.stderr
