"""The one plan of a config change (geadmin.ops.models.change_plan) that `geadmin config apply|rollback`
and the Config editor both ask with: the new file, the validator's findings, the rollback
target, the impact, the question, and a declined change audited as refused. Against a model
repository on disk and a server that does not answer (the impact then says so); the impact
against a real Triton is tests/integration/test_consequences.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.diagnose.impact import Consequence, Effect, Impact
from geadmin.errors import NotAuthorizedError, RepositoryError
from geadmin.ops.models.change_plan import ChangePlan, decline, expected_hash, plan_change
from geadmin.repository import revisions, store
from geadmin.repository.validate import validate_text
from geadmin.stack.processes import free_port
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth, auth_as, viewer_auth

MODEL = "digits_classifier"
PIPELINE = "digits_pipeline"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def nowhere() -> Iterator[TritonClient]:
    with TritonClient(f"http://127.0.0.1:{free_port()}", timeout_s=1.0) as client:
        yield client


def original(repository: Path) -> bytes:
    return store.read_config(repository, MODEL).data


def test_an_apply_plan_has_the_validator_s_findings_and_asks_nothing_it_cannot_predict(
        sample_repository: Path, home: Path, nowhere: TritonClient) -> None:
    typo = original(sample_repository).decode().replace("max_batch_size", "max_bach_size")
    plan = plan_change(nowhere, sample_repository, MODEL, new=typo, home=home)
    assert plan.action == "apply" and plan.server == nowhere.url
    assert plan.errors and plan.errors[0].line  # does not parse: said where
    assert plan.impact is None and not plan.needs_consent  # the apply refuses it, with why

    bigger = original(sample_repository).decode().replace("max_batch_size: 32", "max_batch_size: 64")
    plan = plan_change(nowhere, sample_repository, MODEL, new=bigger, validate=False, home=home)
    assert plan.findings == () and plan.impact is not None
    assert "could not tell which ensembles run digits_classifier" in plan.impact.problem
    assert plan.current_sha256 == revisions.sha256_of(original(sample_repository))


def test_the_file_on_disk_plans_no_impact(sample_repository: Path, home: Path, nowhere: TritonClient) -> None:
    plan = plan_change(nowhere, sample_repository, MODEL, new=original(sample_repository), home=home)
    assert plan.impact is None and plan.errors == []


def test_a_rollback_plans_the_newest_revision_that_differs_from_disk_or_the_one_named(
        sample_repository: Path, home: Path, nowhere: TritonClient) -> None:
    first = original(sample_repository)
    with pytest.raises(RepositoryError, match="no earlier revision"):
        plan_change(nowhere, sample_repository, MODEL, home=home)
    second = first.replace(b"max_batch_size: 32", b"max_batch_size: 24")
    store.write_config(sample_repository, MODEL, second, expected_sha256=revisions.sha256_of(first), who="t",
                       home=home)
    store.write_config(sample_repository, MODEL, first, expected_sha256=revisions.sha256_of(second), who="t",
                       home=home)
    kept = {r.number: r.data for r in revisions.history(sample_repository, MODEL, home=home)}
    plan = plan_change(nowhere, sample_repository, MODEL, home=home)
    assert plan.action == "rollback" and plan.data == second == kept[plan.revision or 0]
    assert plan.findings == ()  # that config served before: not validated again
    named = min(kept)
    assert plan_change(nowhere, sample_repository, MODEL, revision=named, home=home).data == kept[named]
    with pytest.raises(RepositoryError):
        plan_change(nowhere, sample_repository, MODEL, revision=99, home=home)


def taking_down(action: str = "apply", revision: int | None = None, errors: bool = False) -> ChangePlan:
    down = Consequence(PIPELINE, Effect.REFUSED, "max batch size 16 < 32", (PIPELINE, MODEL))
    plan = ChangePlan(action, MODEL, "http://t:8000", b"", "ab" * 32, revision,
                      impact=Impact(action, (MODEL,), (down,)))
    if errors:
        plan = ChangePlan(action, MODEL, "http://t:8000", b"", "ab" * 32, revision,
                          tuple(validate_text("max_bach_size: 1")), plan.impact)
    return plan


def test_one_question_and_one_refusal_for_both_faces() -> None:
    plan = taking_down()
    assert plan.needs_consent
    assert plan.question == f"Apply the new config of {MODEL} although it takes down {PIPELINE}?"
    assert plan.declined() == f"not confirmed: {PIPELINE} would go down. Nothing was done"
    back = taking_down("rollback", 3)
    assert back.question == f"Roll {MODEL} back to revision 3? It takes down {PIPELINE}."
    quiet = ChangePlan("rollback", MODEL, "http://t:8000", b"", "ab" * 32, 3,
                       impact=Impact("rollback", (MODEL,)))
    assert not quiet.needs_consent and quiet.question == f"Roll {MODEL} back to revision 3?"
    assert quiet.declined() == f"not confirmed: the rollback of {MODEL} to revision 3. Nothing was done"
    assert not taking_down(errors=True).needs_consent  # the validator refuses it: nothing to ask


def test_a_declined_change_is_audited_as_refused_by_whoever_declined_it(home: Path) -> None:
    plan = taking_down()
    assert decline(plan, auth_as("alice")) == plan.declined()
    (row,) = audit.query(home=home)
    assert (row.action, row.model, row.result, row.who, row.server) == (
        "apply", MODEL, "refused", "alice", "http://t:8000")
    assert row.message == plan.declined()
    decline(taking_down("rollback", 2), admin_auth(), "refused: no terminal to ask")
    newest = audit.query(home=home)[0]
    assert (newest.action, newest.message) == ("rollback", "refused: no terminal to ask")


def test_a_decline_needs_an_authorization_for_the_change(home: Path) -> None:
    with pytest.raises(NotAuthorizedError):
        decline(taking_down(), None)
    with pytest.raises(NotAuthorizedError):
        decline(taking_down(), viewer_auth())
    assert audit.query(home=home) == []


def test_an_expected_hash_prefix_is_the_planned_file_s_full_hash() -> None:
    plan = taking_down()
    assert expected_hash(plan, None) == plan.current_sha256  # what was planned is what is changed
    assert expected_hash(plan, plan.current_sha256[:12].upper()) == plan.current_sha256
    assert expected_hash(plan, "abab") == "abab"  # too short to be a prefix: a conflict, said so
    assert expected_hash(plan, "cd" * 6) == "cd" * 6
