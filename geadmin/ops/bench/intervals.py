"""The file perf_analyzer's `--request-intervals` replays: recorded inter-arrival times.

perf_analyzer 2.51 (`--help`): "a path to a file containing time intervals in microseconds.
Each time interval should be in a new line ... The analyzer will loop around the file if the
duration of execution exceeds to that accounted for by the intervals. This option can not be
used with --request-rate-range or --concurrency-range."

`speedup` scales the load: 2.0 replays the same pattern twice as fast (every interval halved,
at least 1 us), which is how a rate curve's 1.5x, 2x, 3x steps replay a recorded capture.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from geadmin.errors import BenchSettingsError
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.bench.results import CONCURRENCY

MAX_INTERVALS = 100_000
MAX_SPEEDUP = 100.0


def scaled_intervals(intervals_us: Sequence[int], speedup: float = 1.0) -> list[int]:
    """The intervals divided by `speedup`, rounded, each at least 1 us."""
    if not intervals_us:
        raise BenchSettingsError("no recorded intervals to replay (a capture needs two arrivals)")
    if len(intervals_us) > MAX_INTERVALS:
        raise BenchSettingsError(f"{len(intervals_us)} intervals to replay, over the bound "
                                 f"of {MAX_INTERVALS}")
    if not 0 < speedup <= MAX_SPEEDUP:
        raise BenchSettingsError(f"a replay speed-up is in (0, {MAX_SPEEDUP:g}], got {speedup:g}")
    if any(v <= 0 for v in intervals_us):
        raise BenchSettingsError("recorded intervals must be positive microseconds")
    return [max(1, round(v / speedup)) for v in intervals_us]


def replay_rate_rps(intervals_us: Sequence[int]) -> float:
    """The mean request rate a replay of these intervals offers (requests per second)."""
    return len(intervals_us) * 1_000_000 / sum(intervals_us)


def write_request_intervals(path: Path, intervals_us: Sequence[int], speedup: float = 1.0) -> Path:
    """Write the file (one interval in microseconds per line) whole or not at all."""
    lines = "".join(f"{v}\n" for v in scaled_intervals(intervals_us, speedup))
    partial = path.with_name(path.name + ".partial")
    partial.write_text(lines, encoding="ascii")
    os.replace(partial, path)
    return path


def load_flag(settings: BenchSettings, span: str) -> list[str]:
    """perf_analyzer's load mode: the recorded intervals when the settings name a file, else
    the concurrency or request-rate range `span` (start:end:step)."""
    if settings.request_intervals is not None:
        return ["--request-intervals", str(settings.request_intervals)]
    return ["--concurrency-range" if settings.mode == CONCURRENCY else "--request-rate-range", span]
