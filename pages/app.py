"""Dashboard entry script: page set-up and routing only (pages live beside it)."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # so `pages.*` imports resolve

from geadmin.errors import GeAdminError
from pages import (
    audit,
    capacity,
    editor,
    fleet,
    load_test,
    metrics,
    models,
    new_model,
    npu,
    overview,
    playground,
    settings,
    stack,
    tune,
)
from pages.ui import access, interrupted_view
from pages.ui.context import server_picker
from pages.ui.errors import show_error
from pages.ui.links import link_notice, take_link
from pages.ui.outside_text import defused
from pages.ui.verdict_view import sidebar_badge, start_run

st.set_page_config(page_title="geadmin", page_icon=":material/memory:", layout="wide")
identity = access.require_identity()  # the sign-in form, when one is needed, and stop

# Streamlit serves its default page at "/" only (it ignores the default page's url_path), so
# Overview is the default and a hidden twin answers at /overview (what the sidebar calls it).
navigation = st.navigation(
    {
        "Triage": [
            st.Page(overview.render, title="Overview", icon=":material/dashboard:", default=True),
            st.Page(metrics.render, title="Metrics", icon=":material/monitoring:", url_path="metrics"),
            st.Page(npu.render, title="NPUs", icon=":material/memory:", url_path="npu"),
            st.Page(overview.render, title="Overview", url_path="overview", visibility="hidden"),
        ],
        "Manage": [
            st.Page(models.render, title="Models", icon=":material/deployed_code:", url_path="models"),
            st.Page(new_model.render, title="New model", icon=":material/add_box:",
                    url_path="new_model"),
            st.Page(editor.render, title="Config editor", icon=":material/edit_note:", url_path="editor"),
            st.Page(stack.render, title="Stack", icon=":material/dns:", url_path="stack"),
            st.Page(fleet.render, title="Fleet", icon=":material/lan:", url_path="fleet"),
            st.Page(audit.render, title="Audit", icon=":material/history:", url_path="audit"),
            st.Page(settings.render, title="Settings", icon=":material/settings:", url_path="settings"),
        ],
        "Exercise": [
            st.Page(playground.render, title="Playground", icon=":material/science:", url_path="playground"),
            st.Page(load_test.render, title="Load test", icon=":material/speed:", url_path="load_test"),
            st.Page(tune.render, title="Tune", icon=":material/tune:", url_path="tune"),
            st.Page(capacity.render, title="Capacity", icon=":material/trending_up:", url_path="capacity"),
        ],
    },
    expanded=True,  # every page in sight: Streamlit folds all beyond 10 under "View more" by default
)
try:
    take_link(navigation.url_path)  # a deep link's server, model and range (pages/ui/links.py)
    server_picker()
    interrupted_view.reconcile_at_start()  # once per process: close what a killed apply/create left
    start_run()
    sidebar_badge()  # the selected server's verdict, the same as the Overview's banner
    access.sidebar(identity)
except GeAdminError as exc:  # e.g. a malformed GEADMIN_SERVERS_FILE
    st.error(f"geadmin is misconfigured: {defused(str(exc))}")
    st.stop()
link_notice()
try:
    navigation.run()
except GeAdminError as exc:  # one place: any page's unhandled geadmin error is a message, not a traceback
    show_error(exc)
