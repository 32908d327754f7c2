"""The selected server and its client, shared by every page."""

from __future__ import annotations

import streamlit as st

from geadmin.logsource import log_source_for  # noqa: F401 - re-exported for the pages
from geadmin.servers import ServerSpec, load_servers
from geadmin.triton import TritonClient
from pages.ui import keys


@st.cache_resource(show_spinner=False)
def client_for(url: str, admin_key: str | None) -> TritonClient:
    """One facade per endpoint; it is thread-safe, so sessions can share it."""
    return TritonClient(url, admin_key=admin_key)


def servers() -> list[ServerSpec]:
    return load_servers()


def selected_server() -> ServerSpec:
    specs = servers()
    names = [spec.name for spec in specs]
    current = st.session_state.get(keys.SERVER)
    if current not in names:
        st.session_state[keys.SERVER] = names[0]
    return next(spec for spec in specs if spec.name == st.session_state[keys.SERVER])


def server_picker() -> None:
    """Sidebar selector; shown only when there is more than one server to pick from."""
    specs = servers()
    if len(specs) > 1:
        selected_server()
        st.sidebar.selectbox("Triton server", [s.name for s in specs], key=keys.SERVER)
    st.sidebar.caption(f"Triton: `{selected_server().url}`")


def selected_client() -> TritonClient:
    spec = selected_server()
    return client_for(spec.url, spec.admin_key)
