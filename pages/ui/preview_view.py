"""The Config editor's "Preview impact": the edited text served as a trial copy beside the live
model and measured at its recorded load (or a rate given here), shown as GO / NO-GO with the
evidence; nothing is applied. One core function: geadmin.ops.models.preview.preview_change,
as `geadmin config apply --preview`."""

from __future__ import annotations

import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError
from geadmin.ops.models.preview import PreviewLoad, preview_change
from geadmin.ops.models.preview_report import ImpactPreview, PreviewVerdict
from geadmin.repository import revisions
from geadmin.stack.backends import served_backends
from geadmin.stack.target import Target
from pages.ui import access, keys
from pages.ui.context import client_for
from pages.ui.errors import failure_of, show_failure


def preview_section(target: Target, model: str, on_disk: str, text: str) -> None:
    """The rate, the "Preview impact" button, and the last preview of this very text."""
    st.markdown("**Preview impact** — serve the edited config as a trial copy beside the live model, "
                "replay its recorded load against both, and compare; nothing is applied")
    rate_col, window_col = st.columns(2)
    rate = rate_col.number_input("Replay rate (requests/s)", min_value=0.0, max_value=100_000.0,
                                 value=0.0, key=keys.EDITOR_PREVIEW_RATE,
                                 help="0: the model's recorded peak over the last hour (the sampler's "
                                      "history or Prometheus)")
    window_ms = window_col.number_input("Measurement window (ms)", min_value=100, max_value=60_000,
                                        value=2000, step=500, key=keys.EDITOR_PREVIEW_WINDOW)
    permitted, why_not = access.allowed(GuardedAction.TUNE)
    reason = why_not if not permitted else "no changes to preview" if text == on_disk else ""
    asked = (target.spec.name, model, revisions.sha256_of(text.encode()))
    if st.button("Preview impact", key=keys.EDITOR_PREVIEW, disabled=bool(reason),
                 help=reason or "a trial copy is loaded and measured with perf_analyzer, then removed"):
        found = run_preview(target, model, text, PreviewLoad(rate or None, window_ms=int(window_ms)))
        if found is not None:
            st.session_state[keys.EDITOR_PREVIEW_RESULT] = (asked, found)
    shown = st.session_state.get(keys.EDITOR_PREVIEW_RESULT)
    if shown is not None and shown[0] == asked:
        show_preview(shown[1])


def run_preview(target: Target, model: str, text: str, load: PreviewLoad) -> ImpactPreview | None:
    """The preview with its progress shown; None (and the failure shown, no traceback) when it
    could not run."""
    assert target.repository is not None
    try:
        auth = access.auth_for(GuardedAction.TUNE, model=model, server=target.spec.url)
        with st.status(f"Previewing the new config of {model}…", expanded=True) as status:
            found = preview_change(client_for(target), target.repository, model, text, auth=auth, load=load,
                                   metrics_url=target.urls().metrics, backends=served_backends(target),
                                   admin_key=target.spec.admin_key, progress=lambda line: status.write(line))
            status.update(label=f"Previewed {model}: {found.verdict.value}", state="complete", expanded=False)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Preview stopped (nothing was applied)")
        return None
    return found


def show_preview(found: ImpactPreview) -> None:
    if found.verdict is PreviewVerdict.GO:
        st.success(found.headline(), icon=":material/check_circle:")
    else:
        st.error(found.headline(), icon=":material/block:")
    st.code("\n".join(found.evidence()), language="text")
