from __future__ import annotations

import json
from datetime import datetime, timezone

from geadmin.cli.status import EXIT_NOT_READY, EXIT_OK, EXIT_UNREACHABLE, render_text
from geadmin.diagnose.triage import ServerSnapshot, StatusReport
from geadmin.domain import ModelEntry, ModelState, ServerInfo

NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)
INFO = ServerInfo("triton", "2.51.0", ("model_repository",))


def snapshot(*models: ModelEntry, ready: bool = True, error: str = "") -> ServerSnapshot:
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=True, ready=ready, info=INFO,
                          models=models, error=error)


READY = ModelEntry("good", "1", ModelState.READY, "")
BROKEN = ModelEntry("broken", "1", ModelState.UNAVAILABLE, "unexpected platform type 'graph_executor'")


def test_ready_server_with_expected_models_exits_zero() -> None:
    report = StatusReport(snapshot(READY, BROKEN), ("good",))
    assert report.exit_code() == EXIT_OK


def test_expected_model_not_ready_exits_one_and_is_named() -> None:
    report = StatusReport(snapshot(READY, BROKEN), ("good", "broken", "absent"))
    assert report.exit_code() == EXIT_NOT_READY
    assert report.missing == ["broken", "absent"]
    text = render_text(report)
    assert "broken v1: unexpected platform type 'graph_executor'" in text
    assert "expected but not READY: broken, absent" in text


def test_server_not_ready_exits_one() -> None:
    assert StatusReport(snapshot(READY, ready=False)).exit_code() == EXIT_NOT_READY


def test_unreachable_exits_three() -> None:
    down = ServerSnapshot("s", "http://h:8000", "http", NOW, error="unreachable")
    report = StatusReport(down, ("good",))
    assert report.exit_code() == EXIT_UNREACHABLE
    assert json.loads(json.dumps(report.to_json()))["ok"] is False


def test_not_ready_models_are_ordered_failures_first() -> None:
    loading = ModelEntry("a_loading", "1", ModelState.LOADING, "")
    never = ModelEntry("a_never", "", ModelState.NOT_LOADED, "")
    snap = snapshot(READY, never, loading, BROKEN)
    assert [m.name for m in snap.not_ready] == ["broken", "a_loading", "a_never"]
    assert snap.counts[ModelState.READY] == 1


def test_log_reason_is_shown_for_a_model_the_index_calls_not_loaded() -> None:
    never = ModelEntry("legacy_ge", "", ModelState.NOT_LOADED, "")
    report = StatusReport(snapshot(READY, never), ("legacy_ge",),
                          {"legacy_ge": "unexpected platform type 'graph_executor' for legacy_ge"})
    assert "legacy_ge: unexpected platform type 'graph_executor'" in render_text(report)
    (entry,) = [m for m in report.to_json()["models"] if m["name"] == "legacy_ge"]  # type: ignore[attr-defined]
    assert entry["log_reason"].startswith("unexpected platform type")
    assert report.exit_code() == EXIT_NOT_READY
