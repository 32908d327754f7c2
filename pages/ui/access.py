"""Sign-in for every page, and the gate each mutating control goes through.

`require_identity()` runs before any page: it decides the sign-in mode once per process
(geadmin.access.identity.resolve_mode), draws the sign-in or new-password form when needed
(and stops the run), and keeps the session alive until it has been idle too long. Pages ask
`allowed(action)` to disable a control (with the reason as its help) and `actor_for(action)`
for the actor to hand to the core function — the server-side check, audited when refused."""

from __future__ import annotations

import time
from collections.abc import Mapping

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from geadmin import settings
from geadmin.access import bootstrap
from geadmin.access.guard import authorize, permission
from geadmin.access.identity import (
    Identity,
    Mode,
    ModeDecision,
    Session,
    oidc_identity,
    parse_role_map,
    resolve_mode,
)
from geadmin.access.roles import Action, Role
from geadmin.access.startup import OIDC_KEYS
from geadmin.access.users import FailedSignIns, UsersFile, sign_in
from geadmin.audit import Actor
from geadmin.errors import AccessError, ConfigError, GeAdminError
from pages.ui import keys


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
    decision = resolve_mode(settings.get("AUTH"), address=st.get_option("server.address"),
                            users_file_exists=users.exists(), oidc_configured=_oidc_configured(),
                            users_file=str(users.path))
    if decision.bootstrap:
        first = bootstrap.create_first_admin(users, settings.home())
        if first is not None:
            print(first.announcement(), flush=True)  # once, to the dashboard's log
    return decision


@st.cache_resource(show_spinner=False)
def _failed_sign_ins() -> FailedSignIns:
    return FailedSignIns()  # one per process: an attacker's new sessions share it


def require_identity() -> Identity:
    """The signed-in identity; draws the sign-in form and stops the run when there is none."""
    try:
        decision = _decision()
    except GeAdminError as exc:
        st.error(f"The dashboard refuses to run: {exc}", icon=":material/lock:")
        st.stop()
    if decision.mode is Mode.OPEN:
        identity = Identity.local_admin()
    elif decision.mode is Mode.OIDC:
        identity = _oidc_identity()
    else:
        identity = _local_identity()
    st.session_state[keys.ACCESS_IDENTITY] = identity
    return identity


def _idle_s() -> float:
    return float(settings.get("SESSION_IDLE_MIN")) * 60


def _keep_alive() -> Identity | None:
    session: Session | None = st.session_state.get(keys.ACCESS_SESSION)
    if session is None:
        return None
    try:
        session = session.touched(time.monotonic(), _idle_s())
    except AccessError as exc:
        del st.session_state[keys.ACCESS_SESSION]
        st.session_state[keys.ACCESS_NOTICE] = str(exc)
        return None
    st.session_state[keys.ACCESS_SESSION] = session
    return session.identity


def _local_identity() -> Identity:
    identity = _keep_alive()
    if identity is None:
        _sign_in_form()
        st.stop()
    if identity.must_change:
        _new_password_form(identity)
        st.stop()
    return identity


def _sign_in_form() -> None:
    st.title("Sign in")
    notice = st.session_state.pop(keys.ACCESS_NOTICE, None)
    if notice:
        st.info(notice, icon=":material/logout:")
    with st.form(keys.ACCESS_FORM):
        name = st.text_input("User", key=keys.ACCESS_USER)
        password = st.text_input("Password", type="password", key=keys.ACCESS_PASSWORD)
        submitted = st.form_submit_button("Sign in", type="primary")
    if not submitted:
        return
    try:
        user = sign_in(UsersFile(), _failed_sign_ins(), name.strip(), password)
    except GeAdminError as exc:
        st.error(f"Not signed in: {exc}", icon=":material/lock:")
        return
    identity = Identity(user.name, user.role, Mode.LOCAL, must_change=user.must_change)
    st.session_state[keys.ACCESS_SESSION] = Session(identity, time.monotonic())
    st.rerun()


def _new_password_form(identity: Identity) -> None:
    st.title("Choose a new password")
    st.info(f"{identity.name}: this password was set for you; choose your own before going on.")
    with st.form(keys.ACCESS_NEW_PASSWORD_FORM):
        first = st.text_input("New password", type="password", key=keys.ACCESS_NEW_PASSWORD)
        again = st.text_input("Again", type="password", key=keys.ACCESS_NEW_PASSWORD_AGAIN)
        submitted = st.form_submit_button("Set password", type="primary")
    if not submitted:
        return
    if first != again:
        st.error("The two passwords differ.")
        return
    try:
        UsersFile().set_password(identity.name, first)
    except ConfigError as exc:
        st.error(str(exc))
        return
    bootstrap.forget_first_password(settings.home())
    changed = Identity(identity.name, identity.role, identity.mode)
    st.session_state[keys.ACCESS_SESSION] = Session(changed, time.monotonic())
    st.rerun()


def _oidc_identity() -> Identity:
    if not st.user.is_logged_in:
        st.title("Sign in")
        st.button("Sign in with your identity provider", type="primary", on_click=st.login)
        st.stop()
    identity = _keep_alive()
    if identity is None:
        try:
            default = settings.get("OIDC_DEFAULT_ROLE")
            identity = oidc_identity(st.user.to_dict(), settings.get("OIDC_ROLES_CLAIM"),
                                     parse_role_map(settings.get("OIDC_ROLE_MAP")),
                                     None if default == "none" else Role.parse(default))
        except (GeAdminError, ValueError) as exc:
            st.error(f"Not signed in: {exc}", icon=":material/lock:")
            st.button("Sign out", on_click=st.logout)
            st.stop()
        st.session_state[keys.ACCESS_SESSION] = Session(identity, time.monotonic())
    return identity


def sidebar(identity: Identity) -> None:
    if identity.mode is Mode.OPEN:
        st.sidebar.caption(":material/lock_open: No sign-in: this dashboard listens on this machine "
                           f"only; you ({identity.name}) are the admin.")
        return
    st.sidebar.caption(f":material/person: {identity.name} · {identity.role.label}")
    if st.sidebar.button("Sign out", key=keys.ACCESS_SIGN_OUT):
        st.session_state.pop(keys.ACCESS_SESSION, None)
        if identity.mode is Mode.OIDC:
            st.logout()
        st.rerun()


def current() -> Identity:
    identity: Identity | None = st.session_state.get(keys.ACCESS_IDENTITY)
    if identity is None:  # a page run without the router (never in the app)
        raise AccessError("not signed in")
    return identity


def allowed(action: Action) -> tuple[bool, str]:
    """(enabled, help) for a control that performs `action`."""
    ok, reason = permission(current(), action)
    return ok, reason


def actor_for(action: Action, *, model: str = "", server: str = "") -> Actor:
    """The audited actor for `action`; AccessDeniedError (audited) when the role may not."""
    return authorize(current(), action, model=model, server=server)
