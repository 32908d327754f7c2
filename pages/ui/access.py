"""Sign-in for every page, and the gate each mutating control goes through.

`require_identity()` runs before any page: it decides the sign-in mode once per process
(geadmin.access.identity.resolve_mode), refuses a request through a proxy when there is no
sign-in (and says on every page that there is none), draws the sign-in, token or
new-password form when needed (and stops the run), and keeps the session alive until it has
been idle too long or reaches its age limit. A local or token session survives a reload:
the browser keeps a session cookie naming it (pages/ui/access_browser.py). Pages ask
`allowed(action)` to disable a control (with the reason as its help) and `auth_for(action)`
for the authorization to hand to the core function as `auth=` — the server-side check,
audited when refused; the core refuses to change anything without one.
Both check the session again and read the user's role again (`current()`), so controls
inside fragments, which rerun without the router, see an ended session or a new role too."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from geadmin import settings
from geadmin.access import bootstrap, token
from geadmin.access.guard import Authorization, authorize, for_identity, permission
from geadmin.access.identity import (
    Identity,
    Mode,
    ModeDecision,
    client_address,
    oidc_identity,
    open_request_problem,
    parse_role_map,
    resolve_mode,
)
from geadmin.access.roles import GuardedAction, Role
from geadmin.access.sessions import OidcLogins, Session, local_session, password_tag, refreshed
from geadmin.access.signin import FailedSignIns, VerifySlots, sign_in
from geadmin.access.startup import OIDC_KEYS
from geadmin.access.users import UsersFile
from geadmin.errors import AccessError, ConfigError, GeAdminError, SessionExpiredError, UserAccountError
from pages.ui import access_browser as browser
from pages.ui import keys
from pages.ui.outside_text import defused

TOKEN_PARAM = "token"  # the query parameter of the link `geadmin up` prints (Jupyter's name)


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


@st.cache_resource(show_spinner=False)
def _failed_sign_ins() -> FailedSignIns:
    return FailedSignIns()  # one per process: an attacker's new sessions share it


@st.cache_resource(show_spinner=False)
def _verify_slots() -> VerifySlots:
    return VerifySlots()  # one per process: password checks at once, whoever asks


@st.cache_resource(show_spinner=False)
def _oidc_logins() -> OidcLogins:
    return OidcLogins()  # one per process: every tab of one login shares its limits


def _headers() -> dict[str, str]:
    return {str(k): str(v) for k, v in (st.context.headers or {}).items()}


def require_identity() -> Identity:
    """The signed-in identity; draws the sign-in form and stops the run when there is none."""
    try:
        decision = _decision()
    except GeAdminError as exc:
        st.error(f"The dashboard refuses to run: {defused(str(exc))}", icon=":material/lock:")
        st.stop()
    if decision.mode is Mode.OPEN:
        problem = open_request_problem(_headers())
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
        identity = _oidc_identity()
    elif decision.mode is Mode.TOKEN:
        identity = _token_identity()
    else:
        identity = _local_identity()
    if identity.role < Role.OPERATOR:  # said on the page, not only in each disabled control's tooltip
        st.caption(f":material/visibility: {defused(identity.name)} is a viewer: you can look "
                   "and send test requests; every control that changes a server is off (it needs the "
                   "operator or admin role: ask an admin).")
    st.session_state[keys.ACCESS_IDENTITY] = identity
    browser.remember()
    return identity


def _idle_s() -> float:
    return settings.SESSION_IDLE_MIN.get() * 60


def _max_s() -> float:
    return settings.SESSION_MAX_H.get() * 3600


def _verified(*, touch: bool) -> Identity | None:
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
            _end_session("signed out (in another tab of this browser, or the session ended)")
            return None
        session = stored
    try:
        session = session.touched(time.monotonic(), _idle_s(), _max_s(), touch=touch)
        if session.identity.mode is Mode.LOCAL:
            session = refreshed(session, UsersFile().load_cached())
        elif session.identity.mode is Mode.OIDC:
            _oidc_logins().touch(st.user.to_dict(), time.time(), _idle_s(), _max_s(), touch=touch)
    except (AccessError, ConfigError) as exc:
        why = str(exc) if isinstance(exc, AccessError) else f"signed out: cannot check your account ({exc})"
        _end_session(why)
        return None
    browser.keep(session)
    return session.identity


def _end_session(notice: str) -> None:
    session: Session | None = st.session_state.pop(keys.ACCESS_SESSION, None)
    st.session_state.pop(keys.ACCESS_IDENTITY, None)
    browser.sessions().drop(st.session_state.pop(keys.ACCESS_COOKIE, None))
    st.session_state[keys.ACCESS_NOTICE] = notice
    if session is not None and session.identity.mode is Mode.OIDC and st.user.is_logged_in:
        _oidc_logins().end(st.user.to_dict(), notice)


def _local_identity() -> Identity:
    identity = _verified(touch=True)
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
    client = client_address(st.context.ip_address, _headers(), settings.PROXY_HOPS.get())
    try:
        user = sign_in(UsersFile(), _failed_sign_ins(), name.strip(), password, client=client,
                       slots=_verify_slots())
    except GeAdminError as exc:
        st.error(f"Not signed in: {defused(str(exc))}", icon=":material/lock:")
        return
    browser.keep(local_session(user, time.monotonic()))
    st.rerun()


def _new_password_form(identity: Identity) -> None:
    st.title("Choose a new password")
    st.info(f"{defused(identity.name)}: this password was set for you; choose your own before "
            "going on.")
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
        user = UsersFile().set_password(identity.name, first, auth=for_identity(identity))
    except (ConfigError, UserAccountError) as exc:
        st.error(defused(str(exc)))
        return
    bootstrap.forget_first_password(settings.home(), identity.name)
    session: Session = st.session_state[keys.ACCESS_SESSION]
    browser.keep(replace(  # the same session (its age counts on)
        session, identity=replace(identity, must_change=False), password_tag=password_tag(user)))
    st.rerun()


def _token_identity() -> Identity:
    """The token holder: a session of this browser, or the token from the link `geadmin up`
    printed (taken out of the address bar whatever it held), or from the form."""
    given = st.query_params.get(TOKEN_PARAM)
    if given is not None:  # never left in the address bar, the history or a bookmark, signed in or not
        del st.query_params[TOKEN_PARAM]
    identity = _verified(touch=True)
    if identity is not None:
        return identity
    if given is not None and _token_accepted(given):
        return Identity.token_holder()
    _token_form()
    st.stop()


def _token_accepted(given: str) -> bool:
    client = client_address(st.context.ip_address, _headers(), settings.PROXY_HOPS.get())
    try:
        token.check_token(settings.home(), _failed_sign_ins(), given, client=client)
    except GeAdminError as exc:
        st.error(f"Not signed in: {defused(str(exc))}", icon=":material/lock:")
        return False
    now_s = time.monotonic()
    browser.keep(Session(Identity.token_holder(), now_s, now_s))
    return True


def _token_form() -> None:
    st.title("Sign in")
    notice = st.session_state.pop(keys.ACCESS_NOTICE, None)
    if notice:
        st.info(notice, icon=":material/logout:")
    st.markdown("This dashboard has no users, so it asks for the token it was started with: open the link "
                "`geadmin up` printed (`…/?token=…`), or run `geadmin dashboard --print-url` on its host.")
    with st.form(keys.ACCESS_TOKEN_FORM):
        given = st.text_input("Token", type="password", key=keys.ACCESS_TOKEN)
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted and _token_accepted(given.strip()):
        st.rerun()


def _oidc_identity() -> Identity:
    if not st.user.is_logged_in:
        st.title("Sign in")
        notice = st.session_state.pop(keys.ACCESS_NOTICE, None)
        if notice:
            st.info(notice, icon=":material/logout:")
        st.button("Sign in with your identity provider", type="primary", on_click=st.login)
        st.stop()
    if keys.ACCESS_SESSION in st.session_state:
        identity = _verified(touch=True)
        if identity is not None:
            return identity
        st.logout()  # the idle or age limit ended this login: sign it out of the browser too
        st.stop()
    claims = st.user.to_dict()
    try:  # a new tab or a reload: the login itself may have ended already
        _oidc_logins().touch(claims, time.time(), _idle_s(), _max_s())
        default = settings.OIDC_DEFAULT_ROLE.get()
        identity = oidc_identity(claims, settings.OIDC_ROLES_CLAIM.get(),
                                 parse_role_map(settings.OIDC_ROLE_MAP.get()),
                                 None if default == "none" else Role.parse(default))
    except SessionExpiredError:
        st.logout()
        st.stop()
    except (GeAdminError, ValueError) as exc:
        st.error(f"Not signed in: {defused(str(exc))}", icon=":material/lock:")
        st.button("Sign out", on_click=st.logout)
        st.stop()
    now_s = time.monotonic()
    browser.keep(Session(identity, now_s, now_s))
    return identity


def sidebar(identity: Identity) -> None:
    if identity.mode is Mode.OPEN:
        st.sidebar.caption(":material/lock_open: No sign-in: this dashboard listens on this machine "
                           f"only; you ({defused(identity.name)}) are the admin.")
        return
    st.sidebar.caption(f":material/person: {defused(identity.name)} · {identity.role.label}")
    if st.sidebar.button("Sign out", key=keys.ACCESS_SIGN_OUT):
        _end_session("signed out")
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
    checked = _verified(touch=touch)
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
