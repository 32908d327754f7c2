"""Sign-in and roles in the dashboard, through AppTest against a real tritonserver.

The table test walks every page as a viewer: every button it shows must be either known to
be read-only or disabled with the reason, so a new mutating control that skips the guard
fails here."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit import config as streamlit_config
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.access.bootstrap import PASSWORD_FILE
from geadmin.access.roles import Role
from geadmin.access.users import UsersFile
from geadmin.domain import ModelState
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, button, change_session, isolate, point_at, run
from tests.support.auth import admin_auth
from tests.support.processes import wait_for

MODEL = "digits_classifier"
PASSWORDS = {"vic": "viewer password 1", "olga": "operator password 1", "ada": "admin password 12"}
pytestmark = pytest.mark.integration

# Buttons that change nothing on the server or on disk, by label (prefix). Anything else a
# viewer sees must be disabled.
READ_ONLY = ("Sign out", "Refresh", "Reopen from disk", "Write knobs into the text", "Send",
             "Retry", "Prepare bundle", "Cancel", "Dry run")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.delenv("GEADMIN_SESSION_IDLE_MIN", raising=False)
    monkeypatch.setenv("GEADMIN_AUTH", "local")
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(tmp_path / "users.toml"))
    st.cache_resource.clear()  # the sign-in mode and the failed-attempt counter are per process
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def users(tmp_path: Path) -> UsersFile:
    file = UsersFile(tmp_path / "users.toml")
    for name, role in (("vic", Role.VIEWER), ("olga", Role.OPERATOR), ("ada", Role.ADMIN)):
        file.add(name, role, PASSWORDS[name], auth=admin_auth())
    return file


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    triton = triton_factory(models=[MODEL])
    point_at(monkeypatch, triton)
    return triton


@pytest.fixture
def shared_server(triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    """The session's server, for tests that change nothing on it (sign-in, what a viewer may
    not do): no private server per test."""
    return point_at(monkeypatch, triton_server)


def sign_in(name: str, password: str | None = None, at: AppTest | None = None) -> AppTest:
    if at is None:
        at = run(AppTest.from_file(APP, default_timeout=90))
    assert [t.value for t in at.title] == ["Sign in"], "the sign-in form comes first"
    at.text_input(key="access.user").input(name)
    at.text_input(key="access.password").input(password if password is not None else PASSWORDS[name])
    button(at, "Sign in").click()  # type: ignore[attr-defined]
    return run(at)


def open_page(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    return run(at)


# -- sign-in ------------------------------------------------------------------------------
def test_nothing_is_shown_before_sign_in_and_a_wrong_password_says_so(shared_server: TritonProcess,
                                                                     users: UsersFile) -> None:
    at = run(AppTest.from_file(APP, default_timeout=90))
    assert [t.value for t in at.title] == ["Sign in"] and not at.dataframe
    at = sign_in("olga", "not her password")
    assert any("unknown user or wrong password" in e.value for e in at.error)
    assert [t.value for t in at.title] == ["Sign in"]
    at = sign_in("olga", at=at)
    assert "Sign in" not in [t.value for t in at.title]
    assert any("olga · operator" in c.value for c in at.sidebar.caption)


def test_failed_sign_ins_are_rate_limited_per_user(shared_server: TritonProcess, users: UsersFile) -> None:
    at = run(AppTest.from_file(APP, default_timeout=90))
    for _ in range(5):
        at = sign_in("olga", "wrong wrong wrong", at=at)
    at = sign_in("olga", at=at)  # the right password, too soon
    assert any("too many failed sign-ins for 'olga'" in e.value for e in at.error)
    assert [t.value for t in at.title] == ["Sign in"]
    at = sign_in("vic", at=at)  # another user is not locked out
    assert any("vic · viewer" in c.value for c in at.sidebar.caption)


def test_an_idle_session_signs_out(shared_server: TritonProcess, users: UsersFile,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_SESSION_IDLE_MIN", "1")
    at = sign_in("olga")
    change_session(at, last_seen_s=time.monotonic() - 120)
    run(at)
    assert [t.value for t in at.title] == ["Sign in"]
    assert any("signed out after 1 minutes without activity" in i.value for i in at.info)


def test_a_public_bind_with_no_sign_in_configured_refuses_to_run(shared_server: TritonProcess,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_AUTH", "auto")
    streamlit_config.set_option("server.address", "0.0.0.0")
    try:
        at = run(AppTest.from_file(APP, default_timeout=90))
    finally:
        streamlit_config.set_option("server.address", "127.0.0.1")
    (error,) = at.error
    assert error.value.startswith("The dashboard refuses to run: the dashboard would listen on 0.0.0.0")
    assert "geadmin users add" in error.value and "GEADMIN_AUTH=oidc" in error.value
    assert not at.title and not at.dataframe


def test_first_start_creates_an_admin_who_must_choose_a_password(shared_server: TritonProcess,
                                                                 tmp_path: Path) -> None:
    at = run(AppTest.from_file(APP, default_timeout=90))  # no users file yet: GEADMIN_AUTH=local
    password_file = tmp_path / "home" / PASSWORD_FILE
    first_password = password_file.read_text().strip()
    at = sign_in("admin", first_password, at=at)
    assert [t.value for t in at.title] == ["Choose a new password"]
    at.text_input(key="access.new_password").input("my own admin password")
    at.text_input(key="access.new_password_again").input("my own admin password")
    button(at, "Set password").click()  # type: ignore[attr-defined]
    run(at)
    assert any("admin · admin" in c.value for c in at.sidebar.caption)
    assert not password_file.exists()
    assert UsersFile(tmp_path / "users.toml").verify("admin", "my own admin password").must_change is False


# -- roles ----------------------------------------------------------------------------------
def models_page_with_selection(at: AppTest) -> None:
    at.multiselect(key="models.selected").set_value([MODEL])
    run(at)


def editor_with_a_change(at: AppTest) -> None:
    at.selectbox(key="editor.model").set_value(MODEL)
    run(at)
    text = at.text_area(key="editor.text").value
    at.text_area(key="editor.text").set_value(text.replace("max_queue_delay_microseconds: 1000",
                                                           "max_queue_delay_microseconds: 2000"))
    run(at)


def new_model_with_a_name(at: AppTest) -> None:
    at.text_input(key="new_model.name").set_value("viewer_made")
    run(at)


PAGES: dict[str, Callable[[AppTest], None] | None] = {
    "overview.py": None,
    "models.py": models_page_with_selection,
    "editor.py": editor_with_a_change,
    "new_model.py": new_model_with_a_name,
    "stack.py": None,
    "audit.py": None,
    "metrics.py": None,
    "npu.py": None,
    "playground.py": None,
    "load_test.py": None,
    "tune.py": None,
    "capacity.py": None,
    "fleet.py": None,
    "settings.py": None,
}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_viewer_sees_every_mutating_control_disabled_with_the_reason(
        page: str, shared_server: TritonProcess, users: UsersFile) -> None:
    at = open_page(sign_in("vic"), page)
    setup = PAGES[page]
    if setup:
        setup(at)
    # said once on the page too, not only in each disabled control's tooltip (issue 32)
    assert any("vic is a viewer" in c.value and "ask an admin" in c.value for c in at.caption), page
    for control in at.button:
        if control.label.startswith(READ_ONLY):
            continue
        assert control.disabled, f"{page}: a viewer can press {control.label!r}"
        assert control.help and "role" in control.help, (
            f"{page}: {control.label!r} is disabled without saying why ({control.help!r})")


def test_the_table_covers_every_page_of_the_app() -> None:
    routed = Path(APP).read_text()
    missing = [p for p in sorted(Path(APP).parent.glob("*.py"))
               if f"{p.stem}.render" in routed and p.name not in PAGES and p.stem not in EXEMPT_PAGES]
    assert not missing, f"pages without a row in PAGES: {[p.name for p in missing]}"


EXEMPT_PAGES: set[str] = set()


def test_a_viewer_cannot_apply_and_the_reason_names_the_role(shared_server: TritonProcess,
                                                             users: UsersFile) -> None:
    at = open_page(sign_in("vic"), "editor.py")
    editor_with_a_change(at)
    apply = button(at, "Apply")
    assert apply.disabled and "apply needs the operator role; vic is viewer" in apply.help  # type: ignore[attr-defined]


def test_an_operator_unloads_and_the_audit_row_names_them(server: TritonProcess, users: UsersFile) -> None:
    at = open_page(sign_in("olga"), "models.py")
    at.multiselect(key="models.selected").set_value([MODEL])
    at.selectbox(key="models.action").set_value("unload")
    run(at)
    button(at, "Unload…").click()  # type: ignore[attr-defined]
    run(at)
    button(at, "Confirm unload").click()  # type: ignore[attr-defined]
    run(at)
    with TritonClient(server.http_url) as client:
        assert wait_for(lambda: {e.name: e.state for e in client.repository_index()}.get(MODEL)
                        is not ModelState.READY, 30)
        client.load(MODEL)
    row = next(r for r in audit.query(model=MODEL) if r.action == "unload")
    assert (row.who, row.origin, row.result) == ("olga", "dashboard", "ok")


def test_an_operator_cannot_change_the_log_level_but_an_admin_can(server: TritonProcess,
                                                                  users: UsersFile) -> None:
    at = open_page(sign_in("olga"), "stack.py")
    assert button(at, "Apply log level").disabled  # type: ignore[attr-defined]
    at = open_page(sign_in("ada"), "stack.py")
    level = button(at, "Apply log level")
    assert not level.disabled  # type: ignore[attr-defined]
    at.number_input(key="stack.log_verbose").set_value(1)
    button(at, "Apply log level").click()  # type: ignore[attr-defined]
    run(at)
    with TritonClient(server.http_url) as client:
        assert client.log_settings()["log_verbose_level"] == 1
        client.update_log_settings(log_verbose_level=0)
    (row,) = [r for r in audit.query() if r.action == "log_level"]
    assert (row.who, row.result) == ("ada", "ok")
