"""Sign-in hardening in real Chromium against a real dashboard process (no Triton needed: it
points at a closed port). A dashboard without sign-in refuses a request that came through a
reverse proxy; through a real OpenID Connect provider (oidc-provider-mock), an account in no
mapped group gets no role, and a login past its age limit is signed out and stays out on
reload (Streamlit's identity cookie outlives the browser session)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.processes import free_port
from tests.support.processes import wait_for


def test_a_dashboard_without_sign_in_refuses_requests_through_a_proxy(browser: Browser,
                                                                      tmp_path: Path) -> None:
    dashboard = DashboardProcess(triton_url=f"http://127.0.0.1:{free_port()}", home=tmp_path / "home",
                                 extra_env={"GEADMIN_AUTH": "open"})
    dashboard.start()
    try:
        direct = browser.new_context()
        page = direct.new_page()
        page.goto(dashboard.url, wait_until="domcontentloaded")
        expect(page.get_by_text("No sign-in: this dashboard listens on this machine only")).to_be_visible(
            timeout=30_000)
        direct.close()
        proxied = browser.new_context(extra_http_headers={"X-Forwarded-For": "203.0.113.9"})
        page = proxied.new_page()
        page.goto(dashboard.url, wait_until="domcontentloaded")
        expect(page.get_by_text("The dashboard refuses this request: this request came through a reverse "
                                "proxy")).to_be_visible(timeout=30_000)
        expect(page.get_by_text("No sign-in: this dashboard listens")).to_have_count(0)
        proxied.close()
    finally:
        dashboard.stop()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Callable[[dict[str, object]], str]]:
    """Start a real OpenID Connect provider whose one user has the given claims; its issuer URL."""
    started: list[subprocess.Popen[bytes]] = []

    def start(claims: dict[str, object]) -> str:
        port = free_port()
        log = tmp_path / f"oidc{len(started)}.log"
        with open(log, "wb") as out:
            started.append(subprocess.Popen([sys.executable, "-m", "oidc_provider_mock", "--port", str(port),
                                             "--user-claims", json.dumps(claims)], stdout=out,
                                            stderr=subprocess.STDOUT))
        issuer = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=2):
                    return True
            except OSError:
                return False

        assert wait_for(answers, 30), log.read_text()
        return issuer

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def oidc_dashboard(tmp_path: Path, issuer: str, env: dict[str, str]) -> DashboardProcess:
    port = free_port()
    user_home = tmp_path / "user"  # Streamlit reads ~/.streamlit/secrets.toml
    (user_home / ".streamlit").mkdir(parents=True)
    (user_home / ".streamlit" / "secrets.toml").write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_urlsafe(24)}"\n'
        'client_id = "geadmin"\nclient_secret = "test-secret"\n'
        f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n')
    return DashboardProcess(triton_url=f"http://127.0.0.1:{free_port()}", home=tmp_path / "home", port=port,
                            extra_env={"HOME": str(user_home), "GEADMIN_AUTH": "oidc", **env})


def sign_in_at_the_provider(page: Page, dashboard: DashboardProcess) -> None:
    page.goto(dashboard.url, wait_until="domcontentloaded")
    page.get_by_role("button", name="Sign in with your identity provider").click(timeout=30_000)
    page.get_by_role("button", name="ann", exact=True).click(timeout=30_000)  # the provider's form


def test_an_oidc_account_in_no_mapped_group_gets_no_role(
        page: Page, tmp_path: Path, provider: Callable[[dict[str, object]], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEADMIN_OIDC_DEFAULT_ROLE", raising=False)  # the default: none
    issuer = provider({"sub": "ann", "email": "ann@example.org", "email_verified": True, "groups": ["staff"]})
    dashboard = oidc_dashboard(tmp_path, issuer, {"GEADMIN_OIDC_ROLE_MAP": "ml-oncall=operator"})
    dashboard.start()
    try:
        sign_in_at_the_provider(page, dashboard)
        expect(page.get_by_text("your account is in no group that GEADMIN_OIDC_ROLE_MAP maps to a role")
               ).to_be_visible(timeout=30_000)
        expect(page.get_by_text("ann@example.org ·")).to_have_count(0)
        expect(page.get_by_role("link", name="Models")).to_have_count(0)
    finally:
        dashboard.stop()


def end_session_at_the_provider(page: Page) -> None:
    """st.logout() leads to the provider's end-session page (oidc-provider-mock's asks for a click)."""
    expect(page.get_by_role("heading", name="End Session")).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="End session").click()


def test_an_oidc_login_past_its_age_is_signed_out_and_stays_out(
        page: Page, tmp_path: Path, provider: Callable[[dict[str, object]], str]) -> None:
    max_s = 18.0
    issuer = provider({"sub": "ann", "email": "ann@example.org", "email_verified": True,
                       "groups": ["ml-oncall"]})
    dashboard = oidc_dashboard(tmp_path, issuer, {"GEADMIN_OIDC_ROLE_MAP": "ml-oncall=operator",
                                                  "GEADMIN_SESSION_MAX_H": str(max_s / 3600)})
    dashboard.start()
    signed_in = page.get_by_text("ann@example.org · operator")
    sign_in_button = page.get_by_role("button", name="Sign in with your identity provider")
    try:
        sign_in_at_the_provider(page, dashboard)
        expect(signed_in).to_be_visible(timeout=30_000)
        signed_in_at = time.monotonic()
        page.reload(wait_until="domcontentloaded")  # a new session, the same login: still signed in
        expect(signed_in).to_be_visible(timeout=30_000)
        identity_cookies = page.context.cookies()
        time.sleep(max(0.0, max_s + 2 - (time.monotonic() - signed_in_at)))
        page.get_by_role("link", name="Models").click()  # the next click after the limit
        end_session_at_the_provider(page)
        expect(sign_in_button).to_be_visible(timeout=30_000)
        # The old identity cookie, as another browser session still holding it would send it:
        # the login has ended for the dashboard, so it is signed out again, never in.
        page.context.add_cookies(identity_cookies)  # type: ignore[arg-type]
        page.goto(dashboard.url, wait_until="domcontentloaded")
        end_session_at_the_provider(page)
        expect(sign_in_button).to_be_visible(timeout=30_000)
        expect(signed_in).to_have_count(0)
    finally:
        dashboard.stop()
