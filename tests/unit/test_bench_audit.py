"""Load tests are audited (geadmin.ops.bench.results.audit_run, called by `load_test` in its
`finally`): who, model, server, loads and the result — a finished run, a run refused because
another holds the server, a failed one, and one cut short by an exception that is not ours (a
Streamlit rerun while the page waits)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit
from geadmin.errors import BenchBusyError, PerfAnalyzerError
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.bench.results import AUDIT_ACTION, BenchRun, audit_run

SETTINGS = BenchSettings("digits_classifier", "http://127.0.0.1:8000", loads=(1.0, 4.0))


class ScriptRerun(BaseException):
    """What Streamlit raises inside a page's `st.*` call when a click asks for a rerun."""


def test_each_load_test_outcome_is_one_audit_row(tmp_path: Path) -> None:
    run = BenchRun("digits_classifier", SETTINGS.url, "concurrency", (), datetime.now(timezone.utc),
                   who="ann", id=7)
    outcomes: list[tuple[BenchRun | None, BaseException | None]] = [
        (run, None), (None, BenchBusyError("another load test runs against it now")),
        (None, PerfAnalyzerError("perf_analyzer exited 99")), (None, ScriptRerun())]
    for done, error in outcomes:
        assert audit_run(SETTINGS.record(), SETTINGS.model, SETTINGS.url, "ann", done, error, tmp_path) == ""
    rows = list(reversed(audit.query(action=AUDIT_ACTION, home=tmp_path)))
    assert [(r.result, r.who, r.model, r.server) for r in rows] == [
        (result, "ann", "digits_classifier", SETTINGS.url)
        for result in ("ok", "refused", "failed", "failed")]
    assert all("(concurrency 1, 4)" in r.message for r in rows)
    assert "run #7" in rows[0].message and "another load test" in rows[1].message
    assert "exited 99" in rows[2].message and "cut short (ScriptRerun)" in rows[3].message


def test_an_unwritable_workspace_is_said_not_raised(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    problem = audit_run(SETTINGS.record(), SETTINGS.model, SETTINGS.url, "", None, ScriptRerun(), blocked)
    assert problem.startswith("the audit row could not be written")
