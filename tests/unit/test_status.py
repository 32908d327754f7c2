"""`geadmin status` verdicts: which rule applies, exit codes, and a first line that says why."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from geadmin.cli.status import EXIT_NOT_OK, EXIT_OK, EXIT_UNREACHABLE, exit_code, render_text, verdict
from geadmin.diagnose.health import ServerSnapshot, StatusReport, status_report
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.triton.logs import LocalLogFile

NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)
INFO = ServerInfo("triton", "2.51.0", ("model_repository",))


def snapshot(*models: ModelEntry, ready: bool = True, live: bool = True, error: str = "") -> ServerSnapshot:
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=live, ready=ready, info=INFO,
                          models=models, error=error)


READY = ModelEntry("good", "1", ModelState.READY, "")
BROKEN = ModelEntry("broken", "1", ModelState.UNAVAILABLE, "unexpected platform type 'graph_executor'")


def report(*models: ModelEntry, ready: bool = True, expected: tuple[str, ...] = (), strict: bool = False,
           log: LocalLogFile | None = None) -> StatusReport:
    return status_report(snapshot(*models, ready=ready), log=log, expected=expected, strict=strict)


def test_expected_models_ready_exit_zero_even_when_an_unrelated_model_failed() -> None:
    # Triton's strict readiness makes the server "not ready" because of `broken`.
    result = report(READY, BROKEN, ready=False, expected=("good",))
    assert exit_code(result) == EXIT_OK and result.to_json()["rule"] == "expect"
    text = render_text(result)
    assert text.splitlines()[0] == "OK: every expected model READY (good); 1 model(s) READY"
    assert "broken v1 (UNAVAILABLE): unexpected platform type 'graph_executor'" in text
    assert "reported, not counted; --strict counts them" in text


def test_strict_counts_every_failure() -> None:
    result = report(READY, BROKEN, ready=False, expected=("good",), strict=True)
    assert exit_code(result) == EXIT_NOT_OK and result.to_json()["rule"] == "strict"
    assert verdict(result).startswith("NOT OK: model 'broken' failed: unexpected platform type")


def test_expected_model_not_ready_leads_with_its_reason() -> None:
    result = report(READY, BROKEN, expected=("broken", "good", "absent"))
    assert exit_code(result) == EXIT_NOT_OK
    assert result.missing == ["broken", "absent"]
    assert verdict(result) == ("NOT OK: expected model 'broken' is UNAVAILABLE: unexpected platform type "
                               "'graph_executor' — fix: replace platform: \"graph_executor\" with backend: "
                               "\"npu_ge\" in config.pbtxt (and 1 more expected model(s))")
    assert result.to_json()["expected_not_ready"] == ["broken", "absent"]


def test_an_expected_model_absent_from_the_repository_is_named() -> None:
    assert verdict(report(READY, expected=("absent",))) == (
        "NOT OK: expected model 'absent' is not in the repository")


def test_without_expect_the_servers_readiness_decides() -> None:
    assert exit_code(report(READY)) == EXIT_OK
    not_ready = report(READY, BROKEN, ready=False)
    assert exit_code(not_ready) == EXIT_NOT_OK and not_ready.to_json()["rule"] == "server-ready"
    assert verdict(not_ready).startswith("NOT OK: model 'broken' failed:")


def test_expect_needs_the_server_live() -> None:
    dead = status_report(snapshot(READY, live=False, ready=False), expected=("good",))
    assert exit_code(dead) == EXIT_NOT_OK and verdict(dead) == "NOT OK: Triton answers but is not live"


def test_unreachable_exits_three_and_says_why_first() -> None:
    down = ServerSnapshot("s", "http://h:8000", "http", NOW, error="Triton at http://h:8000 is unreachable")
    result = status_report(down, expected=("good",))
    assert exit_code(result) == EXIT_UNREACHABLE
    assert render_text(result).splitlines()[0] == "NOT OK: Triton at http://h:8000 is unreachable"
    assert json.loads(json.dumps(result.to_json()))["ok"] is False


def test_log_reason_is_shown_for_a_model_the_index_calls_not_loaded(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text('E1203 07:00:00.0 1 a.cc:1] "Poll failed for model directory \'legacy_ge\': '
                   "unexpected platform type 'graph_executor' for legacy_ge\"\n")
    never = ModelEntry("legacy_ge", "", ModelState.NOT_LOADED, "")
    result = report(READY, never, expected=("legacy_ge",), log=LocalLogFile(log))
    assert "expected model 'legacy_ge' is NOT_LOADED: Poll failed" in verdict(result)
    (entry,) = [m for m in result.to_json()["models"] if m["name"] == "legacy_ge"]  # type: ignore[attr-defined]
    assert "unexpected platform type" in entry["failure"]
    assert exit_code(result) == EXIT_NOT_OK


def test_never_loaded_models_without_a_failure_are_counted_as_not_loaded() -> None:
    spare = ModelEntry("spare", "", ModelState.NOT_LOADED, "")
    parked = ModelEntry("parked", "1", ModelState.UNAVAILABLE, "unloaded")
    result = report(READY, spare, parked)
    assert result.found.counts == {"ready": 1, "failed": 0, "loading / unloading": 0, "not loaded": 2}
    assert "NOT LOADED (2): parked, spare" in render_text(result)
    assert isinstance(result, StatusReport)
