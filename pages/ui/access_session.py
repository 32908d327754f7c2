"""A browser's signed-in session: checked against the idle and age limits (and, for a local
user, the users file) on every run, shared by the tabs of one browser through its cookie
(pages/ui/access_browser.py), and ended with the reason the next sign-in form shows.

Also the per-process limits every sign-in shares: failed sign-ins, password checks at once,
OIDC logins.
"""

from __future__ import annotations

import time

import streamlit as st

from geadmin import settings
from geadmin.access.identity import Identity, Mode
from geadmin.access.sessions import OidcLogins, Session, refreshed
from geadmin.access.signin import FailedSignIns, VerifySlots
from geadmin.access.users import UsersFile
from geadmin.errors import AccessError, ConfigError
from pages.ui import access_browser as browser
from pages.ui import keys


@st.cache_resource(show_spinner=False)
def failed_sign_ins() -> FailedSignIns:
    return FailedSignIns()  # one per process: an attacker's new sessions share it


@st.cache_resource(show_spinner=False)
def verify_slots() -> VerifySlots:
    return VerifySlots()  # one per process: password checks at once, whoever asks


@st.cache_resource(show_spinner=False)
def oidc_logins() -> OidcLogins:
    return OidcLogins()  # one per process: every tab of one login shares its limits


def request_headers() -> dict[str, str]:
    return {str(k): str(v) for k, v in (st.context.headers or {}).items()}


def idle_s() -> float:
    return settings.SESSION_IDLE_MIN.get() * 60


def max_s() -> float:
    return settings.SESSION_MAX_H.get() * 3600


def verified(*, touch: bool) -> Identity | None:
    """The session's identity after the idle and age limits, with its role read again (local
    users); None, with the reason kept for the sign-in form, when the session has ended.
    `touch=False`: a check that is not activity (a fragment refreshing itself)."""
    session: Session | None = st.session_state.get(keys.ACCESS_SESSION)
    cookie_id: str | None = st.session_state.get(keys.ACCESS_COOKIE)
    if session is None:  # a new browser session, or a reload: the cookie may name a session
        cookie_id = browser.cookie()
        session = browser.sessions().get(cookie_id)
        if session is None or session.identity.mode not in (Mode.LOCAL, Mode.TOKEN):
            return None
        st.session_state[keys.ACCESS_COOKIE] = cookie_id
    elif cookie_id is not None:  # the browser's tabs share it: their activity counts, their sign-out too
        stored = browser.sessions().get(cookie_id)
        if stored is None:
            end_session("signed out (in another tab of this browser, or the session ended)")
            return None
        session = stored
    try:
        session = session.touched(time.monotonic(), idle_s(), max_s(), touch=touch)
        if session.identity.mode is Mode.LOCAL:
            session = refreshed(session, UsersFile().load_cached())
        elif session.identity.mode is Mode.OIDC:
            oidc_logins().touch(st.user.to_dict(), time.time(), idle_s(), max_s(), touch=touch)
    except (AccessError, ConfigError) as exc:
        why = str(exc) if isinstance(exc, AccessError) else f"signed out: cannot check your account ({exc})"
        end_session(why)
        return None
    browser.keep(session)
    return session.identity


def end_session(notice: str) -> None:
    session: Session | None = st.session_state.pop(keys.ACCESS_SESSION, None)
    st.session_state.pop(keys.ACCESS_IDENTITY, None)
    browser.sessions().drop(st.session_state.pop(keys.ACCESS_COOKIE, None))
    st.session_state[keys.ACCESS_NOTICE] = notice
    if session is not None and session.identity.mode is Mode.OIDC and st.user.is_logged_in:
        oidc_logins().end(st.user.to_dict(), notice)
