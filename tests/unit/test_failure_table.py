"""One classify/render for every boundary's failure table (geadmin.failure_table): perf_analyzer
and the docker CLI read theirs through it, and a table with a failure left unsaid is refused."""

from __future__ import annotations

import enum
import re
import subprocess
from pathlib import Path

import pytest

from geadmin.errors import DockerError, GeAdminError, PerfAnalyzerError
from geadmin.failure_table import FailureTable
from geadmin.ops.bench import failures as bench_failures
from geadmin.stack import docker_cli

ROOT = Path(__file__).resolve().parents[2]


class Planted(enum.Enum):
    MISSING = "no binary"
    BUSY = "busy"
    OTHER = "anything else"


def test_a_failure_without_a_message_is_refused_when_the_table_is_built() -> None:
    with pytest.raises(TypeError, match="no error message for BUSY"):
        FailureTable((("busy", Planted.BUSY),), ((OSError, Planted.MISSING),),
                     {Planted.MISSING: (GeAdminError, "m"), Planted.OTHER: (GeAdminError, "o")},
                     Planted.OTHER)


def test_first_match_wins_and_the_rest_is_other() -> None:
    table = FailureTable(
        (("busy", Planted.BUSY), ("no such", Planted.MISSING)),
        ((FileNotFoundError, Planted.MISSING), (OSError, Planted.BUSY)),
        {Planted.MISSING: (GeAdminError, "{what}: missing ({detail})"),
         Planted.BUSY: (DockerError, "{what}: busy"), Planted.OTHER: (GeAdminError, "{what}: {detail}")},
        Planted.OTHER)
    assert table.classify(FileNotFoundError()) is Planted.MISSING  # the subclass row comes first
    assert table.classify(PermissionError()) is Planted.BUSY
    assert table.classify(ValueError()) is Planted.OTHER
    assert table.classify(output="Device BUSY; no such file") is Planted.BUSY
    assert table.classify(output="") is Planted.OTHER
    error = table.error(Planted.BUSY, what="x")
    assert type(error) is DockerError and str(error) == "x: busy"
    assert table.render(Planted.MISSING, what="x", detail="d") == (GeAdminError, "x: missing (d)")


def test_both_boundaries_read_their_tables_through_the_one_table() -> None:
    assert isinstance(bench_failures.TABLE, FailureTable) and isinstance(docker_cli.TABLE, FailureTable)
    assert bench_failures.classify(subprocess.SubprocessError()) is bench_failures.BenchFailure.OTHER
    no_engine = docker_cli.classify(output="Cannot connect to the Docker daemon")
    assert no_engine is docker_cli.DockerFailure.NO_ENGINE
    assert isinstance(bench_failures.TABLE.error(bench_failures.BenchFailure.OTHER, model="m", detail="boom"),
                      PerfAnalyzerError)
    copies = [f"{path.relative_to(ROOT)}:{number}"
              for path in sorted((ROOT / "geadmin").rglob("*.py")) if path.name != "failure_table.py"
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"for kind, \w+ in \w+ if isinstance\(exc, kind\)", line)]
    assert not copies, f"classify through geadmin.failure_table.FailureTable, not a copy: {copies}"
