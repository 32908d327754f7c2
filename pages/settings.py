"""Settings: every GEADMIN_* variable as this dashboard sees it, and how sign-in is set up.
Secrets (the Triton admin key, the OIDC client and cookie secrets) show as set / not set."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from geadmin import settings
from geadmin.access.startup import OIDC_KEYS
from geadmin.access.users import UsersFile
from geadmin.errors import GeAdminError
from pages.ui import access

OIDC_SECRETS = ("client_secret", "cookie_secret")


def render() -> None:
    st.title("Settings")
    st.caption("Set by environment variables (or the same-named flags of the CLI); see the README's "
               "settings table. Secrets are never shown, only whether they are set.")
    st.dataframe(pd.DataFrame([{
        "variable": s.env_name, "value": settings.shown(name),
        "default": "" if s.secret else (s.default or ""), "meaning": s.meaning,
    } for name, s in settings.SETTINGS.items()]), hide_index=True, width="stretch")
    sign_in()


def sign_in() -> None:
    st.subheader("Sign-in")
    identity = access.current()
    st.markdown(f"Mode: **{identity.mode.value}** · you are **{identity.name}** ({identity.role.label})")
    users = UsersFile()
    try:
        count = len(users.load())
    except GeAdminError as exc:
        st.error(str(exc), icon=":material/error:")
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
