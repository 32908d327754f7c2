"""The server's verdict, drift and history as the Overview and the sidebar show them.

Views only: the verdict and the stack's account of the server (why it is down, a recent crash)
are `geadmin.stack.server_verdict.server_verdict`, as for `geadmin status`; the fix for drift is
`geadmin.ops.models.put_back.put_back_served`.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.diagnose.drift import Drift, find_drift
from geadmin.diagnose.evidence import EvidenceSources
from geadmin.diagnose.health import ServerSnapshot, take_snapshot
from geadmin.diagnose.verdict import Level, Verdict
from geadmin.domain import format_duration
from geadmin.errors import GeAdminError
from geadmin.ops.models.put_back import put_back_served
from geadmin.stack.server_history import exit_line
from geadmin.stack.server_verdict import ServerVerdict, server_verdict
from geadmin.stack.target import Target, live_stack
from pages.ui import access, keys
from pages.ui.context import client_for, log_for, selected_target
from pages.ui.outside_text import defused

ICONS = {Level.OK: ":material/check_circle:", Level.DEGRADED: ":material/warning:",
         Level.DOWN: ":material/error:"}
SIDEBAR_REFRESH_S = 5
REUSE_S = 1.0  # a verdict computed this recently (the Overview's, in the same tick) serves the sidebar too
REDRAW_MIN_S = 1.0  # at most one whole-app redraw a second while two views disagree (a flapping server)


def verdict_for(target: Target, snapshot: ServerSnapshot | None = None) -> ServerVerdict:
    """The target's verdict with everything it needs (client for drift, log, repository) and
    the embedded stack's account of its Triton; published for the sidebar."""
    client = client_for(target)
    if snapshot is None:
        snapshot = take_snapshot(target.spec.name, client)
    urls = target.urls()
    sources = EvidenceSources(client, log_for(target), target.repository, metrics_url=urls.metrics,
                              also=urls.known())
    found = server_verdict(snapshot, sources, live_stack())
    _published()[server_key(target)] = (time.monotonic(), found)
    return found


Published = dict[str, tuple[float, ServerVerdict]]  # server key -> (monotonic s, the verdict)


def _published() -> Published:
    """Each server's newest verdict in this session, and when it was computed."""
    published: Published = st.session_state.setdefault(keys.VERDICT_PUBLISHED, {})
    return published


def server_key(target: Target) -> str:
    """Everything that makes a server's verdict: a server renamed or repointed is another."""
    return "|".join((target.spec.name, target.spec.url, str(target.repository), str(target.log_path)))


def banner(found: ServerVerdict, target: Target) -> None:
    """The verdict and every reason, with its fix: the same words as `geadmin status`; while
    the embedded stack's Triton does not answer, why (instead of "is the URL right?")."""
    verdict, outage = found.verdict, found.outage
    show = {Level.OK: st.success, Level.DEGRADED: st.warning, Level.DOWN: st.error}[verdict.level]
    lines = [f"**{defused(found.headline)}**"]  # Triton's words in geadmin's sentences
    if len(verdict.reasons) > 1:
        lines += [f"- {defused(r.text)}" + (f" — *{defused(r.fix)}*" if r.fix else "")
                  for r in verdict.reasons]
    elif verdict.reasons and verdict.reasons[0].fix and not outage:
        lines.append(f"*Fix:* {defused(verdict.reasons[0].fix)}")  # fixes name models: outside words
    show(lines[0] + "\n\n" + "\n".join(lines[1:]), icon=ICONS[verdict.level])
    drawn("page", target, verdict.level)


def start_run() -> None:
    """A whole-app run draws every view again: forget what the last one drew."""
    st.session_state[keys.VERDICT_DRAWN] = {}


def drawn(view: str, target: Target, level: Level) -> None:
    """Record that `view` shows `level` for the target. The sidebar and the page refresh on
    timers of their own, so one can find a change first: then the whole app is drawn again,
    and no view on screen shows an older level than another (never OK beside a DOWN)."""
    shown: dict[str, tuple[str, Level]] = st.session_state.setdefault(keys.VERDICT_DRAWN, {})
    key = server_key(target)
    disagree = any(k == key and other != level for v, (k, other) in shown.items() if v != view)
    shown[view] = (key, level)
    now = time.monotonic()
    if disagree and now - st.session_state.get(keys.VERDICT_REDRAWN_AT, -REDRAW_MIN_S) >= REDRAW_MIN_S:
        st.session_state[keys.VERDICT_REDRAWN_AT] = now
        st.rerun(scope="app")


def sidebar_badge() -> None:
    """The verdict of the selected server in the sidebar of every page, refreshed in place."""
    with st.sidebar:
        _badge()


@st.fragment(run_every=SIDEBAR_REFRESH_S)
def _badge() -> None:
    target = selected_target()
    at_s, found = _published().get(server_key(target), (-SIDEBAR_REFRESH_S, None))
    # An OK is never older than REUSE_S. A DEGRADED or DOWN serves until the next refresh: while
    # Triton hangs each verdict costs a timeout, and no page should wait for one on every click.
    not_ok_s = SIDEBAR_REFRESH_S - REUSE_S  # below the refresh period: each tick reads afresh
    if found is None or time.monotonic() - at_s > (REUSE_S if found.verdict.level is Level.OK else not_ok_s):
        try:  # the embedded stack's Triton stopped or restarting: said, as on the Overview
            found = verdict_for(target)
        except GeAdminError as exc:
            st.caption(f":material/error: verdict unknown: {defused(str(exc))}")
            return
    level = found.verdict.level
    color = {Level.OK: "green", Level.DEGRADED: "orange", Level.DOWN: "red"}[level]
    st.markdown(f"**:{color}[:material/circle: {level.value}]**")
    st.caption(defused(found.headline.split(": ", 1)[-1]))
    drawn("sidebar", target, level)


# -- drift -----------------------------------------------------------------------------------
def drift_panel(verdict: Verdict, target: Target, can_act: bool) -> None:
    show_put_back_result()
    if not verdict.drift:
        return
    st.subheader(f"Drift: disk differs from what serves ({len(verdict.drift)})")
    for drift in verdict.drift:
        drift_row(drift, target, can_act)


def drift_row(drift: Drift, target: Target, can_act: bool) -> None:
    card = f"**{defused(drift.model)}** — {defused(drift.headline)}\n\n*Fix:* {defused(drift.fix)}"
    if drift.gone:  # no file to open or write: the directory itself is gone
        st.warning(card, icon=":material/folder_off:")
        return
    text, edit, put_back = st.columns([6, 1, 1], vertical_alignment="center")
    text.warning(card, icon=":material/difference:")
    if edit.button("Open in editor", key=f"{keys.OVERVIEW_DRIFT_EDIT_PREFIX}{drift.model}"):
        st.session_state[keys.EDITOR_MODEL] = drift.model
        from pages import editor  # the page to open: imported here, as the router does

        st.switch_page(st.Page(editor.render, title="Config editor", url_path="editor"))
    permitted, why_not = access.allowed(GuardedAction.ROLLBACK)
    if put_back.button("Put back served", key=f"{keys.OVERVIEW_DRIFT_PUT_BACK_PREFIX}{drift.model}",
                       disabled=not can_act or not permitted or target.repository is None,
                       help=why_not or "write the config Triton serves to the file (the file is kept "
                       "in the config history)"):
        try:
            auth = access.auth_for(GuardedAction.ROLLBACK, model=drift.model, server=target.spec.url)
            message = put_back_served(client_for(target),
                                      target.repository, drift.model, auth=auth)
        except GeAdminError as exc:
            st.session_state[keys.OVERVIEW_DRIFT_RESULT] = (False, f"{drift.model}: {exc}")
        else:
            st.session_state[keys.OVERVIEW_DRIFT_RESULT] = (True, message)
        st.rerun()


def drift_notes(target: Target, ready: list[str], listed: list[str]) -> None:
    """The Models page's flag: each READY model whose file differs from what serves (or whose
    directory is gone: not in `listed`, the index's names), and the fix."""
    for drift in find_drift(client_for(target), target.repository, ready, listed=listed):
        where = "" if drift.gone else " (Overview or Config editor)"
        st.warning(f"**{defused(drift.model)}** — {defused(drift.headline)}\n\n*Fix:* "
                   f"{defused(drift.fix)}{where}",
                   icon=":material/folder_off:" if drift.gone else ":material/difference:")


def show_put_back_result() -> None:
    result = st.session_state.pop(keys.OVERVIEW_DRIFT_RESULT, None)
    if result is None:
        return
    ok, message = result
    (st.success if ok else st.error)(message)


# -- what happened to the server ---------------------------------------------------------------
def history_panel(found: ServerVerdict) -> None:
    """The last exits of Triton and the dashboard under `geadmin up`, and restart counts."""
    history = found.history
    if history is None:
        return
    if history.down:
        stack_link()  # the banner says why it is down
    elif found.crash:
        st.warning(found.crash, icon=":material/restart_alt:")
    with st.expander("Server history", expanded=bool(history.down)):
        up = f"up {format_duration(history.triton_up_s)}" if history.triton_up_s is not None else ""
        st.caption(f"Triton: {history.triton_state} {up} · {history.triton_restarts} restart(s) · "
                   f"dashboard: {history.dashboard_restarts} restart(s)")
        rows = [{"service": "triton", "exit": exit_line(r)} for r in history.triton_exits]
        rows += [{"service": "dashboard", "exit": exit_line(r)} for r in history.dashboard_exits]
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        else:
            st.caption("No exits since `geadmin up` started.")
        stack_link()


def stack_link() -> None:
    from pages import stack  # the page to link to, as the router does

    st.page_link(st.Page(stack.render, title="Stack", url_path="stack"), label="Open the Stack page",
                 icon=":material/dns:")
