"""The Config editor's "Preview impact" through AppTest, against a real tritonserver: the
edited text measured on a trial copy beside the live model, GO / NO-GO with the evidence under
the button, the trial gone and nothing applied; a preview that cannot run (no recorded load)
says why, without a traceback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.access import guard
from geadmin.ops.monitoring import set_objective
from geadmin.repository import trials
from geadmin.stack.tritonserver import TritonProcess
from tests.support.apptest import APP, button, isolate, point_at, run

MODEL = "digits_classifier"
pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    triton = triton_factory(models=[MODEL])
    point_at(monkeypatch, triton)
    return triton


def edited_editor(server: TritonProcess) -> tuple[AppTest, str]:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("editor.py")
    run(at)
    at.selectbox(key="editor.model").set_value(MODEL)
    run(at)
    before = (server.repository / MODEL / "config.pbtxt").read_text()
    at.text_area(key="editor.text").set_value(before + "# previewed\n")
    return run(at), before


def test_preview_impact_shows_go_with_the_evidence_and_applies_nothing(server: TritonProcess) -> None:
    # Judged by a p99 objective far above this model's few ms: without one, a p99 that doubles
    # and adds 10 ms is a no-go, and a starved host's one stall in a handful of requests did that.
    set_objective(MODEL, 1000.0, None, auth=guard.os_user())
    at, before = edited_editor(server)
    at.number_input(key="editor.preview_rate").set_value(5.0)
    at.number_input(key="editor.preview_window").set_value(500)
    button(at, "Preview impact").click()
    run(at)
    assert not at.exception
    assert len(at.success) == 1, [e.value for e in [*at.error, *at.warning]]
    [verdict] = at.success
    assert verdict.value.startswith(f"GO: {MODEL}: the new config loads, breaks no ensemble")
    evidence = "\n".join(c.value for c in at.code)
    assert "load: 5 requests/s (given with --rate)" in evidence and "p99 change: " in evidence
    assert "nothing was applied" in evidence
    assert [s.label for s in at.status] == [f"Previewed {MODEL}: GO"]
    assert (server.repository / MODEL / "config.pbtxt").read_text() == before
    assert trials.marked(server.repository) == []


def test_a_preview_that_cannot_run_says_why_without_a_traceback(server: TritonProcess) -> None:
    at, _ = edited_editor(server)
    button(at, "Preview impact").click()  # rate 0: the recorded peak, and nothing is recorded
    run(at)
    assert not at.exception
    shown = "\n".join(e.value for e in at.error)
    assert "Preview stopped (nothing was applied):" in shown and "nothing to replay" in shown
    assert "--rate" in shown and "Traceback" not in shown
    assert not at.success
    assert trials.marked(server.repository) == []
