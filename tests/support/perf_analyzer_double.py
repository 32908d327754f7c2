"""A double of perf_analyzer for the ends of a run the real one reaches only on a starved or
odd host: it replays recorded output (tests/unit/assets/perf_analyzer/) and exits 0, as the
real one does when a window is never stable, with no report or with the first points of a
recorded one. Everything else about load tests runs the real perf_analyzer."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parents[1] / "unit" / "assets" / "perf_analyzer"
UNSTABLE_OUTPUT = ASSETS / "errors" / "unstable.txt"


def perf_analyzer_double(tmp_path: Path, said: str, report_rows: int | None = None) -> Path:
    """An executable that says `said` on stderr and exits 0: with no report (`report_rows`
    None), or with the header and the first `report_rows` points of the recorded
    concurrency 1, 2 report (the loads before the one it gave up on), written where -f says."""
    (tmp_path / "said.txt").write_text(said)
    lines = (ASSETS / "concurrency_http.csv").read_text().splitlines(keepends=True)
    (tmp_path / "report.csv").write_text("".join(lines[:1 + (report_rows or 0)]))
    copy = "" if report_rows is None else \
        f'while [ $# -gt 0 ]; do [ "$1" = -f ] && cp {tmp_path / "report.csv"} "$2"; shift; done\n'
    double = tmp_path / "perf_analyzer"
    double.write_text(f"#!/bin/sh\ncat {tmp_path / 'said.txt'} >&2\n{copy}exit 0\n")
    double.chmod(0o755)
    return double
