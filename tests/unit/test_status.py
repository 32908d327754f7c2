"""`geadmin status` verdicts: which rule applies, exit codes, and a first line that says why."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.status import (
    exit_code,
    render_text,
)
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Level, Verdict
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.server_history import ServerHistory, recent_crash
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord
from geadmin.triton.logs import LocalLogFile

NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)
INFO = ServerInfo("triton", "2.51.0", ("model_repository",))


def snapshot(*models: ModelEntry, ready: bool = True, live: bool = True, error: str = "") -> ServerSnapshot:
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=live, ready=ready, info=INFO,
                          models=models, error=error)


READY = ModelEntry("good", "1", ModelState.READY, "")
BROKEN = ModelEntry("broken", "1", ModelState.UNAVAILABLE, "unexpected platform type 'graph_executor'")


def report(*models: ModelEntry, ready: bool = True, expected: tuple[str, ...] = (),
           log: LocalLogFile | None = None, home: Path | None = None) -> Verdict:
    return assess(snapshot(*models, ready=ready), EvidenceSources(log=log, home=home, now=NOW),
                  expected=expected)


def test_expected_models_ready_but_an_unrelated_model_failed_is_degraded_not_ok() -> None:
    # Triton's strict readiness makes the server "not ready" because of `broken`.
    result = report(READY, BROKEN, ready=False, expected=("good",))
    assert result.level is Level.DEGRADED and exit_code(result) == ExitCode.DEGRADED
    assert result.to_json()["rules"] == ["model-failed"]
    text = render_text(result)
    assert text.splitlines()[0] == ("DEGRADED: model 'broken' failed: unexpected platform type "
                                    "'graph_executor' — fix: replace platform: \"graph_executor\" with "
                                    "backend: \"npu_ge\" in config.pbtxt")
    assert "broken v1 (UNAVAILABLE): unexpected platform type 'graph_executor'" in text


def test_strict_turns_degraded_into_down() -> None:
    result = report(READY, BROKEN, ready=False, expected=("good",))
    assert exit_code(result, strict=True) == ExitCode.FAILED


def test_a_failed_model_is_degraded_even_when_triton_says_ready() -> None:
    # Explicit model-control mode: a failed load does not make Triton "not ready".
    result = report(READY, BROKEN, ready=True)
    assert exit_code(result) == ExitCode.DEGRADED
    assert result.headline.startswith("DEGRADED: model 'broken' failed: unexpected platform type")


def test_expected_model_not_ready_is_down_and_leads_with_its_reason() -> None:
    result = report(READY, BROKEN, expected=("broken", "good", "absent"))
    assert exit_code(result) == ExitCode.FAILED and result.level is Level.DOWN
    assert result.missing == ["broken", "absent"]
    assert result.headline == ("DOWN: expected model 'broken' is UNAVAILABLE: unexpected platform type "
                               "'graph_executor' — fix: replace platform: \"graph_executor\" with backend: "
                               "\"npu_ge\" in config.pbtxt (and 1 more)")
    assert result.to_json()["expected_not_ready"] == ["broken", "absent"]


def test_an_expected_model_absent_from_the_repository_is_named() -> None:
    assert report(READY, expected=("absent",)).headline == (
        "DOWN: expected model 'absent' is not in the repository")


def test_ok_only_when_nothing_is_wrong(tmp_path: Path) -> None:
    # a probe answered 10 s ago (else the headline says whether they answer was not checked)
    watch.record_probes([ProbeRecord("http://h:8000", "good", NOW.timestamp() - 10, True, 2.0)],
                        home=tmp_path)
    result = report(READY, home=tmp_path)
    assert exit_code(result) == ExitCode.OK
    assert result.headline == ("OK: Triton serves; 1 model(s) READY, none failed, drift not checked (the "
                               "model repository is not known here)")


def test_not_ready_with_nothing_to_explain_it_is_degraded() -> None:
    result = report(READY, ready=False)
    assert exit_code(result) == ExitCode.DEGRADED and result.rules[0].value == "server-not-ready"


def test_not_live_is_down() -> None:
    dead = assess(snapshot(READY, live=False, ready=False), expected=("good",))
    assert exit_code(dead) == ExitCode.FAILED and dead.headline == "DOWN: Triton answers but is not live"


def test_unreachable_exits_three_and_says_why_first() -> None:
    down = ServerSnapshot("s", "http://h:8000", "http", NOW, error="Triton at http://h:8000 is unreachable")
    result = assess(down, expected=("good",))
    assert exit_code(result) == ExitCode.UNREACHABLE
    assert render_text(result).splitlines()[0] == "DOWN: Triton at http://h:8000 is unreachable"
    first, call = render_text(result, outage="Triton was stopped by alice (dashboard)").splitlines()[:2]
    assert first == "DOWN: Triton was stopped by alice (dashboard)"  # the cause leads, as on the Overview
    assert call == "  Triton at http://h:8000 is unreachable"
    assert json.loads(json.dumps(result.to_json()))["verdict"] == "DOWN"


def test_log_reason_is_shown_for_a_model_the_index_calls_not_loaded(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text('E1203 07:00:00.0 1 a.cc:1] "Poll failed for model directory \'legacy_ge\': '
                   "unexpected platform type 'graph_executor' for legacy_ge\"\n")
    never = ModelEntry("legacy_ge", "", ModelState.NOT_LOADED, "")
    result = report(READY, never, expected=("legacy_ge",), log=LocalLogFile(log))
    assert "expected model 'legacy_ge' is NOT_LOADED: Poll failed" in result.headline
    (entry,) = [m for m in result.to_json()["models"] if m["name"] == "legacy_ge"]  # type: ignore[attr-defined]
    assert "unexpected platform type" in entry["failure"]
    assert exit_code(result) == ExitCode.FAILED


def test_never_loaded_and_operator_unloaded_models_are_not_failures(tmp_path: Path) -> None:
    from geadmin import audit

    audit.record("unload", "parked", audit.Result.OK, server="http://h:8000", home=tmp_path)
    spare = ModelEntry("spare", "", ModelState.NOT_LOADED, "")
    parked = ModelEntry("parked", "1", ModelState.UNAVAILABLE, "unloaded")
    result = report(READY, spare, parked, home=tmp_path)
    assert result.found.counts == {"ready": 1, "failed": 0, "loading / unloading": 0, "not loaded": 2}
    text = render_text(result)
    shown = r"NOT LOADED \(2\): parked \(unloaded by \S+ at [-\d]+ [:\d]+ UTC\), spare$"
    assert re.search(shown, text, re.M), text
    assert exit_code(result) == ExitCode.OK


def crash_history(ago_s: float, *, requested: bool = False, down: str = "") -> ServerHistory:
    exit_ = ExitRecord(at=NOW.timestamp() - ago_s, exit_code=None, signal="SIGKILL", uptime_s=2100,
                       restarted=True, requested=requested)
    return ServerHistory("running", (exit_,), (), 1, 0, ago_s - 5, down)


def test_a_crash_in_the_last_hour_is_said_under_the_verdict_even_when_triton_serves_again() -> None:
    now_s = NOW.timestamp()
    crash = recent_crash(crash_history(600), now_s=now_s)
    assert crash.startswith("Triton crashed and was restarted: ")
    assert "killed by SIGKILL after 35 min" in crash
    assert "restarts since `geadmin up`: 1" in crash
    lines = render_text(report(READY), crash=crash).splitlines()
    assert lines[0].startswith("OK") and lines[1] == f"CRASHED: {crash}"  # right under the verdict
    degraded = render_text(report(READY, BROKEN), crash=crash).splitlines()
    assert degraded[1] == f"CRASHED: {crash}" and degraded[2] == "  fix: fix the cause, then load it again"
    assert recent_crash(crash_history(3700), now_s=now_s) == ""  # over an hour ago: the history has it
    assert recent_crash(crash_history(600, requested=True), now_s=now_s) == ""  # a restart asked for
    assert recent_crash(crash_history(600, down="restarting"), now_s=now_s) == ""  # the outage line says it
    assert recent_crash(None) == ""  # not the stack's server
