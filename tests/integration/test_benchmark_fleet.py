"""benchmarks/fleet.py runs end to end (four real tritonservers, fleet status of 1, 2 and 4, a
version rollout across them; 200 listener doubles; each with and without --configs) and prints
every figure as a positive number. Behaviour only: the timings are the benchmark's; the read
counts are its goals."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("fleet_status_ms_1", "fleet_status_ms_2", "fleet_status_ms_4", "fleet_status_ratio_4",
           "fleet_status_ms_1_rtt", "fleet_status_ms_2_rtt", "fleet_status_ms_4_rtt",
           "fleet_status_ratio_4_rtt",
           "fleet_per_server_ms", "fleet_index_reads_per_step", "fleet_status_ms_200",
           "fleet_status_index_reads_200", "fleet_status_ms_4_configs", "fleet_status_configs_ratio_4",
           "fleet_status_ms_200_configs", "fleet_status_configs_ratio_200", "fleet_status_config_reads_200")
BENCH_LINE = re.compile(r"^BENCH (\S+) (\S+) (\S+)")


def test_the_fleet_benchmark_prints_every_figure_as_a_positive_number() -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "fleet.py"), "--rounds", "2"],
                          capture_output=True, text=True, timeout=300, check=False, cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = {m.group(1): float(m.group(2)) for line in done.stdout.splitlines()
               if (m := BENCH_LINE.match(line))}
    assert sorted(printed) == sorted(FIGURES), done.stdout
    assert all(math.isfinite(v) and v > 0 for v in printed.values()), printed
    # The two counts are the benchmark's goals, not timings: a rollout step reads each server's
    # index at most twice, a fleet status once.
    assert printed["fleet_index_reads_per_step"] <= 2, printed
    assert printed["fleet_status_index_reads_200"] == 1, printed
    assert printed["fleet_status_config_reads_200"] == 2, printed  # --configs: one per shared model (2)
