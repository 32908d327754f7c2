"""The dashboard's sign-in under pressure, through AppTest (no Triton needed: the app points
at a closed port). A demoted, removed or re-keyed user loses rights at the next click; a
session ends at its absolute lifetime; controls inside fragments see both; too many password
checks at once get a clear "busy"; the first admin's password never reaches the log; the
image's GEADMIN_REQUIRE_SIGN_IN refuses a dashboard without sign-in even on loopback."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.access.bootstrap import PASSWORD_FILE
from geadmin.access.roles import Role
from geadmin.access.sessions import local_session
from geadmin.access.users import UsersFile
from geadmin.stack.processes import free_port
from tests.support.apptest import APP, button, change_session, isolate, run
from tests.support.auth import admin_auth

PASSWORDS = {"vic": "viewer password 1", "olga": "operator password 1", "ada": "admin password 12"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    for name in ("SESSION_IDLE_MIN", "SESSION_MAX_H", "REQUIRE_SIGN_IN", "PROXY_HOPS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_AUTH", "local")
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(tmp_path / "users.toml"))
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    st.cache_resource.clear()  # the sign-in mode, the failure table and the slots are per process
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


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def sign_in(name: str, at: AppTest | None = None) -> AppTest:
    at = at or run(AppTest.from_file(APP, default_timeout=60))
    assert titles(at) == ["Sign in"]
    at.text_input(key="access.user").input(name)
    at.text_input(key="access.password").input(PASSWORDS[name])
    button(at, "Sign in").click()  # type: ignore[attr-defined]
    return run(at)


def signed_in_as(at: AppTest) -> list[str]:
    return [c.value for c in at.sidebar.caption]


def test_a_demoted_user_has_the_new_role_at_the_next_click(users: UsersFile) -> None:
    at = sign_in("olga")
    assert any("olga · operator" in c for c in signed_in_as(at))
    # `geadmin users role olga viewer`, while she is signed in
    users.set_role("olga", Role.VIEWER, auth=admin_auth())
    run(at)
    assert any("olga · viewer" in c for c in signed_in_as(at))
    assert at.session_state["access.identity"].role is Role.VIEWER


@pytest.mark.parametrize(("change", "notice"), [
    (lambda users: users.remove("olga", auth=admin_auth()), "the user 'olga' no longer exists"),
    (lambda users: users.set_password("olga", "reset by an admin!", auth=admin_auth()),
     "the password of 'olga' was changed"),
])
def test_a_removed_or_re_keyed_user_is_signed_out_at_the_next_click(users: UsersFile, change: object,
                                                                     notice: str) -> None:
    at = sign_in("olga")
    change(users)  # type: ignore[operator]
    run(at)
    assert titles(at) == ["Sign in"]
    assert any(notice in i.value for i in at.info)


def test_an_active_session_ends_at_its_absolute_lifetime(users: UsersFile,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_SESSION_MAX_H", "1")
    at = sign_in("olga")
    now = time.monotonic()
    change_session(at, started_s=now - 3601, last_seen_s=now)  # active
    run(at)
    assert titles(at) == ["Sign in"]
    assert any("sessions last at most 1 hours (GEADMIN_SESSION_MAX_H)" in i.value for i in at.info)


def fragment_app() -> None:
    """A control inside a fragment, as the Overview and Stack pages have them."""
    import streamlit as st

    from geadmin.access.roles import GuardedAction
    from pages.ui import access, keys

    @st.fragment
    def controls() -> None:
        ok, why = access.allowed(GuardedAction.LOAD)
        st.button("Load", disabled=not ok, help=why or None)

    if keys.ACCESS_IDENTITY in st.session_state:
        controls()
    else:
        st.title("Signed out")
        st.info(st.session_state.get(keys.ACCESS_NOTICE, ""))


def test_controls_inside_fragments_see_a_new_role_and_an_ended_session(
        users: UsersFile, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_SESSION_IDLE_MIN", "1")
    session = local_session(users.load()["olga"], time.monotonic())
    at = AppTest.from_function(fragment_app, default_timeout=30)
    at.session_state["access.identity"] = session.identity
    at.session_state["access.session"] = session
    run(at)
    assert not button(at, "Load").disabled  # type: ignore[attr-defined]
    users.set_role("olga", Role.VIEWER, auth=admin_auth())
    run(at)
    load = button(at, "Load")
    assert load.disabled and "load needs the operator role; olga is viewer" in load.help  # type: ignore[attr-defined]
    change_session(at, last_seen_s=time.monotonic() - 120)
    run(at)
    assert titles(at) == ["Signed out"] and not any(b.label == "Load" for b in at.button)
    assert any("signed out after 1 minutes without activity" in i.value for i in at.info)


def test_too_many_password_checks_at_once_get_a_busy_answer(users: UsersFile) -> None:
    at = run(AppTest.from_file(APP, default_timeout=60))
    from pages.ui import access_session  # the app's own slots: the same process-wide resource

    slots = access_session.verify_slots()
    with contextlib.ExitStack() as held:
        for _ in range(slots.slots):  # every slot taken by other sign-ins
            held.enter_context(slots.slot())
        at = sign_in("olga", at)
        assert titles(at) == ["Sign in"]
        assert any(f"checking {slots.slots} other sign-ins right now: try again" in e.value for e in at.error)
    at = sign_in("olga", at)  # slots free again; the busy answer did not count as a failure
    assert any("olga · operator" in c for c in signed_in_as(at))


def test_the_first_admin_password_is_never_printed(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    at = run(AppTest.from_file(APP, default_timeout=60))  # no users file yet: GEADMIN_AUTH=local
    assert titles(at) == ["Sign in"]
    password_file = tmp_path / "home" / PASSWORD_FILE
    password = password_file.read_text().strip()
    out = capsys.readouterr()
    printed = out.out + out.err
    assert "created the first dashboard user 'admin'" in printed and str(password_file) in printed
    assert password not in printed


@pytest.mark.parametrize("auth", ["auto", "open"])
def test_with_require_sign_in_a_loopback_dashboard_refuses_to_run_without_sign_in(
        auth: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_AUTH", auth)
    monkeypatch.setenv("GEADMIN_REQUIRE_SIGN_IN", "1")  # as the dashboard image sets it
    at = run(AppTest.from_file(APP, default_timeout=60))  # AppTest binds nothing: 127.0.0.1
    (error,) = at.error
    assert error.value.startswith("The dashboard refuses to run:")
    assert "GEADMIN_REQUIRE_SIGN_IN is set" in error.value and "geadmin users add" in error.value
    assert not at.title and not at.dataframe


def model_file_uploader(at: AppTest) -> object:
    (uploader,) = [u for u in at.get("file_uploader") if u.proto.label.startswith("Model file")]
    return uploader.proto


@pytest.mark.parametrize(("name", "may_upload"), [("olga", False), ("ada", True)])
def test_only_an_admin_may_upload_a_model_py(name: str, may_upload: bool, users: UsersFile, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo").mkdir()
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(tmp_path / "repo"))
    at = sign_in(name)
    at.switch_page("new_model.py")
    run(at)
    at.selectbox(key="new_model.template").set_value("python")
    run(at)
    uploader = model_file_uploader(at)
    assert uploader.label == "Model file → 1/model.py"
    assert uploader.disabled is not may_upload
    if not may_upload:
        assert "upload_code needs the admin role; olga is operator" in uploader.help
