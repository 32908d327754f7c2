"""A reader that leaves early ends geadmin quietly: `geadmin audit | head -1` and
`geadmin audit | true` exit 0 or 141 (128 + SIGPIPE, as `cat` would) with nothing on stderr,
never "internal error: BrokenPipeError ... this is a bug in geadmin". main() handles it once
for every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from geadmin import audit, db

GEADMIN = [sys.executable, "-m", "geadmin.cli"]
ROWS = 3000  # far more than a pipe's 64 KiB buffer holds


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("pipes")
    values = [(db.format_time(db.utc_now()), "alice", "cli", "http://127.0.0.1:8000", f"model_{i}", "load",
               "ok", f"row {i} " + "x" * 60, "") for i in range(ROWS)]
    with db.connect(home) as conn, db.transaction(conn):
        conn.executemany("INSERT INTO audit (at, who, origin, server, model, action, result, message, diff) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
    assert len(audit.query(home=home, limit=5)) == 5
    return home


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_DEBUG": "0"}


@pytest.mark.parametrize("args", [["audit"], ["audit", "--json"], ["audit", "--csv", "-"]],
                         ids=["table", "json", "csv"])
def test_a_reader_that_closes_the_pipe_at_once_ends_geadmin_quietly(home: Path, args: list[str]) -> None:
    """`geadmin audit | true`: the reader is gone before the first write."""
    process = subprocess.Popen([*GEADMIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=_env(home))
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    code = process.wait(60)
    assert code in (0, 141), (code, stderr)
    assert stderr == ""


def test_head_one_takes_the_first_line_and_geadmin_ends_quietly(home: Path, tmp_path: Path) -> None:
    """`geadmin audit | head -1`: the reader leaves after one line, mid-output."""
    errors = tmp_path / "stderr"
    shell = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$@" 2>"$ERRORS" | head -1', "_", *GEADMIN, "audit"],
        capture_output=True, text=True, env={**_env(home), "ERRORS": str(errors)}, timeout=60)
    assert shell.returncode in (0, 141), shell
    assert len(shell.stdout.splitlines()) == 1
    assert errors.read_text() == ""
