"""In Chromium against a real tritonserver and dashboard: the ensemble is named before a change
to one of its models takes it down — in the config editor (an apply of a smaller batch) and
on the Models page (an unload without dependents) — and listed after the unload. Screenshots
are kept in the test's tmp dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from geadmin import audit
from geadmin.domain import ModelState
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.browser import choose
from tests.support.processes import wait_for

MEMBER, PIPELINE = "digits_classifier", "digits_pipeline"


def pipeline_state(triton: TritonProcess) -> ModelState:
    with TritonClient(triton.http_url) as client:
        return next(e.state for e in client.repository_index() if e.name == PIPELINE)


def test_the_pipeline_is_named_before_an_apply_and_an_unload_and_listed_after(
    page: Page, tmp_path: Path, triton_factory: Callable[..., TritonProcess]
) -> None:
    triton = triton_factory()  # the whole sample stack loaded
    home = tmp_path / "home"
    dashboard = DashboardProcess(triton_url=triton.http_url, home=home, triton_log=triton.log_path,
                                 repository=triton.repository)
    dashboard.start()
    try:
        page.goto(f"{dashboard.url}/editor", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Config editor")).to_be_visible(timeout=30_000)
        text = page.get_by_role("textbox", name="config.pbtxt")
        original = (triton.repository / MEMBER / "config.pbtxt").read_text()
        expect(text).to_have_value(original, timeout=30_000)
        text.fill(original.replace("max_batch_size: 32", "max_batch_size: 16").replace("[ 8, 16 ]", "[ 8 ]"))
        text.press("Control+Enter")  # Streamlit commits a text area on Ctrl+Enter (or blur)
        expect(page.get_by_text("This also takes down digits_pipeline")).to_be_visible(timeout=30_000)
        refused = page.get_by_text("ensemble digits_pipeline allows maximum batch size 32")
        expect(refused.first).to_be_visible()
        expect(page.get_by_role("button", name="Apply", exact=True)).to_be_disabled()
        page.screenshot(path=str(tmp_path / "editor_names_the_pipeline.png"), full_page=True)
        assert pipeline_state(triton) is ModelState.READY

        page.get_by_role("link", name="Models").click()
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible(timeout=30_000)
        choose(page, page.get_by_role("combobox", name="Models"), MEMBER)
        page.keyboard.press("Escape")
        choose(page, page.get_by_role("combobox", name="Action"), "unload")
        page.get_by_role("button", name="Unload…").click()
        expect(page.get_by_text("This also takes down digits_pipeline")).to_be_visible(timeout=30_000)
        expect(page.get_by_text("digits_pipeline: unloaded with it")).to_be_visible()
        page.screenshot(path=str(tmp_path / "models_names_the_pipeline.png"), full_page=True)
        assert pipeline_state(triton) is ModelState.READY  # asked, not done

        page.get_by_role("button", name="Confirm unload").click()
        expect(page.get_by_text("digits_pipeline: READY → UNAVAILABLE")).to_be_visible(timeout=60_000)
        page.screenshot(path=str(tmp_path / "models_lists_what_else_changed.png"), full_page=True)
        assert pipeline_state(triton) is ModelState.UNAVAILABLE
        audited = lambda: [r.model for r in audit.query(action="unload", result="ok", home=home)]  # noqa: E731
        assert wait_for(lambda: PIPELINE in audited(), 30)
    finally:
        dashboard.stop()
