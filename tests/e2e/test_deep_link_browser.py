"""A deep link opened in Chromium lands on the right model: the link an alert carries
(`/models?server=<Triton URL>&model=...`) and one to the Config editor; markdown in a link's
parameter is shown as its characters, never as a link."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import Page, expect

from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.tritonserver import TritonProcess


def test_an_alerts_link_opens_the_models_page_on_its_model(
        dashboard: DashboardProcess, triton_server: TritonProcess, page: Page, tmp_path: Path) -> None:
    query = urlencode({"server": triton_server.http_url, "model": "digits_pipeline"})
    page.goto(f"{dashboard.url}/models?{query}", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible(timeout=60_000)
    picker = page.get_by_role("combobox", name="Model", exact=True)  # the details' model picker
    expect(picker).to_have_value("digits_pipeline", timeout=60_000)
    expect(page.get_by_text("The link names")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "models-deep-link.png"), full_page=True)


def test_an_editor_link_opens_the_models_config(dashboard: DashboardProcess, page: Page,
                                                 tmp_path: Path) -> None:
    page.goto(f"{dashboard.url}/editor?model=text_normalize", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Config editor")).to_be_visible(timeout=60_000)
    editor = page.get_by_role("textbox", name="config.pbtxt")
    expect(editor).to_have_value(re.compile('name: "text_normalize"'), timeout=60_000)
    page.screenshot(path=str(tmp_path / "editor-deep-link.png"), full_page=True)


def test_markdown_in_a_links_server_is_text_not_a_link(dashboard: DashboardProcess, page: Page,
                                                       tmp_path: Path) -> None:
    bait = "[Session expired: sign in again](https://evil.example/login)"
    page.goto(f"{dashboard.url}/models?{urlencode({'server': bait})}", wait_until="domcontentloaded")
    notice = page.get_by_text("The link names server", exact=False)
    expect(notice).to_be_visible(timeout=60_000)
    assert bait in notice.inner_text().replace("\u2060", "")  # its characters (joiners are invisible)
    expect(page.locator('a[href*="evil.example"]')).to_have_count(0)  # no link, not even a GFM autolink
    page.screenshot(path=str(tmp_path / "markdown-deep-link.png"), full_page=True)
