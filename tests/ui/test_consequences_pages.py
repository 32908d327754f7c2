"""Consequences on the pages, through AppTest against a real tritonserver with the whole sample
stack loaded: the Models page and the config editor name digits_pipeline before a change to
digits_classifier that takes it down, and list it after; a rollback asks first, and a Cancel
(there, and of an unload that takes the pipeline down) is audited as a refusal, as the CLI
audits a "no"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.domain import ModelState
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, button, isolate, point_at, run

MEMBER, PIPELINE = "digits_classifier", "digits_pipeline"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    return point_at(monkeypatch, triton_factory())  # every sample model loaded


def page(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(name)
    return run(at)


def state_of(server: TritonProcess, model: str) -> ModelState:
    with TritonClient(server.http_url) as client:
        return next(e.state for e in client.repository_index() if e.name == model)


def texts(elements: object) -> str:
    return "\n".join(e.value for e in elements)  # type: ignore[attr-defined]


def asked_to_unload_the_member() -> AppTest:
    """The Models page with the unload of MEMBER asked for, not yet confirmed."""
    at = page("models.py")
    at.multiselect(key="models.selected").set_value([MEMBER])
    at.selectbox(key="models.action").set_value("unload")
    run(at)
    button(at, "Unload…").click()  # type: ignore[attr-defined]
    return run(at)


def test_models_page_names_the_pipeline_before_an_unload_and_lists_it_after(
        server: TritonProcess, tmp_path: Path) -> None:
    at = asked_to_unload_the_member()
    before = texts(at.error)
    assert "This also takes down digits_pipeline" in before
    assert "digits_pipeline: unloaded with it — it runs digits_classifier" in before
    assert state_of(server, PIPELINE) is ModelState.READY  # only asked so far

    button(at, "Confirm unload").click()  # type: ignore[attr-defined]
    run(at)
    after = texts(at.warning)
    assert "Also changed state" in after and "digits_pipeline: READY → UNAVAILABLE" in after
    assert "not available or ambiguous: digits_classifier" in after  # Triton's reason, from its log
    assert state_of(server, PIPELINE) is ModelState.UNAVAILABLE
    [row] = audit.query(action="unload", model=PIPELINE, home=tmp_path / "home")  # the operator's, confirmed
    assert row.result == "ok" and audit.query(action="side_effect", home=tmp_path / "home") == []


def test_models_page_audits_a_cancel_of_an_unload_that_takes_the_pipeline_down(
        server: TritonProcess, tmp_path: Path) -> None:
    at = asked_to_unload_the_member()
    button(at, "Cancel").click()  # type: ignore[attr-defined]
    run(at)
    [row] = audit.query(action="unload", home=tmp_path / "home")  # a cancel is a refusal, as the CLI's "no"
    assert (row.model, row.result) == (MEMBER, "refused")
    assert row.message == "not confirmed: digits_pipeline would go down. Nothing was done"
    assert state_of(server, MEMBER) is ModelState.READY and state_of(server, PIPELINE) is ModelState.READY
    assert not [b for b in at.button if b.label.startswith("Confirm")]


def test_editor_shows_the_ensemble_refusal_as_an_error_and_apply_stays_off(server: TritonProcess) -> None:
    at = page("editor.py")
    at.selectbox(key="editor.model").set_value(MEMBER)
    run(at)
    original = at.text_area(key="editor.text").value
    at.text_area(key="editor.text").set_value(original.replace("max_batch_size: 32", "max_batch_size: 16")
                                              .replace("[ 8, 16 ]", "[ 8 ]"))
    run(at)
    findings = texts(at.markdown)
    assert "`ensemble.member_change`" in findings
    assert ("ensemble digits_pipeline allows maximum batch size 32, but it contains model digits_classifier "
            "which only allows maximum batch size to be 16") in findings
    assert button(at, "Apply").disabled  # type: ignore[attr-defined]
    assert "This also takes down digits_pipeline" in texts(at.error)


def test_editor_names_the_reloaded_pipeline_and_a_rollback_asks_first_and_audits_a_cancel(
        server: TritonProcess, tmp_path: Path) -> None:
    at = page("editor.py")
    at.selectbox(key="editor.model").set_value(MEMBER)
    run(at)
    original = at.text_area(key="editor.text").value
    at.text_area(key="editor.text").set_value(original.replace("max_queue_delay_microseconds: 1000",
                                                               "max_queue_delay_microseconds: 3000"))
    run(at)
    assert "Triton reloads digits_pipeline with it" in texts(at.info)
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    assert any("applied" in s.value for s in at.success), texts(at.error)
    config = server.repository / MEMBER / "config.pbtxt"
    assert "3000" in config.read_text()

    history = at.dataframe[0].value
    first = int(history.loc[history["note"] == "before apply", "revision"].iloc[0])
    at.selectbox(key="editor.revision").set_value(first)
    run(at)
    button(at, f"Roll back to revision {first}").click()  # type: ignore[attr-defined]
    run(at)
    question = f"Roll {MEMBER} back to revision {first}?"  # the core's (ops.change_plan), as the CLI's
    assert any(w.value.startswith(question) for w in at.warning), texts(at.warning)
    assert "Triton reloads digits_pipeline with it" in texts(at.info)
    button(at, "Cancel").click()  # type: ignore[attr-defined]
    run(at)
    assert "3000" in config.read_text()
    assert not any("back to revision" in w.value for w in at.warning), texts(at.warning)
    declined = f"not confirmed: the rollback of {MEMBER} to revision {first}. Nothing was done"
    assert declined in texts(at.info)  # said once, under the history
    [row] = audit.query(action="rollback", home=tmp_path / "home")  # a cancel is a refusal, as the CLI's "no"
    assert (row.model, row.result, row.message, row.origin) == (MEMBER, "refused", declined, "dashboard")

    button(at, f"Roll back to revision {first}").click()  # type: ignore[attr-defined]
    run(at)
    button(at, "Confirm rollback").click()  # type: ignore[attr-defined]
    run(at)
    assert config.read_text() == original
    assert state_of(server, PIPELINE) is ModelState.READY
