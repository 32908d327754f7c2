"""A deliberate stop explained, in real Chromium against `geadmin up` (real tritonserver, real
supervisor): Triton stopped from the Stack page makes the Overview, the Models page and
`geadmin status` say who stopped it, when and from where (not "is the URL right?"), the audit
log holds the stop, and a start from the Stack page brings the Overview back to OK.
Screenshots are kept in the test's tmp dir."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from playwright.sync_api import Page, expect

from geadmin import audit
from tests.support.browser import choose
from tests.support.processes import wait_for
from tests.support.stack import geadmin, running_up

TIMEOUT_MS = 30_000
OK = "OK: Triton serves; 5 model(s) READY"


def triton_state(home: Path) -> str:
    return str(json.loads((home / "stack.json").read_text())["triton"]["state"])


def stack_action(page: Page, action: str) -> None:
    """On the Stack page: Action `action` (the service is triton, the first one), Apply…, Yes."""
    expect(page.get_by_role("heading", name="Stack", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("Driver: local")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("combobox", name="Service").first).to_have_value("triton", timeout=TIMEOUT_MS)
    choose(page, page.get_by_role("combobox", name="Action"), action.capitalize())
    page.get_by_role("button", name="Apply…").click()
    expect(page.get_by_text(f"{action.capitalize()} triton?")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=f"Yes, {action} triton").click()
    expect(page.get_by_text(f"Asked to {action} triton")).to_be_visible(timeout=TIMEOUT_MS)


def test_a_stop_from_the_stack_page_is_explained_everywhere_and_a_start_recovers(
        page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_up(home, wait_for="models: ") as up:
        page.goto(up.dashboard_link("/overview"), wait_until="domcontentloaded")  # the link `up` printed
        expect(page.get_by_text(OK, exact=False)).to_be_visible(timeout=TIMEOUT_MS)
        # A loopback stack without users: the token's holder is the admin, under the OS user's name;
        # the later page loads keep the sign-in (the browser's session cookie).
        user = audit.os_user_name()
        expect(page.get_by_text(f"{user} · admin")).to_be_visible(timeout=TIMEOUT_MS)

        page.goto(f"http://127.0.0.1:{up.dashboard}/stack", wait_until="domcontentloaded")
        stack_action(page, "stop")
        assert wait_for(lambda: triton_state(home) == "stopped", 60), up.collector.text
        expect(page.get_by_text("triton: 1 exits recorded")).to_be_visible(timeout=TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "stack_stopped.png"), full_page=True)

        # The audit log: the Stack page's row says who asked; the stop succeeded.
        rows = audit.query(action="stop", model="triton", home=home)
        assert [(r.who, r.origin, r.result) for r in rows] == [(user, "dashboard", "ok")], rows
        stopped_at = rows[0].at
        assert datetime.now(timezone.utc) - stopped_at < timedelta(minutes=2), stopped_at

        # The Overview: who, when, from where, and the way to the Stack page.
        page.goto(f"http://127.0.0.1:{up.dashboard}/overview", wait_until="domcontentloaded")
        alerts = page.locator("[data-testid='stAlert']")
        down = alerts.filter(has_text=f"DOWN: Triton was stopped by {user} (dashboard) at ")
        expect(down).to_be_visible(timeout=TIMEOUT_MS)
        expect(down).to_contain_text(f"at {stopped_at:%H:%M:%S} UTC from the Stack page")
        # The page renders the backticks as code: the text has none.
        expect(down).to_contain_text("it stays down until someone starts it (geadmin stack start triton")
        sidebar = page.locator("[data-testid='stSidebar']")
        expect(sidebar.get_by_text(re.compile(r"DOWN$"))).to_be_visible(timeout=TIMEOUT_MS)
        stopped_note = sidebar.get_by_text(f"Triton was stopped by {user}", exact=False)
        expect(stopped_note).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_text("No bottleneck figures: Triton was stopped by", exact=False)).to_be_visible()
        # Nothing on the page (banner, sidebar, Bottlenecks card) asks "is the URL right?".
        expect(page.get_by_text("is the URL right", exact=False)).to_have_count(0)
        link = page.get_by_role("link", name="Open the Stack page").first  # above and in Server history
        expect(link).to_be_visible(timeout=TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "overview_stopped.png"), full_page=True)

        # `geadmin status`: exit 3 (unreachable) and who stopped it.
        status = geadmin("status", home=home)
        assert status.returncode == 3, status.stdout + status.stderr
        assert f"Triton was stopped by {user} (dashboard) at {stopped_at:%H:%M:%S} UTC from the Stack page" \
            in status.stdout, status.stdout
        assert "start Triton" not in status.stdout

        # The Models page says the same instead of "start Triton (`geadmin up`)".
        page.goto(f"http://127.0.0.1:{up.dashboard}/models", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
        stopped_by = f"Triton was stopped by {user} (dashboard) at {stopped_at:%H:%M:%S} UTC"
        error = alerts.filter(has_text=stopped_by)
        expect(error).to_be_visible(timeout=TIMEOUT_MS)
        expect(error).to_contain_text("Next step: see the Stack page")
        expect(page.get_by_text("start Triton (", exact=False)).to_have_count(0)
        expect(page.get_by_text("is the URL right", exact=False)).to_have_count(0)
        page.screenshot(path=str(tmp_path / "models_stopped.png"), full_page=True)

        # The Overview's link leads to the Stack page; a start there brings everything back.
        page.goto(f"http://127.0.0.1:{up.dashboard}/overview", wait_until="domcontentloaded")
        expect(link).to_be_visible(timeout=TIMEOUT_MS)
        link.click()
        stack_action(page, "start")
        page.get_by_role("link", name="Overview").click()
        expect(page.get_by_text(OK, exact=False)).to_be_visible(timeout=120_000)
        expect(page.get_by_text("Triton was stopped by", exact=False)).to_have_count(0)
        expect(sidebar.get_by_text(re.compile(r"(^|\W)OK$"))).to_be_visible(timeout=TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "overview_recovered.png"), full_page=True)
        assert triton_state(home) == "running"
        assert geadmin("status", home=home).returncode == 0
