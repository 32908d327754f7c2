"""The selected server, its client and its log, shared by every page."""

from __future__ import annotations

import streamlit as st

from geadmin.stack.target import Target, configured_targets, live_stack
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile, LogSource
from pages.ui import keys


@st.cache_resource(show_spinner=False)
def client_for(url: str, admin_key: str | None) -> TritonClient:
    """One facade per endpoint; it is thread-safe, so sessions can share it."""
    return TritonClient(url, admin_key=admin_key)


@st.cache_resource(show_spinner=False)
def _log_file(path: str) -> LocalLogFile:
    """One reader per log file, shared: it remembers how far it read (O(new bytes) per refresh)."""
    return LocalLogFile(path)


def log_for(target: Target) -> LogSource | None:
    return _log_file(str(target.log_path)) if target.log_path else None


def targets() -> list[Target]:
    """Every configured server, each with the log and repository that explain it."""
    return configured_targets(live_stack())


def selected_target() -> Target:
    known = targets()
    names = [t.spec.name for t in known]
    if st.session_state.get(keys.SERVER) not in names:
        st.session_state[keys.SERVER] = names[0]
    return next(t for t in known if t.spec.name == st.session_state[keys.SERVER])


def server_picker() -> None:
    """Sidebar selector; shown only when there is more than one server to pick from."""
    known = targets()
    if len(known) > 1:
        selected_target()
        st.sidebar.selectbox("Triton server", [t.spec.name for t in known], key=keys.SERVER)
    target = selected_target()
    st.sidebar.caption(f"Triton: `{target.spec.url}`")
    for note in target.notes:
        st.sidebar.caption(f":material/info: {note}")


def selected_client() -> TritonClient:
    spec = selected_target().spec
    return client_for(spec.url, spec.admin_key)
