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


def test_the_sidebar_shows_every_page_without_view_more(dashboard: DashboardProcess, page: Page) -> None:
    """Issue 32: Playground, Load test and Tune hid behind "View 3 more" (Streamlit folds the
    navigation beyond 10 pages unless told otherwise)."""
    page.goto(dashboard.url, wait_until="domcontentloaded")
    sidebar = page.get_by_test_id("stSidebarNav")
    expect(sidebar.get_by_role("link", name="Overview")).to_be_visible(timeout=30_000)
    for title in ("Playground", "Load test", "Tune", "Fleet", "Settings"):
        expect(sidebar.get_by_role("link", name=title)).to_be_visible()
    expect(page.get_by_text("View 3 more")).to_have_count(0)
    expect(page.get_by_text("View more")).to_have_count(0)
