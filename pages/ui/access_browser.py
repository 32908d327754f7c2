"""A sign-in that survives a reload: the browser's side of geadmin.access.sessions.BrowserSessions.

Streamlit keeps `st.session_state` per connection, and a reload or a deep link opens a new
one. After a local or token sign-in the page gives the browser a session cookie (a random
id, for this browser session only, this dashboard's port, `SameSite=Strict`) naming the
session this process keeps; a new connection reads the cookie from its handshake
(`st.context.cookies`) and finds the session, whose idle and age limits went on counting.
The table is the truth for every tab of the browser: activity in one counts for all, and a
sign-out in one ends all."""

from __future__ import annotations

import streamlit as st

from geadmin.access.identity import Mode
from geadmin.access.sessions import BrowserSessions, Session, session_cookie_name
from pages.ui import keys


@st.cache_resource(show_spinner=False)
def sessions() -> BrowserSessions:
    return BrowserSessions()  # one per process: a reload finds its session here


def cookie_name() -> str:
    return session_cookie_name(st.get_option("server.port"))


def cookie() -> str | None:
    """The session cookie this browser sent when the page was (re)loaded."""
    value = st.context.cookies.get(cookie_name())
    return value if isinstance(value, str) else None  # AppTest has no browser, so no cookies


def keep(session: Session) -> None:
    """This tab's session, and the browser's (a reload or another tab finds it there)."""
    st.session_state[keys.ACCESS_SESSION] = session
    if session.identity.mode in (Mode.LOCAL, Mode.TOKEN):
        cookie_id = st.session_state.get(keys.ACCESS_COOKIE) or BrowserSessions.new_id()
        st.session_state[keys.ACCESS_COOKIE] = cookie_id
        sessions().save(cookie_id, session)


def remember() -> None:
    """Give the browser the session cookie when it does not have it yet: no expiry (gone when
    the browser closes), `Secure` over HTTPS. The id is ours (URL-safe base64), so it is safe
    to write into the script; it names a session whose limits end it whatever the cookie."""
    cookie_id: str | None = st.session_state.get(keys.ACCESS_COOKIE)
    if not cookie_id or cookie() == cookie_id:
        return
    st.html(f"""<script>document.cookie = "{cookie_name()}={cookie_id}; Path=/; SameSite=Strict" +
            (window.location.protocol === "https:" ? "; Secure" : "");</script>""", width=1,
            unsafe_allow_javascript=True)
