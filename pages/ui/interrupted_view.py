"""Changes cut short: reconciled once per dashboard process and repository (at start), then
shown on the Models page while unresolved, with the way back — the Config editor opened on the
model and the revision to roll back to (its guarded, confirmed rollback).

Views only: `geadmin.ops.reconcile.reconcile` closes what a killed apply or create left,
`geadmin.diagnose.interrupted.unresolved` lists what still waits for an operator.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from geadmin.audit import Actor
from geadmin.diagnose import interrupted
from geadmin.ops import reconcile
from pages.ui import keys
from pages.ui.context import selected_target


@st.cache_resource(show_spinner=False)
def _reconciled(repository: str) -> reconcile.Report:
    """Once per dashboard process and repository: what the last process left is closed."""
    return reconcile.reconcile(Path(repository), actor=Actor.dashboard(None))


def reconcile_at_start() -> None:
    """Called by the router on every run; does the work once (cached per repository)."""
    repository = selected_target().repository
    if repository is not None:
        _reconciled(str(repository))


def notice() -> None:
    """One warning per unresolved interrupted apply, with a button to the rollback."""
    for item in interrupted.unresolved(selected_target().repository):
        text, action = st.columns([6, 2], vertical_alignment="center")
        text.warning(f"**Interrupted change** — {item.reason()}", icon=":material/report:")
        if item.previous_revision is None:
            continue
        if action.button(f"Review rollback to revision {item.previous_revision}",
                         key=f"{keys.INTERRUPTED_OPEN_PREFIX}{item.audit_id}"):
            st.session_state[keys.EDITOR_MODEL] = item.model
            st.session_state[keys.EDITOR_REVISION] = item.previous_revision
            st.session_state.pop(keys.EDITOR_OPENED, None)
            from pages import editor  # the page to open: imported here, as the router does

            st.switch_page(st.Page(editor.render, title="Config editor", url_path="editor"))
