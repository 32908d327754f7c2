"""The Overview's active alerts, read from Alertmanager (GEADMIN_ALERTMANAGER_URL): each with
its summary, what it is about, the link to the page that explains it and a silence link.
Views only: the reading is `geadmin.telemetry.alertmanager.active_alerts`."""

from __future__ import annotations

import streamlit as st

from geadmin import settings
from geadmin.errors import GeAdminError
from geadmin.telemetry.alertmanager import Alert, active_alerts

PAGING = ("page", "critical")


@st.cache_data(ttl=10, show_spinner=False)
def _alerts(alertmanager_url: str, dashboard_url: str) -> list[Alert]:
    """Cached briefly: the Overview refreshes every few seconds, Alertmanager need not."""
    return active_alerts(alertmanager_url, dashboard_url)


def active_alerts_panel() -> None:
    try:
        url = settings.get("ALERTMANAGER_URL")
        if not url:
            return  # no Alertmanager configured: nothing to say (the docs say how to add one)
        alerts = _alerts(url, settings.dashboard_url())
    except GeAdminError as exc:
        st.warning(f"Active alerts not read: {exc}")
        return
    st.subheader(f"Active alerts ({len(alerts)})" if alerts else "Active alerts")
    if not alerts:
        st.caption(f"None fires (Alertmanager {url}).")
        return
    for alert in alerts:
        text = f"**{alert.name}** — {alert.summary}"
        if alert.subject:
            text += f"  \n{alert.subject}"
        text += f"  \n[Open the triage view]({alert.link}) · [Silence]({alert.silence_url})"
        (st.error if alert.severity in PAGING else st.warning)(text, icon=":material/notifications_active:")
