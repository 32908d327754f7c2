"""Every page the sidebar names answers at its own address, Overview included."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from geadmin.stack.dashboard import DashboardProcess


def test_overview_answers_at_its_own_address_and_the_root_shows_it(
    dashboard: DashboardProcess, page: Page, tmp_path: Path
) -> None:
    page.goto(f"{dashboard.url}/overview", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "overview-address.png"))
    page.goto(dashboard.url, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=30_000)
