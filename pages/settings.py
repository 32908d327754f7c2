"""Settings: every GEADMIN_* variable as this dashboard sees it, the configured Triton servers
(whether each has an admin key, and a warning where the key would travel unencrypted), and how
sign-in is set up. Secrets (admin keys, the OIDC client and cookie secrets) show as set / not set."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from geadmin import settings
from geadmin.access.startup import OIDC_KEYS
from geadmin.access.users import UsersFile
from geadmin.errors import GeAdminError
from geadmin.stack.target import is_stack_server, key_warnings
from pages.ui import access
from pages.ui.context import targets
from pages.ui.outside_text import defused

OIDC_SECRETS = ("client_secret", "cookie_secret")


def render() -> None:
    st.title("Settings")
    st.caption("Set by environment variables (or the same-named flags of the CLI); see the settings "
               "reference, docs/reference/settings.md. Secrets are never shown, only whether they are set.")
    st.dataframe(pd.DataFrame([{
        "variable": s.env_name, "value": s.shown(),
        "default": "" if s.secret else (s.default or ""), "meaning": s.meaning,
    } for s in settings.SETTINGS.values()]), hide_index=True, width="stretch")
    servers()
    sign_in()


def servers() -> None:
    """The configured servers, their endpoints, and whose admin key goes where."""
    st.subheader("Triton servers")
    try:
        known = targets()
        rows = [{"name": t.spec.name, "url": t.spec.url, "gRPC": (urls := t.urls()).grpc, "HTTP": urls.http,
                 "metrics": urls.metrics, "admin key": admin_key_shown(t.spec.admin_key,
                                                                       is_stack_server(t.spec.url, t.stack))}
                for t in known]
    except GeAdminError as exc:
        st.error(f"{defused(str(exc))}\n\n**Fix:** correct the servers settings above.",
                 icon=":material/error:")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption("The admin key goes only to the server it is configured for, and only on Triton's "
               "restricted calls (repository, model config, logging, trace); never on inference, health "
               "or metadata.")
    for warning in key_warnings(known):
        st.warning(warning, icon=":material/lock_open:")


def admin_key_shown(key: str | None, stack: bool) -> str:
    if not key:
        return "not set"
    return "set (the embedded stack's workspace key)" if stack else "set"


def sign_in() -> None:
    st.subheader("Sign-in")
    identity = access.current()
    st.markdown(f"Mode: **{identity.mode.value}** · you are **{defused(identity.name)}** "
                f"({identity.role.label})")
    users = UsersFile()
    try:
        count = len(users.load())
    except GeAdminError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
        count = None
    if count is not None:
        st.caption(f"Local users file: `{users.path}` — {count} user(s)" if users.exists()
                   else f"Local users file: `{users.path}` — not created")
    auth = access.oidc_settings()
    if auth is None:
        st.caption("OpenID Connect: no [auth] section in .streamlit/secrets.toml")
        return
    st.dataframe(pd.DataFrame([{
        "[auth] key": key,
        "value": ("set" if auth.get(key) else "not set") if key in OIDC_SECRETS else str(auth.get(key, "")),
    } for key in OIDC_KEYS]), hide_index=True, width="stretch")
