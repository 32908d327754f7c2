"""Dashboard entry script: page set-up and routing only (pages live beside it)."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # so `pages.*` imports resolve

from geadmin.errors import GeAdminError
from pages import (
    audit,
    editor,
    load_test,
    metrics,
    models,
    new_model,
    npu,
    overview,
    playground,
    settings,
    stack,
)
from pages.ui import access
from pages.ui.context import server_picker

st.set_page_config(page_title="geadmin", page_icon=":material/memory:", layout="wide")
identity = access.require_identity()  # the sign-in form, when one is needed, and stop

navigation = st.navigation(
    {
        "Triage": [
            st.Page(overview.render, title="Overview", icon=":material/dashboard:",
                    url_path="overview", default=True),
            st.Page(metrics.render, title="Metrics", icon=":material/monitoring:", url_path="metrics"),
            st.Page(npu.render, title="NPUs", icon=":material/memory:", url_path="npu"),
        ],
        "Manage": [
            st.Page(models.render, title="Models", icon=":material/deployed_code:", url_path="models"),
            st.Page(new_model.render, title="New model", icon=":material/add_box:",
                    url_path="new_model"),
            st.Page(editor.render, title="Config editor", icon=":material/edit_note:", url_path="editor"),
            st.Page(stack.render, title="Stack", icon=":material/dns:", url_path="stack"),
            st.Page(audit.render, title="Audit", icon=":material/history:", url_path="audit"),
            st.Page(settings.render, title="Settings", icon=":material/settings:", url_path="settings"),
        ],
        "Exercise": [
            st.Page(playground.render, title="Playground", icon=":material/science:", url_path="playground"),
            st.Page(load_test.render, title="Load test", icon=":material/speed:", url_path="load_test"),
        ],
    }
)
try:
    server_picker()
    access.sidebar(identity)
except GeAdminError as exc:  # e.g. a malformed GEADMIN_SERVERS_FILE
    st.error(f"geadmin is misconfigured: {exc}")
    st.stop()
navigation.run()
