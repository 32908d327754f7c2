"""Which two saved load tests to compare, and what to call them on a chart.

The Load test page and `geadmin bench` list runs latest first (bench_results.list_runs). A
comparison defaults to the two latest runs that can be compared — the latest run (A) and the
latest other run of its kind (B; a concurrency run is not compared with a request-rate run) —
and never pairs a run with itself: B's choices leave A out. A choice that no longer fits (a
new run arrived, A changed to a run of another kind) falls back to the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from geadmin.ops.bench.results import BenchRun


@dataclass(frozen=True)
class Pair:
    a: BenchRun
    b: BenchRun

    @property
    def names(self) -> tuple[str, str]:
        """Short names for a legend ("A #12", "B #11"); the full titles go beside the pickers."""
        return f"A #{self.a.id}", f"B #{self.b.id}"


def partners(runs: Sequence[BenchRun], a: BenchRun) -> list[BenchRun]:
    """The runs B may be for A: every other run of A's kind, latest first."""
    return [r for r in runs if r.id != a.id and r.mode == a.mode]


def default_pair(runs: Sequence[BenchRun]) -> Pair | None:
    """The latest run that has a partner, with its latest partner (None: nothing to compare)."""
    for a in runs:
        others = partners(runs, a)
        if others:
            return Pair(a, others[0])
    return None


def chosen_pair(runs: Sequence[BenchRun], a_id: int | None, b_id: int | None) -> Pair | None:
    """The user's choice where it still fits, the default where it does not: A must be a saved
    run with a partner, B one of A's partners (so never A itself)."""
    fallback = default_pair(runs)
    if fallback is None:
        return None
    by_id = {r.id: r for r in runs}
    a = by_id.get(a_id) if a_id is not None else None
    if a is None or not partners(runs, a):
        a = fallback.a
    others = partners(runs, a)
    b = next((r for r in others if r.id == b_id), others[0])
    return Pair(a, b)
