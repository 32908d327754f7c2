"""One verdict (diagnose.verdict): the rules that make a server OK, DEGRADED or DOWN, what a
dropped or stuck model looks like, the embedded stack's history (stack.server_history), and
the one duration formatter."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.diagnose.drift import Drift
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot, Triage, triage
from geadmin.diagnose.stuck import logged_at
from geadmin.diagnose.unloads import with_dropped
from geadmin.diagnose.verdict import DROPPED_MARK, Level, VerdictRule, judge
from geadmin.domain import ModelEntry, ModelState, Ports, ServerInfo, format_duration
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.server_history import attempt, exit_line, history_for, server_history
from geadmin.stack.supervisor import START_FAILED
from geadmin.stack.workspace import StackInfo
from geadmin.triton.logs import LocalLogFile

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
INFO = ServerInfo("triton", "2.51.0", ())
READY = ModelEntry("digits_classifier", "1", ModelState.READY, "")
PIPELINE_UNLOADED = ModelEntry("digits_pipeline", "1", ModelState.UNAVAILABLE, "unloaded")
ENSEMBLE_LINE = ("E1204 11:57:03.123456 77 model_lifecycle.cc:654] \"Invalid argument: ensemble "
                 "digits_pipeline allows maximum batch size 32, but it contains model digits_classifier "
                 "which only allows maximum batch size to be 16\"\n")
UNLOADED_LINE = ("I1204 11:57:03.200000 77 model_lifecycle.cc:624] \"successfully unloaded 'digits_pipeline' "
                 "version 1\"\n")


def snapshot(*models: ModelEntry, ready: bool = True, live: bool = True) -> ServerSnapshot:
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=live, ready=ready, info=INFO, models=models)


def test_a_failed_load_is_degraded_although_triton_says_ready() -> None:
    failed = ModelEntry("digits_classifier", "1", ModelState.UNAVAILABLE, "bad enum TYPE_FOO")
    verdict = judge(snapshot(failed, ready=True), triage(snapshot(failed)))
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.MODEL_FAILED]
    assert verdict.headline == "DEGRADED: model 'digits_classifier' failed: bad enum TYPE_FOO"
    assert not verdict.ok


def test_everything_ready_is_ok_and_says_what_was_checked() -> None:
    verdict = judge(snapshot(READY), triage(snapshot(READY)))
    assert verdict.level is Level.OK and verdict.reasons == ()
    assert verdict.headline.startswith("OK: Triton serves; 1 model(s) READY, none failed")


def test_down_outranks_degraded_and_every_reason_is_kept() -> None:
    failed = ModelEntry("other", "1", ModelState.UNAVAILABLE, "boom")
    snap = snapshot(READY, failed)
    verdict = judge(snap, triage(snap), expected=("absent",))
    assert verdict.level is Level.DOWN
    assert verdict.rules == [VerdictRule.EXPECTED_NOT_READY, VerdictRule.MODEL_FAILED]
    assert verdict.headline == "DOWN: expected model 'absent' is not in the repository (and 1 more)"
    assert [r["level"] for r in verdict.to_json()["reasons"]] == ["DOWN", "DEGRADED"]  # type: ignore[index]


def test_unreachable_and_not_live_are_down() -> None:
    gone = ServerSnapshot("s", "http://h:8000", "http", NOW, error="Triton at http://h:8000 is unreachable")
    assert judge(gone, triage(gone)).rules == [VerdictRule.UNREACHABLE]
    dead = snapshot(READY, live=False, ready=False)
    assert judge(dead, triage(dead)).level is Level.DOWN


def test_drift_alone_makes_it_degraded_with_the_fix() -> None:
    drift = Drift("digits_classifier", (), "does not parse, line 6: bad enum", False,
                  datetime(2026, 12, 4, 11, 57, tzinfo=timezone.utc))
    verdict = judge(snapshot(READY), triage(snapshot(READY)), drift=[drift])
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.DRIFT]
    assert ("on disk: does not parse, line 6: bad enum — serving the previous config since 11:57 UTC"
            in verdict.headline)
    assert "open it in the Config editor" in verdict.reasons[0].fix


def test_a_model_dropped_without_an_operators_unload_is_a_failure_with_tritons_reason(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text(ENSEMBLE_LINE + UNLOADED_LINE)
    snap = snapshot(READY, PIPELINE_UNLOADED)
    verdict = assess(snap, EvidenceSources(log=LocalLogFile(log), home=tmp_path, now=NOW))
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.MODEL_DROPPED]
    ((model, reason),) = verdict.found.failed
    assert model.name == "digits_pipeline" and model.reason == DROPPED_MARK
    assert "allows maximum batch size 32, but it contains model digits_classifier" in reason
    assert not verdict.found.idle  # not "Not loaded"


def test_without_a_log_line_the_dropped_reason_names_the_last_change(tmp_path: Path) -> None:
    audit.record("load", "digits_pipeline", audit.Result.OK, home=tmp_path)
    audit.record("apply", "digits_classifier", audit.Result.OK, actor=audit.Actor("alice"), home=tmp_path)
    snap = snapshot(READY, PIPELINE_UNLOADED)
    verdict = assess(snap, EvidenceSources(home=tmp_path, now=NOW))
    (reason,) = verdict.reasons
    assert reason.rule is VerdictRule.MODEL_DROPPED
    assert "no operator's unload of it is in geadmin's audit log" in reason.text
    assert "apply of 'digits_classifier' by alice" in reason.text


def test_an_operators_unload_is_idle_until_a_later_side_effect(tmp_path: Path) -> None:
    audit.record("unload", "digits_pipeline", audit.Result.OK, home=tmp_path)
    snap = snapshot(READY, PIPELINE_UNLOADED)
    verdict = assess(snap, EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.ok and [m.name for m in verdict.found.idle] == ["digits_pipeline"]

    audit.record("load", "digits_pipeline", audit.Result.OK, home=tmp_path)
    audit.record("side_effect", "digits_pipeline", audit.Result.OK, home=tmp_path)
    assert assess(snap, EvidenceSources(home=tmp_path, now=NOW)).rules == [VerdictRule.MODEL_DROPPED]


def test_a_model_loading_for_longer_than_the_limit_is_stuck(tmp_path: Path) -> None:
    loading = ModelEntry("slow", "1", ModelState.LOADING, "")
    log = tmp_path / "t.log"
    started = NOW - timedelta(minutes=10)
    log.write_text(f"I{started:%m%d %H:%M:%S}.000000 77 model_lifecycle.cc:1] \"loading: slow:1\"\n")
    verdict = assess(snapshot(READY, loading), EvidenceSources(log=LocalLogFile(log), home=tmp_path, now=NOW))
    assert verdict.rules == [VerdictRule.MODEL_STUCK] and verdict.stuck == ("slow",)
    assert verdict.headline == "DEGRADED: model 'slow' has been LOADING for 10 min"
    assert verdict.reasons[0].fix == "read Triton's log; a hung load is freed only by restarting Triton"
    # A load that began a few seconds ago is only moving.
    fresh = assess(snapshot(READY, loading), EvidenceSources(log=LocalLogFile(log), home=tmp_path,
                                                     now=started + timedelta(seconds=5)))
    assert fresh.ok


def test_a_model_unloading_for_longer_than_the_limit_names_the_request_that_holds_it(tmp_path: Path) -> None:
    """Triton unloads a model once the requests it runs end: a hung execute holds the unload."""
    unloading = ModelEntry("hung", "1", ModelState.UNLOADING, "")
    log = tmp_path / "t.log"
    log.write_text(f"I{NOW - timedelta(minutes=7):%m%d %H:%M:%S}.000000 77 model_lifecycle.cc:1] "
                   "\"unloading: hung:1\"\n")
    sources = EvidenceSources(log=LocalLogFile(log), home=tmp_path, now=NOW)
    verdict = assess(snapshot(READY, unloading), sources)
    assert verdict.headline == "DEGRADED: model 'hung' has been UNLOADING for 7 min"
    assert verdict.reasons[0].fix.startswith("Triton unloads a model only once the requests it runs end: one "
                                             "hung in its execute holds the unload until Triton restarts")


def test_log_times_are_read_in_both_triton_formats() -> None:
    at = datetime(2026, 12, 4, 11, 57, 3, tzinfo=timezone.utc)
    assert logged_at("I1204 11:57:03.123 1 a.cc:1] x", NOW) == at
    assert logged_at("2026-12-04T11:57:03Z I 1 a.cc:1] x", NOW) == datetime(2026, 12, 4, 11, 57, 3,
                                                                          tzinfo=timezone.utc)
    new_year = datetime(2027, 1, 1, 0, 5, tzinfo=timezone.utc)
    assert logged_at("I1231 23:59:00.0 1 a.cc:1] x", new_year).year == 2026  # no year in the line
    assert logged_at("stub output", NOW) is None


def test_not_ready_with_nothing_to_explain_it_is_degraded() -> None:
    verdict = judge(snapshot(READY, ready=False), triage(snapshot(READY)))
    assert verdict.rules == [VerdictRule.SERVER_NOT_READY]


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (0.4, "0.4 s"), (12, "12 s"), (59.6, "1 min"), (125, "2 min 5 s"), (2154, "35 min"),
    (3600, "1 h"), (7500, "2 h 5 min"), (3 * 86400 + 4 * 3600, "3 d 4 h"), (-5, "-5 s")])
def test_durations_read_like_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


# -- the embedded stack's history ---------------------------------------------------------------
def info(home: Path, state: str, exits: tuple[ExitRecord, ...], pid: int | None = None,
         dashboard_exits: tuple[ExitRecord, ...] = ()) -> StackInfo:
    return StackInfo(os.getpid(), "http://127.0.0.1:18000", "grpc://127.0.0.1:18001",
                     "http://127.0.0.1:18002/metrics", Ports(18000, 18001, 18002), "http://127.0.0.1:18501",
                     home / "t.log", home / "repo", home, triton_pid=pid, triton_state=state,
                     triton_started_at=time.time() - 2100 if pid else None, exits=exits,
                     dashboard_exits=dashboard_exits)


def crash(at: float, uptime_s: float) -> ExitRecord:
    return ExitRecord(at, None, "SIGKILL", uptime_s, True)


def test_a_crash_and_the_restart_count_are_in_the_history(tmp_path: Path) -> None:
    killed = crash(time.time() - 2100, 2154.0)
    history = server_history(info(tmp_path, "running", (killed,), pid=1234,
                                  dashboard_exits=(ExitRecord(time.time() - 50, 1, None, 12.0, True),)))
    assert history.crashed and history.down == "" and history.triton_restarts == 1
    assert history.dashboard_restarts == 1
    assert exit_line(killed).endswith(": killed by SIGKILL after 35 min — restarted")
    assert format_duration(history.triton_up_s or 0) == "35 min"
    assert history_for("http://127.0.0.1:18000", info(tmp_path, "running", (), pid=1)) is not None
    assert history_for("http://other:8000", info(tmp_path, "running", (), pid=1)) is None


def test_while_restarting_the_attempt_is_counted_from_the_last_healthy_run(tmp_path: Path) -> None:
    exits = (crash(100.0, 3600.0), crash(200.0, 1.0), crash(300.0, 0.5))
    assert attempt(exits) == 3
    history = server_history(info(tmp_path, "restarting", exits))
    assert history.down.startswith("Triton is restarting (attempt 3): it exited at ")
    assert "killed by SIGKILL after 0.5 s" in history.down and "Stack page" in history.down


def test_a_restart_that_cannot_start_names_the_cause_not_an_exit_code(tmp_path: Path) -> None:
    """The repository moved away, then Triton crashed: each start fails at once. It said "exit
    code None after 0 s. `geadmin up` starts it again by itself"."""
    failed = ExitRecord(400.0, None, None, 0.0, True,
                        f"{START_FAILED}: model repository /srv/repo does not exist")
    history = server_history(info(tmp_path, "restarting", (crash(300.0, 50.0), failed)))
    assert history.down.startswith("Triton does not start again (attempt 2, last at "), history.down
    assert "): model repository /srv/repo does not exist — fix that; `geadmin up` keeps trying" \
        in history.down
    assert failed.how == "did not start" and "exit code None" not in failed.describe()


@pytest.mark.parametrize(("state", "said"), [("stopping", "stopping"),
                                            ("restarting on request", "restarting")])
def test_while_a_requested_stop_or_restart_waits_for_triton_it_is_never_called_hung(
        tmp_path: Path, state: str, said: str) -> None:
    history = server_history(info(tmp_path, state, (), pid=os.getpid()))
    assert history.down.startswith(f"Triton is {said} on request (a stop or restart asked of `geadmin up`")
    assert history.silent == ""


def test_a_deliberate_stop_names_who_stopped_it_when_and_from_where(tmp_path: Path) -> None:
    audit.record("stop", "triton", audit.Result.OK, actor=audit.Actor("alice", audit.Origin.DASHBOARD),
                 server="stack:local", message="asked the local stack to stop triton", home=tmp_path)
    stopped = ExitRecord(time.time(), 1, None, 60.0, False, "stopped from the Stack page", requested=True)
    history = server_history(info(tmp_path, "stopped", (stopped,)))
    assert history.down.startswith("Triton was stopped by alice (dashboard) at ")
    assert history.down.endswith("from the Stack page; it stays down until someone starts it (`geadmin stack "
                                 "start triton`, or the Stack page).")
    assert not history.crashed
    assert exit_line(stopped).endswith("(stopped from the Stack page) — stopped on request")


def test_no_restart_says_so(tmp_path: Path) -> None:
    history = server_history(info(tmp_path, "exited", (ExitRecord(time.time(), 134, None, 3.0, False),)))
    assert "is not restarted (`geadmin up --no-restart`)" in history.down
    assert "exit code 134 after 3 s" in history.down


def test_a_failed_model_an_operator_unloaded_is_idle_and_tritons_held_readiness_is_a_note_not_a_page(
    tmp_path: Path
) -> None:
    audit.record("load", "broken_init", audit.Result.FAILED, home=tmp_path)
    audit.record("unload", "broken_init", audit.Result.OK, home=tmp_path)
    failed = ModelEntry("broken_init", "1", ModelState.UNAVAILABLE, "RuntimeError: weights.bin is missing")
    verdict = assess(snapshot(READY, failed, ready=False), EvidenceSources(home=tmp_path, now=NOW))
    assert [m.name for m in verdict.found.idle] == ["broken_init"] and not verdict.found.failed
    assert verdict.ok and verdict.rules == []
    assert verdict.unloaded["broken_init"].startswith("unloaded by ")
    assert "note: Triton's /v2/health/ready still says not ready because its strict readiness counts " \
           "broken_init, unloaded by an operator after a failed load" in verdict.headline
    assert verdict.to_json()["notes"] == list(verdict.notes)


def test_a_not_ready_server_that_no_operator_unload_explains_still_degrades() -> None:
    verdict = judge(snapshot(READY, ready=False), triage(snapshot(READY)))
    assert verdict.rules == [VerdictRule.SERVER_NOT_READY] and not verdict.notes


def test_a_config_that_never_parsed_then_unloaded_by_an_operator_is_not_a_failure(tmp_path: Path) -> None:
    """Triton lists a model whose config does not parse with no state (NOT_LOADED); the log's
    failure made it FAILED. The operator's unload after it is a choice: idle, with who and when."""
    audit.record("load", "broken_parse", audit.Result.FAILED, home=tmp_path)
    audit.record("unload", "broken_parse", audit.Result.OK, actor=audit.Actor("alice", audit.Origin.CLI),
                 home=tmp_path)
    entry = ModelEntry("broken_parse", "", ModelState.NOT_LOADED, "")
    found = Triage([], [(entry, "config.pbtxt does not parse")], [], [])
    kept, unloads = with_dropped(found, None, tmp_path)
    assert not kept.failed and [m.name for m in kept.idle] == ["broken_parse"]
    assert unloads.by_operator["broken_parse"].startswith("unloaded by alice at ")


def test_a_model_whose_last_load_failed_stays_a_failure_after_triton_restarts_without_it(
        tmp_path: Path) -> None:
    """After a restart Triton lists such a model with no state, like one never loaded: the audit
    log's latest row (a load that hung, READY lost with a member's change) keeps it failed until
    an operator loads it or unloads it (geadmin up restarted Triton without a hung load: OK)."""
    audit.record("load", "hang_model", audit.Result.FAILED, message="load of 'hang_model' hung",
                 home=tmp_path)
    audit.record("side_effect", "digits_pipeline", audit.Result.FAILED,
                 message="digits_pipeline lost READY (after the load of 'digits_classifier')", home=tmp_path)
    audit.record("load", "never_failed", audit.Result.OK, home=tmp_path)
    untouched = [ModelEntry(name, "", ModelState.NOT_LOADED, "")
                 for name in ("hang_model", "digits_pipeline", "never_failed", "never_audited")]
    verdict = assess(snapshot(READY, *untouched), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.DEGRADED
    assert [(r.rule, r.model) for r in verdict.reasons] == [(VerdictRule.MODEL_FAILED, "digits_pipeline"),
                                                            (VerdictRule.MODEL_FAILED, "hang_model"),
                                                            (VerdictRule.MODEL_DROPPED, "never_failed")]
    dropped, hung, restarted = (r.text for r in verdict.reasons)
    assert hung.startswith("model 'hang_model' failed: its last load failed at ") and \
        "(load of 'hang_model' hung), and Triton has not loaded it since it restarted" in hung, hung
    assert dropped.startswith("model 'digits_pipeline' failed: lost READY at "), dropped
    # loaded and never unloaded since, yet unknown to Triton: it restarted without it (it read OK)
    assert restarted.startswith("model 'never_failed' lost READY: it served (its load by ") and \
        "Triton restarted without loading it again" in restarted, restarted
    for name in ("hang_model", "digits_pipeline", "never_failed"):
        audit.record("unload", name, audit.Result.OK, actor=audit.Actor("alice"), home=tmp_path)
    assert assess(snapshot(READY, *untouched), EvidenceSources(home=tmp_path, now=NOW)).level is Level.OK


def test_another_servers_rows_never_make_a_model_here_failed_or_dropped(tmp_path: Path) -> None:
    """A workspace that manages two servers: a model loaded (or failed) on one says nothing of
    the other, where nobody loaded it."""
    elsewhere = "http://10.0.0.9:8000"
    audit.record("load", "on_a", audit.Result.OK, server=elsewhere, home=tmp_path)
    audit.record("load", "failed_on_a", audit.Result.FAILED, server=elsewhere, home=tmp_path)
    untouched = [ModelEntry(name, "", ModelState.NOT_LOADED, "") for name in ("on_a", "failed_on_a")]
    assert assess(snapshot(READY, *untouched), EvidenceSources(home=tmp_path, now=NOW)).level is Level.OK
    audit.record("load", "on_a", audit.Result.OK, server="http://h:8000", home=tmp_path)  # this server's
    assert assess(snapshot(READY, *untouched), EvidenceSources(home=tmp_path, now=NOW)).rules == [
        VerdictRule.MODEL_DROPPED]


def test_models_queued_behind_a_load_round_are_not_judged_until_it_ends(tmp_path: Path) -> None:
    """`geadmin up` loads four at a time; the rest are listed as never loaded meanwhile, their
    latest row the last run's good load: DEGRADED for minutes after every normal start."""
    for name in ("queued", "loading"):
        audit.record("load", name, audit.Result.OK, home=tmp_path)
    queued = ModelEntry("queued", "", ModelState.NOT_LOADED, "")
    loading = ModelEntry("loading", "1", ModelState.LOADING, "")
    assert VerdictRule.MODEL_DROPPED not in assess(snapshot(READY, queued, loading),
                                                   EvidenceSources(home=tmp_path, now=NOW)).rules
    assert assess(snapshot(READY, queued), EvidenceSources(home=tmp_path, now=NOW)).rules == [
        VerdictRule.MODEL_DROPPED]  # the round is over, and it was not loaded again


def test_not_ready_while_models_load_again_says_wait_never_restart() -> None:
    """After an automatic restart geadmin up loads every model again: Triton is not ready until the
    loads end, and the fix an on-call operator reads must be to wait, not to restart it again."""
    loading = ModelEntry("text_normalize", "1", ModelState.LOADING, "")
    verdict = judge(snapshot(READY, loading, ready=False), triage(snapshot(READY, loading)))
    [reason] = verdict.reasons
    assert reason.rule is VerdictRule.SERVER_NOT_READY and "text_normalize is LOADING" in reason.text
    assert reason.fix.startswith("wait:") and "restart" not in reason.fix


def test_an_unreadable_workspace_database_is_said_once_with_what_the_verdict_could_not_judge(
        tmp_path: Path) -> None:
    (tmp_path / "geadmin.db").write_bytes(b"\x8f" * 5000)  # garbage, as a disk fault leaves it
    verdict = assess(snapshot(READY), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.OK  # serving is judged from Triton; the note says what is not
    blind = [note for note in verdict.notes if "workspace database" in note]
    assert len(blind) == 1 and "not a SQLite database" in blind[0]
    assert blind[0].startswith("interrupted changes, operators' unloads")
    assert "probes and NPU faults are not judged" in blind[0]
    assert "note: interrupted changes" in verdict.headline


def test_without_the_audit_log_a_failed_load_triton_reports_is_still_degraded(tmp_path: Path) -> None:
    (tmp_path / "geadmin.db").write_bytes(b"\x8f" * 5000)  # garbage: no audit log to ask
    failed = ModelEntry("llama", "1", ModelState.UNAVAILABLE,
                        "failed to load 'llama' version 1: Internal: out of memory")
    verdict = assess(snapshot(READY, failed), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.MODEL_FAILED]
    assert verdict.headline.startswith("DEGRADED: model 'llama' failed: failed to load 'llama' version 1")
    assert verdict.unloaded == {}  # an unreadable log names no operator's unload


def test_without_the_audit_log_an_unloaded_model_is_named_in_a_note_not_called_dropped(
        tmp_path: Path) -> None:
    (tmp_path / "geadmin.db").write_bytes(b"\x8f" * 5000)
    verdict = assess(snapshot(READY, PIPELINE_UNLOADED), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.OK and [m.name for m in verdict.found.idle] == ["digits_pipeline"]
    assert verdict.notes[0].startswith("cannot tell whether an operator unloaded 'digits_pipeline' or Triton "
                                       "dropped it behind geadmin's back (model-dropped)")
    assert "note: cannot tell whether an operator unloaded 'digits_pipeline'" in verdict.headline
    assert verdict.to_json()["models"][1]["unloaded_by_operator"] == ""  # type: ignore[index]


def test_a_readable_workspace_database_adds_no_note(tmp_path: Path) -> None:
    verdict = assess(snapshot(READY), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.OK and verdict.notes == ()


@pytest.mark.parametrize(("error", "fix"), [
    ("list the model repository: failed to open directory /srv/models", "put back the model repository"),
    ("list the model repository: http://h:8000 sent an answer too large to read (…) — not a Triton", ""),
    ("list the model repository: Triton at http://h:8000 did not answer in time", ""),
])
def test_only_a_repository_gone_is_told_to_put_it_back(error: str, fix: str) -> None:
    broken = ServerSnapshot("s", "http://h:8000", "http", NOW, live=True, ready=True, info=INFO, error=error)
    verdict = judge(broken, triage(broken))
    (reason,) = verdict.reasons
    assert reason.rule is VerdictRule.INDEX_UNREADABLE and reason.fix.startswith(fix)
    assert bool(reason.fix) == bool(fix)
