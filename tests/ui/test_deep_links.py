"""Deep links through AppTest against a real tritonserver: each page with a model picker opens
on the model the URL names, a server named by its URL is selected, a range is taken, and a
model or server the dashboard cannot show is said, not silently replaced."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.stack.tritonserver import TritonProcess
from pages.ui.links import range_label
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.markdown_render import render

PICKERS = {  # page file -> the label of its model picker
    "models.py": "Model",
    "editor.py": "Model",
    "playground.py": "Model",
    "load_test.py": "Model",
    "audit.py": "Model",
}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_server: TritonProcess) -> Iterator[None]:
    isolate(monkeypatch, tmp_path)
    point_at(monkeypatch, triton_server)
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page(page)
    for name, value in params.items():
        at.query_params[name] = value
    return run(at)


def picker(at: AppTest, label: str) -> object:
    found = [s for s in at.selectbox if s.label == label]
    assert found, f"no selectbox {label!r}: {[s.label for s in at.selectbox]}"
    return found[0]


@pytest.mark.parametrize("page", ["models.py", "editor.py", "playground.py", "load_test.py"])
def test_a_link_opens_the_page_on_its_model(page: str, triton_server: TritonProcess) -> None:
    at = open_page(page, model="digits_pipeline", server=triton_server.http_url)
    assert picker(at, PICKERS[page]).value == "digits_pipeline"
    assert not [w.value for w in at.warning if "link" in str(w.value)]
    plain = open_page(page)  # without a link: the page's own first choice
    assert picker(plain, PICKERS[page]).value != "digits_pipeline" or page == "load_test.py"


def test_a_model_the_server_does_not_have_is_said(triton_server: TritonProcess) -> None:
    at = open_page("models.py", model="resnet_missing")
    warnings = [render(str(w.value)).words for w in at.warning]
    assert any("The link names model “resnet_missing”" in w for w in warnings), warnings


def test_an_unknown_server_is_said(triton_server: TritonProcess) -> None:
    at = open_page("models.py", server="http://10.9.9.9:8000", model="digits_pipeline")
    warnings = [render(str(w.value)).words for w in at.warning]
    assert any("The link names server “http://10.9.9.9:8000”" in w for w in warnings), warnings


@pytest.mark.parametrize("param", ["server", "model"])
def test_markdown_in_a_link_is_shown_as_text_never_as_a_link(param: str) -> None:
    """Anyone can send a link: `?server=[Session expired](https://evil.example/login)` must not
    put a sign-in link on the dashboard."""
    bait = "[Session expired: sign in again](https://evil.example/login) **now** <b>x</b>"
    at = open_page("models.py", **{param: bait})
    notices = [str(w.value) for w in at.warning if "The link names" in str(w.value)]
    assert notices, [str(w.value) for w in at.warning]
    shown = render(notices[0])
    assert shown.links == [] and shown.constructs == [], (notices[0], shown)
    assert bait in shown.words


def test_the_link_applies_once_and_the_operators_choice_then_stands(triton_server: TritonProcess) -> None:
    at = open_page("editor.py", model="digits_pipeline")
    picker(at, "Model").set_value("digits_classifier")
    run(at)
    assert picker(at, "Model").value == "digits_classifier"


def test_a_metrics_link_takes_its_range() -> None:
    open_page("metrics.py", range="1 h")  # no exception with a range (no history here to chart)
    now = datetime(2026, 12, 4, 10, 50, tzinfo=timezone.utc)
    assert range_label(None, "2026-12-04T10:00:00Z", now=now) == "1 h"
    assert range_label(None, "not a time") is None and range_label("6 h", None) == "6 h"
