"""Sign-in without users in real Chromium, Jupyter's way. A loopback dashboard with no users
asks a browser for the token even though its requests name Host 127.0.0.1:PORT and carry
no forwarded headers (what nginx's default `proxy_pass http://127.0.0.1:8501` sends for every
visitor); the link with the token gets in, leaves the address bar clean, and the sign-in
survives a reload and a deep link in the same browser, not in another. `geadmin up` prints
the link, and `geadmin dashboard --print-url` prints it again; the explicit GEADMIN_AUTH=open
says on every page that there is no sign-in. A local user's sign-in survives a reload too."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from geadmin.access.roles import Role
from geadmin.access.token import new_token, token_file
from geadmin.access.users import UsersFile
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.processes import free_port
from tests.support.auth import admin_auth
from tests.support.stack import GEADMIN, running_up

TIMEOUT_MS = 30_000


def asks_for_the_token(page: Page) -> None:
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("textbox", name="Token")).to_be_visible()
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_have_count(0)


def shows_the_overview(page: Page) -> None:
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Sign in")).to_have_count(0)


def test_a_loopback_dashboard_asks_for_the_token_once_per_browser_session(browser: Browser,
                                                                          tmp_path: Path) -> None:
    home = tmp_path / "home"
    value = new_token(home)  # as `geadmin dashboard` does before it starts Streamlit
    dashboard = DashboardProcess(triton_url=f"http://127.0.0.1:{free_port()}", home=home,
                                 extra_env={"GEADMIN_AUTH": "auto"})  # no users file, no OIDC
    dashboard.start()
    try:
        first = browser.new_context()
        page = first.new_page()
        requests: list[dict[str, str]] = []
        page.on("request", lambda r: requests.append(r.headers) if r.url.startswith(dashboard.url) else None)
        page.goto(dashboard.url, wait_until="domcontentloaded")
        asks_for_the_token(page)
        assert requests and not any(k.lower().startswith("x-forwarded") or k.lower() == "forwarded"
                                    for h in requests for k in h)
        page.get_by_role("textbox", name="Token").fill("0" * 48)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("Not signed in: wrong token")).to_be_visible(timeout=TIMEOUT_MS)

        page.goto(f"{dashboard.url}/?token={value}", wait_until="domcontentloaded")
        shows_the_overview(page)
        expect(page).not_to_have_url(f"{dashboard.url}/?token={value}", timeout=TIMEOUT_MS)
        assert "token=" not in page.url
        # The page sets its session cookie from a script once it has drawn; a reload before that
        # would test the machine's speed, not the sign-in (a busy CI machine got there first).
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not any(c["name"].startswith("geadmin_session_") for c in first.cookies()):
            assert time.monotonic() < deadline, f"no session cookie was set: {first.cookies()}"
            time.sleep(0.2)
        page.reload(wait_until="domcontentloaded")  # a new Streamlit session: the cookie names the sign-in
        shows_the_overview(page)
        page.goto(f"{dashboard.url}/stack", wait_until="domcontentloaded")  # a deep link
        expect(page.get_by_role("heading", name="Stack", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_role("heading", name="Sign in")).to_have_count(0)

        other = browser.new_context()  # another browser: no cookie, so the token again
        stranger = other.new_page()
        stranger.goto(f"{dashboard.url}/stack", wait_until="domcontentloaded")
        asks_for_the_token(stranger)
        other.close()

        page.get_by_role("button", name="Sign out").click()
        asks_for_the_token(page)
        page.reload(wait_until="domcontentloaded")  # the cookie names an ended session now
        asks_for_the_token(page)
        first.close()
    finally:
        dashboard.stop()


def test_open_mode_says_so_on_every_page(page: Page, tmp_path: Path) -> None:
    dashboard = DashboardProcess(triton_url=f"http://127.0.0.1:{free_port()}", home=tmp_path / "home",
                                 extra_env={"GEADMIN_AUTH": "open"})
    dashboard.start()
    try:
        for path in ("/", "/stack", "/audit"):
            page.goto(f"{dashboard.url}{path}", wait_until="domcontentloaded")
            expect(page.get_by_text("No sign-in (GEADMIN_AUTH=open): whoever opens this page on this machine "
                                    "acts as the admin")).to_be_visible(timeout=TIMEOUT_MS)
            expect(page.get_by_role("heading", name="Sign in")).to_have_count(0)
    finally:
        dashboard.stop()


def test_up_prints_the_link_and_print_url_finds_it_again(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_up(home) as up:  # its real default: no users, so a token
        path = token_file(home)
        value = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        link = f"http://127.0.0.1:{up.dashboard}/?token={value}"
        assert f"Dashboard {link}" in up.output
        env = {**os.environ, "GEADMIN_HOME": str(home)}
        env.pop("GEADMIN_AUTH", None)
        printed = subprocess.run([*GEADMIN, "dashboard", "--print-url"], capture_output=True, text=True,
                                 env=env, timeout=60, check=False)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip() == link
        page.goto(f"http://127.0.0.1:{up.dashboard}/", wait_until="domcontentloaded")
        asks_for_the_token(page)
        page.goto(link, wait_until="domcontentloaded")
        shows_the_overview(page)
    log = (home / "logs" / "dashboard.log").read_text()
    assert value not in log  # the dashboard's own log never holds the token


def test_a_local_sign_in_survives_a_reload_and_a_deep_link(browser: Browser, tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.toml")
    users.add("olga", Role.OPERATOR, "operator password 1", auth=admin_auth())
    dashboard = DashboardProcess(triton_url=f"http://127.0.0.1:{free_port()}", home=tmp_path / "home",
                                 extra_env={"GEADMIN_AUTH": "local", "GEADMIN_USERS_FILE": str(users.path)})
    dashboard.start()
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(dashboard.url, wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_role("textbox", name="User").fill("olga")
        page.get_by_role("textbox", name="Password").fill("operator password 1")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("olga · operator")).to_be_visible(timeout=TIMEOUT_MS)
        page.reload(wait_until="domcontentloaded")
        expect(page.get_by_text("olga · operator")).to_be_visible(timeout=TIMEOUT_MS)
        page.goto(f"{dashboard.url}/audit", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Audit", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_text("olga · operator")).to_be_visible(timeout=TIMEOUT_MS)
        users.remove("olga", auth=admin_auth())  # the kept session still follows the users file
        page.reload(wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=TIMEOUT_MS)
        context.close()
    finally:
        dashboard.stop()
