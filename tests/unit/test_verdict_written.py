"""Which audit rows decide "an operator unloaded it" (diagnose.unloads): a change that only wrote
a file (an apply or rollback of a model that is not loaded, a create) or was refused changed
nothing that serves, so it never turns an operator's unload into a drop; an apply that loaded
still does, and one whose load failed is still a failure. The rows are written with the
results the apply itself records (apply_result.AUDIT_RESULTS)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Level, Verdict, VerdictRule
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.ops.models.apply_result import AUDIT_RESULTS, ApplyOutcome
from geadmin.ops.models.reconcile import STARTED_ROW

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
SERVER = "http://h:8000"
READY = ModelEntry("digits_classifier", "1", ModelState.READY, "")
PARKED = ModelEntry("text_normalize", "1", ModelState.UNAVAILABLE, "unloaded")
ALICE = audit.Actor("alice", audit.Origin.CLI)


def verdict(home: Path, *models: ModelEntry) -> Verdict:
    snap = ServerSnapshot("s", SERVER, "http", NOW, live=True, ready=True,
                          info=ServerInfo("triton", "2.51.0", ()), models=(READY, *models))
    return assess(snap, EvidenceSources(home=home, now=NOW))


def apply_row(home: Path, outcome: ApplyOutcome, action: str = "apply",
              model: str = "text_normalize") -> None:
    """The rows an apply writes: `started` before the file, then its outcome."""
    bob = audit.Actor("bob", audit.Origin.CLI)
    audit.record(action, model, audit.Result.STARTED, actor=bob, server=SERVER, message=f"{action}: started",
                 home=home)
    audit.record(action, model, AUDIT_RESULTS[outcome], actor=bob, server=SERVER,
                 message=f"{action}: {outcome.value}", home=home)


def unloaded_by_alice(home: Path) -> None:
    audit.record("unload", "text_normalize", audit.Result.OK, actor=ALICE, server=SERVER, home=home)


def test_a_config_written_to_a_model_an_operator_unloaded_leaves_it_unloaded_not_dropped(
        tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    apply_row(tmp_path, ApplyOutcome.WRITTEN)  # `geadmin config apply X FILE` without --load
    found = verdict(tmp_path, PARKED)
    assert found.level is Level.OK, found.headline
    assert [m.name for m in found.found.idle] == ["text_normalize"]
    assert found.unloaded["text_normalize"].startswith("unloaded by alice at ")
    apply_row(tmp_path, ApplyOutcome.WRITTEN, action="rollback")  # a rollback of it, written only too
    assert verdict(tmp_path, PARKED).level is Level.OK


def test_a_written_apply_is_audited_as_written_not_as_an_applied_change() -> None:
    assert AUDIT_RESULTS[ApplyOutcome.WRITTEN] is audit.Result.WRITTEN
    assert AUDIT_RESULTS[ApplyOutcome.APPLIED] is audit.Result.OK


def test_a_create_or_a_refused_change_after_an_operators_unload_changes_nothing_that_serves(
        tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    audit.record("create", "text_normalize", audit.Result.OK, server=SERVER, home=tmp_path)  # --no-load
    audit.record("load", "text_normalize", audit.Result.REFUSED, server=SERVER, message="not allowed: viewer",
                 home=tmp_path)
    audit.record("apply", "text_normalize", audit.Result.REFUSED, server=SERVER, message="does not parse",
                 home=tmp_path)
    found = verdict(tmp_path, PARKED)
    assert found.level is Level.OK and found.unloaded["text_normalize"].startswith("unloaded by alice")


def test_an_apply_that_loaded_after_the_unload_and_was_then_dropped_is_dropped(tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    apply_row(tmp_path, ApplyOutcome.APPLIED)  # `config apply X FILE --load`: it served again
    found = verdict(tmp_path, PARKED)  # ... and Triton unloaded it behind geadmin's back
    assert found.rules == [VerdictRule.MODEL_DROPPED] and found.unloaded == {}


def test_an_apply_whose_load_failed_after_the_unload_is_still_a_failure(tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    apply_row(tmp_path, ApplyOutcome.ROLLED_BACK)  # --load, Triton refused it, the file put back
    failed = ModelEntry("text_normalize", "1", ModelState.UNAVAILABLE,
                        "failed to load 'text_normalize' version 1: KIND_GPU but no GPUs")
    found = verdict(tmp_path, failed)
    assert found.rules == [VerdictRule.MODEL_FAILED] and "no GPUs" in found.headline


def test_a_refused_load_after_a_failed_one_leaves_the_failure_standing_across_a_restart(
        tmp_path: Path) -> None:
    audit.record("load", "text_normalize", audit.Result.FAILED, server=SERVER, message="load hung",
                 home=tmp_path)
    audit.record("load", "text_normalize", audit.Result.REFUSED, server=SERVER, message="not allowed: viewer",
                 home=tmp_path)
    untouched = ModelEntry("text_normalize", "", ModelState.NOT_LOADED, "")  # Triton restarted without it
    assert verdict(tmp_path, untouched).rules == [VerdictRule.MODEL_FAILED]


def test_an_apply_started_with_no_outcome_yet_may_be_loading_so_the_unload_no_longer_stands(
        tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    audit.record("apply", "text_normalize", audit.Result.STARTED, server=SERVER, home=tmp_path)
    audit.record("apply", "text_normalize", audit.Result.REFUSED, server=SERVER, message="locked",
                 home=tmp_path)  # another process refused while it runs: not its outcome
    assert verdict(tmp_path, PARKED).rules == [VerdictRule.MODEL_DROPPED]


def test_a_drop_never_names_a_write_that_loaded_nothing_as_the_change_before_it(tmp_path: Path) -> None:
    audit.record("load", "digits_pipeline", audit.Result.OK, server=SERVER, home=tmp_path)
    audit.record("apply", "digits_classifier", audit.Result.OK, actor=ALICE, server=SERVER, home=tmp_path)
    apply_row(tmp_path, ApplyOutcome.WRITTEN, model="text_normalize")
    dropped = ModelEntry("digits_pipeline", "1", ModelState.UNAVAILABLE, "unloaded")
    (reason,) = verdict(tmp_path, dropped).reasons
    assert reason.rule is VerdictRule.MODEL_DROPPED
    assert "apply of 'digits_classifier' by alice" in reason.text, reason.text


def test_a_fleet_rollouts_journal_rows_after_an_operators_unload_change_nothing_that_serves(
        tmp_path: Path) -> None:
    """A rollout's journal (started, steps, its `ok` end) names the fleet and the members; the
    server's own rows say what changed on it."""
    unloaded_by_alice(tmp_path)
    for result, server in ((audit.Result.STARTED, "lab"), (audit.Result.STEP, SERVER),
                           (audit.Result.STEP, "a"), (audit.Result.OK, "lab")):
        audit.record("fleet apply", "text_normalize", result, actor=ALICE, server=server,
                     message="ROLLOUT DONE\njournal: 1", home=tmp_path)
    found = verdict(tmp_path, PARKED)
    assert found.level is Level.OK, found.headline
    assert found.unloaded["text_normalize"].startswith("unloaded by alice")


def test_another_servers_load_after_an_operators_unload_here_leaves_it_unloaded_here(tmp_path: Path) -> None:
    unloaded_by_alice(tmp_path)
    audit.record("load", "text_normalize", audit.Result.OK, server="http://other:8000", home=tmp_path)
    apply_row(tmp_path, ApplyOutcome.APPLIED)  # ... and an apply that loaded it here counts
    assert verdict(tmp_path, PARKED).rules == [VerdictRule.MODEL_DROPPED]
    unloaded_by_alice(tmp_path)
    audit.record("apply", "text_normalize", audit.Result.OK, server="http://other:8000", home=tmp_path)
    found = verdict(tmp_path, PARKED)
    assert found.level is Level.OK and found.unloaded["text_normalize"].startswith("unloaded by alice")


def test_an_apply_refused_after_its_start_closes_that_start(tmp_path: Path) -> None:
    """Permission denied on the repository, a conflict at write: the refusal names its start."""
    unloaded_by_alice(tmp_path)
    start = audit.record("apply", "text_normalize", audit.Result.STARTED, server=SERVER, home=tmp_path)
    audit.record("apply", "text_normalize", audit.Result.REFUSED, server=SERVER,
                 message=f"permission denied\n{STARTED_ROW}: {start.id}", home=tmp_path)
    found = verdict(tmp_path, PARKED)
    assert found.level is Level.OK, found.headline
    assert found.unloaded["text_normalize"].startswith("unloaded by alice")


