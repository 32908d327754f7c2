"""Sign-in in real Chromium: a local user signs in and unloads a model; an OIDC user signs in
through a real OpenID Connect provider (oidc-provider-mock, started here), its groups claim
mapped to the operator role, and unloads a model. Both unloads are audited with the person."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from geadmin import audit
from geadmin.access.roles import Role
from geadmin.access.users import UsersFile
from geadmin.domain import ModelState
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth
from tests.support.browser import choose
from tests.support.processes import wait_for

MODEL = "text_normalize"
PASSWORD = "operator password 1"


@pytest.fixture
def triton(triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    return triton_factory(models=[MODEL])


def unload_from_the_models_page(page: Page) -> None:
    # Through the sidebar, as a user would (a page load keeps the sign-in too: test_signin_token_browser.py).
    page.get_by_role("link", name="Models").click()
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible(timeout=30_000)
    choose(page, page.get_by_role("combobox", name="Models"), MODEL)
    page.keyboard.press("Escape")
    choose(page, page.get_by_role("combobox", name="Action"), "unload")
    page.get_by_role("button", name="Unload…").click()
    page.get_by_role("button", name="Confirm unload").click()


def wait_unloaded(triton: TritonProcess, home: Path) -> None:
    """Triton unloaded it, and the page finished the action (its audit row is written)."""
    with TritonClient(triton.http_url) as client:
        assert wait_for(lambda: {e.name: e.state for e in client.repository_index()}.get(MODEL)
                        is not ModelState.READY, 30), "the model was never unloaded"
    assert wait_for(lambda: any(r.action == "unload" for r in audit.query(model=MODEL, home=home)), 30)


def test_a_local_user_signs_in_and_unloads(page: Page, tmp_path: Path, triton: TritonProcess) -> None:
    users = UsersFile(tmp_path / "users.toml")
    users.add("olga", Role.OPERATOR, PASSWORD, auth=admin_auth())
    home = tmp_path / "home"
    dashboard = DashboardProcess(triton_url=triton.http_url, home=home, triton_log=triton.log_path,
                                 repository=triton.repository,
                                 extra_env={"GEADMIN_AUTH": "local", "GEADMIN_USERS_FILE": str(users.path)})
    dashboard.start()
    try:
        page.goto(dashboard.url, wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=30_000)
        page.get_by_role("textbox", name="User").fill("olga")
        page.get_by_role("textbox", name="Password").fill("wrong password!!")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("unknown user or wrong password")).to_be_visible(timeout=15_000)
        page.get_by_role("textbox", name="Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("olga · operator")).to_be_visible(timeout=30_000)
        unload_from_the_models_page(page)
        wait_unloaded(triton, home)
    finally:
        dashboard.stop()
    row = next(r for r in audit.query(model=MODEL, home=home) if r.action == "unload")
    assert (row.who, row.origin, row.result) == ("olga", "dashboard", "ok"), row.message


@pytest.fixture
def oidc_provider(tmp_path: Path) -> Iterator[str]:
    """A real OpenID Connect provider with one user in the `ml-oncall` group."""
    port = free_port()
    claims = {"sub": "ann", "email": "ann@example.org", "email_verified": True,
              "groups": ["staff", "ml-oncall"]}
    log = open(tmp_path / "oidc.log", "wb")  # noqa: SIM115 - closed below, after the process
    process = subprocess.Popen([sys.executable, "-m", "oidc_provider_mock", "--port", str(port),
                                "--user-claims", json.dumps(claims)], stdout=log, stderr=subprocess.STDOUT)
    issuer = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=2):
                return True
        except OSError:
            return False

    try:
        assert wait_for(answers, 30), (tmp_path / "oidc.log").read_text()
        yield issuer
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_an_oidc_user_signs_in_through_the_provider_and_unloads(
        page: Page, tmp_path: Path, triton: TritonProcess, oidc_provider: str) -> None:
    port = free_port()
    user_home = tmp_path / "user"  # Streamlit reads ~/.streamlit/secrets.toml
    (user_home / ".streamlit").mkdir(parents=True)
    (user_home / ".streamlit" / "secrets.toml").write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_urlsafe(24)}"\n'
        'client_id = "geadmin"\nclient_secret = "test-secret"\n'
        f'server_metadata_url = "{oidc_provider}/.well-known/openid-configuration"\n')
    home = tmp_path / "home"
    dashboard = DashboardProcess(
        triton_url=triton.http_url, home=home, port=port, triton_log=triton.log_path,
        repository=triton.repository,
        extra_env={"HOME": str(user_home), "GEADMIN_AUTH": "oidc",
                   "GEADMIN_OIDC_ROLE_MAP": "ml-oncall=operator", "GEADMIN_OIDC_DEFAULT_ROLE": "none"})
    dashboard.start()
    try:
        page.goto(dashboard.url, wait_until="domcontentloaded")
        page.get_by_role("button", name="Sign in with your identity provider").click(timeout=30_000)
        page.get_by_role("button", name="ann", exact=True).click(timeout=30_000)  # the provider's form
        expect(page.get_by_text("ann@example.org · operator")).to_be_visible(timeout=30_000)
        unload_from_the_models_page(page)
        wait_unloaded(triton, home)
    finally:
        dashboard.stop()
    row = next(r for r in audit.query(model=MODEL, home=home) if r.action == "unload")
    assert (row.who, row.origin, row.result) == ("ann@example.org", "dashboard", "ok")
