"""The selected server, its client and its log, shared by every page.

Clients exist only for configured servers and their known endpoints (`client_for` takes a
configured Target, never a typed address), one per server and transport, so no input can
make the dashboard call another host or leave a client behind per address tried."""

from __future__ import annotations

import streamlit as st

from geadmin import settings
from geadmin.domain import Transport
from geadmin.stack.target import Target, configured_targets, live_stack
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile, LogSource
from pages.ui import keys


@st.cache_resource(show_spinner=False)
def _server_client(name: str, url: str, admin_key: str | None, load_timeout_s: float) -> TritonClient:
    """One facade per configured server and endpoint; thread-safe, so sessions share it."""
    return TritonClient(url, admin_key=admin_key, load_timeout_s=load_timeout_s)


def client_for(target: Target, transport: Transport | None = None) -> TritonClient:
    """The client of a configured server, over `transport` (default: its own URL's) at the
    endpoint geadmin.stack.target.server_urls knows for it."""
    spec = target.spec
    url = spec.url if transport is None else target.urls().url(transport)
    return _server_client(spec.name, url, spec.admin_key, settings.LOAD_TIMEOUT_S.get())


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
    return client_for(selected_target())
