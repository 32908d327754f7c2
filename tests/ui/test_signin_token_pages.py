"""Sign-in without users, through AppTest (no Triton needed: the app points at a closed
port). On a loopback bind the dashboard asks for the token instead of making everyone admin;
the token from the link or the form gets in once, is taken out of the address, and wrong
guesses are rate-limited; the explicit GEADMIN_AUTH=open says so on every page."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.access.identity import Mode
from geadmin.access.roles import Role
from geadmin.access.token import new_token, token_file
from geadmin.stack.processes import free_port
from tests.support.apptest import APP, button, isolate, run


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    for name in ("SESSION_IDLE_MIN", "SESSION_MAX_H", "REQUIRE_SIGN_IN", "PROXY_HOPS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_AUTH", "auto")  # the default: no users file, no OIDC, a loopback bind
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(tmp_path / "users.toml"))  # does not exist
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    st.cache_resource.clear()  # the sign-in mode, the failure table and the sessions are per process
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=60)


def asks_for_the_token(at: AppTest) -> bool:
    return titles(at) == ["Sign in"] and [t.label for t in at.text_input] == ["Token"]


def test_a_loopback_dashboard_without_users_asks_for_the_token_not_the_overview(home: Path) -> None:
    new_token(home)
    at = run(app())
    assert asks_for_the_token(at)
    assert "access.identity" not in at.session_state and not at.sidebar.caption
    assert not any("Overview" in t for t in titles(at))


def test_the_token_from_the_link_signs_in_once_and_leaves_the_address(home: Path) -> None:
    value = new_token(home)
    at = app()
    at.query_params["token"] = value
    at.query_params["server"] = "main"  # a deep link's own parameters stay
    run(at)
    assert not asks_for_the_token(at)
    identity = at.session_state["access.identity"]
    assert identity.mode is Mode.TOKEN and identity.role is Role.ADMIN
    assert "token" not in at.query_params and at.query_params.get("server") == ["main"]
    assert any("· admin" in c.value for c in at.sidebar.caption)
    run(at)  # the next click: still signed in, without the token
    assert not asks_for_the_token(at)
    at.query_params["token"] = value  # the link opened again while signed in
    run(at)
    assert "token" not in at.query_params and not asks_for_the_token(at)
    button(at, "Sign out").click()  # type: ignore[attr-defined]
    run(at)
    assert asks_for_the_token(at)


def test_the_token_from_the_form_signs_in(home: Path) -> None:
    value = new_token(home)
    at = run(app())
    at.text_input(key="access.token").input(value)
    button(at, "Sign in").click()  # type: ignore[attr-defined]
    run(at)
    assert at.session_state["access.identity"].mode is Mode.TOKEN and not asks_for_the_token(at)


def test_a_wrong_token_is_refused_and_guesses_are_rate_limited(home: Path) -> None:
    value = new_token(home)
    at = app()
    at.query_params["token"] = "0" * 48
    run(at)
    assert asks_for_the_token(at) and "token" not in at.query_params
    assert any("Not signed in: wrong token" in e.value for e in at.error)
    for _ in range(4):  # five wrong guesses from one client in all (FailedSignIns' limit)
        at.text_input(key="access.token").input("1" * 48)
        button(at, "Sign in").click()  # type: ignore[attr-defined]
        run(at)
    at.text_input(key="access.token").input(value)
    button(at, "Sign in").click()  # type: ignore[attr-defined]
    run(at)
    assert asks_for_the_token(at), "the right token during a lockout still waits"
    assert any("too many failed sign-ins" in e.value for e in at.error)


def test_a_dashboard_started_without_up_writes_its_own_token_privately(home: Path,
                                                                       capsys: pytest.CaptureFixture[str]
                                                                       ) -> None:
    at = run(app())  # `streamlit run pages/app.py`: nobody wrote a token
    assert asks_for_the_token(at)
    path = token_file(home)
    value = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    printed = "".join(capsys.readouterr())
    assert str(path) in printed and "--print-url" in printed and value not in printed


def test_open_mode_says_on_every_page_that_there_is_no_sign_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_AUTH", "open")
    at = run(app())
    notice = "No sign-in (GEADMIN_AUTH=open): whoever opens this page on this machine acts as the admin"
    for page in ("overview.py", "stack.py", "audit.py"):
        if page != "overview.py":
            at.switch_page(page)
            run(at)
        assert any(notice in c.value for c in at.main.caption), page
        assert any("No sign-in: this dashboard listens on this machine only" in c.value
                   for c in at.sidebar.caption)
