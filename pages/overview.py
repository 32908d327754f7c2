"""Overview: is each server up, which models are not READY, and why."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import streamlit as st

from geadmin import models
from geadmin.errors import GeAdminError
from geadmin.overview import ServerSnapshot, Triage, is_idle, take_snapshot, triage
from pages.ui import keys
from pages.ui.context import client_for, log_source_for, selected_client, selected_server, servers

REFRESH_S = 5


def render() -> None:
    st.title("Overview")
    live_overview()
    log_settings()


@st.fragment(run_every=REFRESH_S)
def live_overview() -> None:
    try:
        specs = servers()
    except GeAdminError as exc:  # the servers file changed under us
        st.error(f"geadmin is misconfigured: {exc}")
        return
    # In parallel: one hung server must not hold up the others' refresh.
    clients = [(spec.name, client_for(spec.url, spec.admin_key)) for spec in specs]
    with ThreadPoolExecutor(max_workers=min(8, len(clients))) as pool:
        snapshots = list(pool.map(lambda named: take_snapshot(*named), clients))
    if len(snapshots) > 1:
        servers_table(snapshots)
    selected = selected_server().name
    current = next(s for s in snapshots if s.name == selected)
    server_detail(current, remember(current))


def remember(snapshot: ServerSnapshot) -> ServerSnapshot | None:
    """Keep the last snapshot that had data, so an outage does not blank the page."""
    last_good: dict[str, ServerSnapshot] = st.session_state.setdefault(keys.OVERVIEW_LAST_GOOD, {})
    if snapshot.reachable and not snapshot.error:
        last_good[snapshot.name] = snapshot
    return last_good.get(snapshot.name)


def servers_table(snapshots: list[ServerSnapshot]) -> None:
    rows = [
        {
            "server": s.name,
            "url": s.url,
            "status": s.status,
            "version": s.info.version if s.info else "",
            "models": len(s.models),
            "not ready": len(s.not_ready),
        }
        for s in snapshots
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def server_detail(current: ServerSnapshot, last_good: ServerSnapshot | None) -> None:
    shown = current
    if not current.reachable or current.error:
        st.error(f"**{current.name}**: {current.error}", icon=":material/error:")
        if last_good is None:
            st.caption("No data yet; retrying every few seconds.")
            return
        shown = last_good
        st.warning(f"Showing the last data received, from {last_good.taken_at:%H:%M:%S} UTC. "
                   "This page recovers by itself when Triton answers again.")
    identity(shown, current.status)
    found = triage(shown, log_source_for(shown.url))
    not_ready_models(found, can_act=shown is current)
    model_table(shown, found.failed_reasons)
    st.caption(f"Refreshed {current.taken_at:%H:%M:%S} UTC · every {REFRESH_S}s")


def identity(snapshot: ServerSnapshot, status: str) -> None:
    left, middle, right = st.columns(3)
    left.metric("Server", status)
    middle.metric("Triton version", snapshot.info.version if snapshot.info else "?")
    right.metric("Transport", snapshot.transport.upper())
    st.caption(f"`{snapshot.url}` · live: {snapshot.live} · ready: {snapshot.ready}")
    counts = snapshot.counts
    columns = st.columns(len(counts))
    for column, (state, count) in zip(columns, counts.items(), strict=True):
        column.metric(state.value.replace("_", " "), count)
    if snapshot.info and snapshot.info.extensions:
        with st.expander("Extensions"):
            st.write(", ".join(snapshot.info.extensions))


def not_ready_models(found: Triage, can_act: bool) -> None:
    show_retry_result()
    if not found.failed and not found.changing:
        st.success("Every loaded model is READY.", icon=":material/check_circle:")
    if found.failed:
        st.subheader(f"Not ready ({len(found.failed)})")
    for model, reason in found.failed:
        state = "not loaded" if is_idle(model) else model.state.value
        version = f" v{model.version}" if model.version else ""
        text_col, button_col = st.columns([6, 1], vertical_alignment="center")
        text_col.error(f"**{model.name}**{version} — {state}: {reason}")
        if button_col.button("Retry load", key=f"{keys.OVERVIEW_RETRY_PREFIX}{model.name}.{model.version}",
                             disabled=not can_act, help="load it again, e.g. after fixing the cause"):
            retry_load(model.name)
    for model in found.changing:
        st.info(f"**{model.name}** is {model.state.value.lower()}…")
    if found.idle:
        st.caption("Not loaded: " + ", ".join(m.name for m in found.idle))


def retry_load(name: str) -> None:
    spec = selected_server()
    with st.spinner(f"loading {name}…"):
        (result,) = models.run_action(client_for(spec.url, spec.admin_key), models.Action.LOAD, [name],
                                      log=log_source_for(spec.url),
                                      repository=models.repository_from_env())
    st.session_state[keys.OVERVIEW_RETRY_RESULT] = result
    st.rerun()


def show_retry_result() -> None:
    result = st.session_state.pop(keys.OVERVIEW_RETRY_RESULT, None)
    if result is None:
        return
    if result.ok:
        st.success(result.message, icon=":material/check_circle:")
    else:
        reason = result.explanation.reason if result.explanation else result.message
        st.error(f"**Retry of {result.name} failed:** {reason}", icon=":material/error:")


def model_table(snapshot: ServerSnapshot, reasons: dict[str, str]) -> None:
    st.subheader("Models")
    if not snapshot.models:
        st.info("The model repository is empty.")
        return
    rows = [{"model": m.name, "version": m.version, "state": m.state.value,
             "reason": reasons.get(m.name, m.reason)} for m in snapshot.models]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def log_settings() -> None:
    """Triton's log verbosity, changed live (raise it while reproducing a failure)."""
    client = selected_client()
    with st.expander("Triton log settings"):
        try:
            current = client.log_settings()
        except GeAdminError as exc:
            st.error(f"Cannot read Triton's log settings: {exc}")
            return
        st.caption(", ".join(f"{key}: {value}" for key, value in sorted(current.items())))
        level = st.number_input("Verbose level (0 = off)", min_value=0, max_value=10, step=1,
                                value=int(current.get("log_verbose_level", 0)),
                                key=keys.OVERVIEW_LOG_VERBOSE)
        if st.button("Apply log level", key=keys.OVERVIEW_LOG_APPLY):
            try:
                updated = client.update_log_settings(log_verbose_level=int(level))
            except GeAdminError as exc:
                st.error(f"Triton refused the change: {exc}")
                return
            st.success(f"Triton's verbose level is now {updated.get('log_verbose_level')}.")
