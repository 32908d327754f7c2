"""Audit: who changed what — filter the workspace's audit log, read a row's message and diff,
export the filtered rows as CSV. Reads only the workspace database: works with Triton down."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from geadmin import audit, settings
from geadmin.audit import AuditEntry, LogSummary
from geadmin.errors import DatabaseBusyError, GeAdminError, InvalidArgumentError
from pages.ui import keys
from pages.ui.links import preselect
from pages.ui.outside_text import defused

ANY = "(any)"
DEFAULT_LIMIT = 200
EMPTY_LOG = ("The audit log is empty: nothing has been changed through geadmin in this workspace yet. "
             "Every config apply and rollback, every model load, unload and reload — from this "
             "dashboard or the `geadmin` CLI, refusals included — and every exit and restart of the "
             "embedded Triton is recorded here, with who, when, the result, the message and the diff.")


def render() -> None:
    st.title("Audit")
    st.button("Refresh", key=keys.AUDIT_REFRESH, icon=":material/refresh:")
    try:
        summary = audit.summary()
    except GeAdminError as exc:
        database_error(exc)
        return
    if summary.total == 0:
        st.info(EMPTY_LOG)
        return
    filters = filter_bar(summary)
    if filters is None:
        return
    try:
        entries = audit.query(**filters)
    except GeAdminError as exc:
        database_error(exc)
        return
    if not entries:
        st.info(f"No audit row matches these filters (the log holds {summary.total}).")
        return
    limit = int(st.number_input("Rows shown", min_value=10, max_value=10_000, value=DEFAULT_LIMIT,
                                step=50, key=keys.AUDIT_LIMIT))
    shown = entries[:limit]
    st.caption(f"showing {len(shown)} of {len(entries)} matching rows, newest first "
               f"(the log holds {summary.total}); times in {_local_zone()}")
    st.dataframe(pd.DataFrame([table_row(e) for e in shown]), hide_index=True, width="stretch")
    st.download_button(f"Download CSV ({len(entries)} rows)", audit.csv_text(entries),
                       file_name=f"geadmin-audit-{datetime.now():%Y%m%d-%H%M%S}.csv", mime="text/csv",
                       key=keys.AUDIT_DOWNLOAD, on_click="ignore", icon=":material/download:")
    row_detail(shown)


def filter_bar(summary: LogSummary) -> dict[str, Any] | None:
    """The `audit.query` arguments the filters ask for; None (with the reason shown) when the
    since text is not a duration or a date."""
    since_col, model_col, action_col, result_col, who_col = st.columns([2, 2, 2, 2, 2])
    since_text = since_col.text_input("Since", key=keys.AUDIT_SINCE, placeholder="e.g. 2h, 7d, 2025-01-31",
                                      help="a duration (30m, 2h, 7d, 1w) or a date / time "
                                      "(2025-01-31, 2025-01-31T14:00), local time unless it says otherwise")
    preselect(keys.AUDIT_MODEL, [ANY, *summary.models])  # a deep link's model
    model = model_col.selectbox("Model", [ANY, *summary.models], key=keys.AUDIT_MODEL)
    action = action_col.selectbox("Action", [ANY, *summary.actions], key=keys.AUDIT_ACTION)
    result = result_col.selectbox("Result", [ANY, *summary.results], key=keys.AUDIT_RESULT)
    who = who_col.selectbox("Who", [ANY, *summary.users], key=keys.AUDIT_WHO)
    since = None
    if since_text.strip():
        try:
            since = audit.parse_since(since_text, name="Since")
        except InvalidArgumentError as exc:
            st.error(defused(str(exc)))
            return None
    return {"since": since, "model": _chosen(model), "action": _chosen(action),
            "result": _chosen(result), "who": _chosen(who)}


def table_row(entry: AuditEntry) -> dict[str, object]:
    return {"id": entry.id, "when": _local(entry.at), "who": entry.who, "origin": entry.origin,
            "server": entry.server, "model": entry.model, "action": entry.action,
            "result": entry.result, "message": entry.headline, "diff": "yes" if entry.diff else ""}


def row_detail(shown: list[AuditEntry]) -> None:
    """One row's whole message and its config diff."""
    by_id = {e.id: e for e in shown}
    st.subheader("Row detail")
    row_id = st.selectbox("Row", list(by_id), key=keys.AUDIT_ROW, format_func=lambda i: _label(by_id[i]))
    entry = by_id[row_id]
    st.markdown(f"**{entry.action}** of **{entry.model or '—'}** by **{entry.who}** ({entry.origin}) "
                f"on `{entry.server or 'no server'}` at {_local(entry.at)}: **{entry.result}**")
    st.code(entry.message or "(no message)", language="text", wrap_lines=True)
    if entry.diff:
        st.code(entry.diff, language="diff")
    else:
        st.caption("No config diff: this action changed no file.")


def database_error(exc: GeAdminError) -> None:
    next_step = ("retry in a moment (Refresh)" if isinstance(exc, DatabaseBusyError)
                 else f"fix the workspace database in {settings.home()} (GEADMIN_HOME) as said above, "
                 "then Refresh")
    st.error(f"Cannot read the audit log: {defused(str(exc))}\n\nNext: {next_step}.")


def _chosen(value: str) -> str | None:
    return None if value == ANY else value


def _label(entry: AuditEntry) -> str:
    return f"#{entry.id} · {_local(entry.at)} · {entry.action} {entry.model} · {entry.result} · {entry.who}"


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _local_zone() -> str:
    return datetime.now().astimezone().tzname() or "local time"
