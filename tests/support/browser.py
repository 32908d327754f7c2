"""What browser tests share (Playwright driving Debian's Chromium)."""

from __future__ import annotations

from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError


def choose(page: Page, combobox: Locator, option: str) -> None:
    """Open a select and pick `option`; a click while the app still reruns is lost, so retry.
    A rerun can also leave the open list placed outside the viewport, where the option never
    takes a click: close it and open it again."""
    wanted = page.get_by_role("option", name=option, exact=True)
    for _ in range(10):
        if wanted.is_visible():
            try:
                wanted.click(timeout=5_000)
                return
            except PlaywrightTimeoutError:
                page.keyboard.press("Escape")
                continue
        combobox.click()
        try:
            wanted.wait_for(state="visible", timeout=2_000)
        except PlaywrightTimeoutError:
            continue
    raise AssertionError(f"option {option!r} never showed")
