"""Sign-in, one way per mode, each drawing its form and stopping the run until someone is
signed in: a local user's name and password (then a new password when one was set for them),
the token of the link `geadmin up` printed, or the identity provider's login (OIDC).
"""

from __future__ import annotations

import time
from dataclasses import replace

import streamlit as st

from geadmin import settings
from geadmin.access import bootstrap, token
from geadmin.access.guard import for_identity
from geadmin.access.identity import Identity, client_address, oidc_identity, parse_role_map
from geadmin.access.roles import Role
from geadmin.access.sessions import Session, local_session, password_tag
from geadmin.access.signin import sign_in
from geadmin.access.users import UsersFile
from geadmin.errors import ConfigError, GeAdminError, SessionExpiredError, UserAccountError
from pages.ui import access_browser as browser
from pages.ui import access_session as session
from pages.ui import keys
from pages.ui.outside_text import defused

TOKEN_PARAM = "token"  # the query parameter of the link `geadmin up` prints (Jupyter's name)


def signed_in_local() -> Identity:
    identity = session.verified(touch=True)
    if identity is None:
        _sign_in_form()
        st.stop()
    if identity.must_change:
        _new_password_form(identity)
        st.stop()
    return identity


def _sign_in_form() -> None:
    _sign_in_title()
    with st.form(keys.ACCESS_FORM):
        name = st.text_input("User", key=keys.ACCESS_USER)
        password = st.text_input("Password", type="password", key=keys.ACCESS_PASSWORD)
        submitted = st.form_submit_button("Sign in", type="primary")
    if not submitted:
        return
    client = client_address(st.context.ip_address, session.request_headers(), settings.PROXY_HOPS.get())
    try:
        user = sign_in(UsersFile(), session.failed_sign_ins(), name.strip(), password, client=client,
                       slots=session.verify_slots())
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


def signed_in_token() -> Identity:
    """The token holder: a session of this browser, or the token from the link `geadmin up`
    printed (taken out of the address bar whatever it held), or from the form."""
    given = st.query_params.get(TOKEN_PARAM)
    if given is not None:  # never left in the address bar, the history or a bookmark, signed in or not
        del st.query_params[TOKEN_PARAM]
    identity = session.verified(touch=True)
    if identity is not None:
        return identity
    if given is not None and _token_accepted(given):
        return Identity.token_holder()
    _token_form()
    st.stop()


def _token_accepted(given: str) -> bool:
    client = client_address(st.context.ip_address, session.request_headers(), settings.PROXY_HOPS.get())
    try:
        token.check_token(settings.home(), session.failed_sign_ins(), given, client=client)
    except GeAdminError as exc:
        st.error(f"Not signed in: {defused(str(exc))}", icon=":material/lock:")
        return False
    now_s = time.monotonic()
    browser.keep(Session(Identity.token_holder(), now_s, now_s))
    return True


def _token_form() -> None:
    _sign_in_title()
    st.markdown("This dashboard has no users, so it asks for the token it was started with: open the link "
                "`geadmin up` printed (`…/?token=…`), or run `geadmin dashboard --print-url` on its host.")
    with st.form(keys.ACCESS_TOKEN_FORM):
        given = st.text_input("Token", type="password", key=keys.ACCESS_TOKEN)
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted and _token_accepted(given.strip()):
        st.rerun()


def signed_in_oidc() -> Identity:
    if not st.user.is_logged_in:
        _sign_in_title()
        st.button("Sign in with your identity provider", type="primary", on_click=st.login)
        st.stop()
    if keys.ACCESS_SESSION in st.session_state:
        identity = session.verified(touch=True)
        if identity is not None:
            return identity
        st.logout()  # the idle or age limit ended this login: sign it out of the browser too
        st.stop()
    claims = st.user.to_dict()
    try:  # a new tab or a reload: the login itself may have ended already
        session.oidc_logins().touch(claims, time.time(), session.idle_s(), session.max_s())
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


def _sign_in_title() -> None:
    """The title of every sign-in form, with why the last session ended (once)."""
    st.title("Sign in")
    notice = st.session_state.pop(keys.ACCESS_NOTICE, None)
    if notice:
        st.info(notice, icon=":material/logout:")
