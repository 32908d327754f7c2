"""Sign-in for every page, and the gate each mutating control goes through.

`require_identity()` runs before any page: it decides the sign-in mode once per process
(geadmin.access.identity.resolve_mode), refuses a request through a proxy when there is no
sign-in (and says on every page that there is none), draws the sign-in, token or
new-password form when needed (and stops the run: pages/ui/access_sign_in.py), and keeps the
session alive until it has been idle too long or reaches its age limit
(pages/ui/access_session.py). A local or token session survives a reload: the browser keeps a
session cookie naming it (pages/ui/access_browser.py). Pages ask
`allowed(action)` to disable a control (with the reason as its help) and `auth_for(action)`
for the authorization to hand to the core function as `auth=` — the server-side check,
audited when refused; the core refuses to change anything without one.
Both check the session again and read the user's role again (`current()`), so controls
inside fragments, which rerun without the router, see an ended session or a new role too."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from geadmin import settings
from geadmin.access import bootstrap, token
from geadmin.access.guard import Authorization, authorize, permission
from geadmin.access.identity import (
    Identity,
    Mode,
    ModeDecision,
    open_request_problem,
    resolve_mode,
)
from geadmin.access.roles import GuardedAction, Role
from geadmin.access.startup import OIDC_KEYS
from geadmin.access.users import UsersFile
from geadmin.errors import AccessError, GeAdminError
from pages.ui import access_browser as browser
from pages.ui import access_session as session
from pages.ui import access_sign_in as sign_in
from pages.ui import keys
from pages.ui.outside_text import defused


def oidc_settings() -> Mapping[str, object] | None:
    """Streamlit's `[auth]` secrets, if any (for display: the caller hides the secrets)."""
    try:
        auth = st.secrets.get("auth")
    except (FileNotFoundError, StreamlitSecretNotFoundError):  # no secrets.toml, or a broken one
        return None
    return auth if isinstance(auth, Mapping) else None


def _oidc_configured() -> bool:
    auth = oidc_settings()
    return auth is not None and all(k in auth for k in OIDC_KEYS)


@st.cache_resource(show_spinner=False)
def _decision() -> ModeDecision:
    """Once per dashboard process; a first admin is created here when the mode asks for it."""
    users = UsersFile()
    decision = resolve_mode(settings.AUTH.get(), address=st.get_option("server.address"),
                            users_file_exists=users.exists(), oidc_configured=_oidc_configured(),
                            users_file=str(users.path), sign_in_required=settings.REQUIRE_SIGN_IN.get())
    if decision.bootstrap:
        first = bootstrap.create_first_admin(users, settings.home())
        if first is not None:
            print(first.announcement(), flush=True)  # the file's path, never the password
    if decision.mode is Mode.TOKEN:
        _, created = token.ensure_token(settings.home())  # started without `geadmin up`
        if created:
            print(f"geadmin: the dashboard asks for a sign-in token, written to "
                  f"{token.token_file(settings.home())}; `geadmin dashboard --print-url` prints the link",
                  flush=True)  # never the token itself: logs are copied around
    return decision


def require_identity() -> Identity:
    """The signed-in identity; draws the sign-in form and stops the run when there is none."""
    try:
        decision = _decision()
    except GeAdminError as exc:
        st.error(f"The dashboard refuses to run: {defused(str(exc))}", icon=":material/lock:")
        st.stop()
    if decision.mode is Mode.OPEN:
        problem = open_request_problem(session.request_headers())
        if problem:
            st.error(f"The dashboard refuses this request: {defused(str(problem))}. To serve it through a "
                     "proxy or under another name, configure sign-in (GEADMIN_AUTH=local or oidc, see "
                     "docs/security.md, 'Sign-in').", icon=":material/lock:")
            st.stop()
        identity = Identity.local_admin()
        st.caption(f":material/lock_open: No sign-in (GEADMIN_AUTH=open): whoever opens this page on this "
                   f"machine acts as the admin ({defused(identity.name)}). Unset GEADMIN_AUTH to "
                   "sign in with a token.")
    elif decision.mode is Mode.OIDC:
        identity = sign_in.signed_in_oidc()
    elif decision.mode is Mode.TOKEN:
        identity = sign_in.signed_in_token()
    else:
        identity = sign_in.signed_in_local()
    if identity.role < Role.OPERATOR:  # said on the page, not only in each disabled control's tooltip
        st.caption(f":material/visibility: {defused(identity.name)} is a viewer: you can look "
                   "and send test requests; every control that changes a server is off (it needs the "
                   "operator or admin role: ask an admin).")
    st.session_state[keys.ACCESS_IDENTITY] = identity
    browser.remember()
    return identity


def sidebar(identity: Identity) -> None:
    if identity.mode is Mode.OPEN:
        st.sidebar.caption(":material/lock_open: No sign-in: this dashboard listens on this machine "
                           f"only; you ({defused(identity.name)}) are the admin.")
        return
    st.sidebar.caption(f":material/person: {defused(identity.name)} · {identity.role.label}")
    if st.sidebar.button("Sign out", key=keys.ACCESS_SIGN_OUT):
        session.end_session("signed out")
        if identity.mode is Mode.OIDC:
            st.logout()
        st.rerun()


def current(*, touch: bool = False) -> Identity:
    """The signed-in identity, checked again: a control inside a fragment (which reruns
    without the router) sees an ended session too, and then the whole app reruns to the
    sign-in form; a local user's role is the one in the users file now."""
    identity: Identity | None = st.session_state.get(keys.ACCESS_IDENTITY)
    if identity is None:  # a page run without the router (never in the app)
        raise AccessError("not signed in")
    if identity.mode is Mode.OPEN:
        return identity
    checked = session.verified(touch=touch)
    if checked is None:
        st.rerun(scope="app")
    st.session_state[keys.ACCESS_IDENTITY] = checked
    return checked


def allowed(action: GuardedAction) -> tuple[bool, str]:
    """(enabled, help) for a control that performs `action`."""
    ok, reason = permission(current(), action)
    return ok, reason


def auth_for(action: GuardedAction, *, model: str = "", server: str = "") -> Authorization:
    """The authorization for `action` (its actor is audited); AccessDeniedError (audited) when
    the role may not.
    Counts as activity; an ended session goes back to the sign-in form instead."""
    return authorize(current(touch=True), action, model=model, server=server)
