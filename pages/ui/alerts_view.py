"""The Overview's active alerts, read from Alertmanager (GEADMIN_ALERTMANAGER_URL): each with
its summary, what it is about, the link to the page that explains it and a silence link.
Views only: the reading is `geadmin.telemetry.alerting.alertmanager.active_alerts`. Every text of an
alert is outside input, shown through `pages.ui.outside_text` (text, never markdown); the
links are the ones the core accepted (under the dashboard or the runbook base), and a
runbook_url under neither is shown as text."""

from __future__ import annotations

import streamlit as st

from geadmin import settings
from geadmin.errors import GeAdminError
from geadmin.telemetry.alerting.alertmanager import Alert, active_alerts
from pages.ui import outside_text

PAGING = ("page", "critical")


@st.cache_data(ttl=10, show_spinner=False)
def _alerts(alertmanager_url: str, dashboard_url: str, link_bases: tuple[str, ...]) -> list[Alert]:
    """Cached briefly: the Overview refreshes every few seconds, Alertmanager need not."""
    return active_alerts(alertmanager_url, dashboard_url, link_bases=link_bases)


def active_alerts_panel() -> None:
    try:
        url = settings.ALERTMANAGER_URL.get()
        if not url:
            return  # no Alertmanager configured: nothing to say (the docs say how to add one)
        alerts = _alerts(url, settings.dashboard_url(), settings.link_bases())
    except GeAdminError as exc:
        st.warning(f"Active alerts not read: {outside_text.text(exc)}")
        return
    st.subheader(f"Active alerts ({len(alerts)})" if alerts else "Active alerts")
    if not alerts:
        st.caption(f"None fires (Alertmanager {outside_text.text(url)}).")
        return
    for alert in alerts:
        (st.error if alert.severity in PAGING else st.warning)(alert_text(alert),
                                                               icon=":material/notifications_active:")


def alert_text(alert: Alert) -> str:
    """The alert's box: its texts escaped, its two links (both checked by the core), and an
    outside runbook link as text."""
    text = f"**{outside_text.text(alert.name, 200)}** — {outside_text.text(alert.summary)}"
    if alert.subject:
        text += f"  \n{outside_text.text(alert.subject)}"
    text += (f"  \n{outside_text.link('Open the triage view', alert.link)} · "
             f"{outside_text.link('Silence', alert.silence_url)}")
    if alert.outside_link:
        text += (f"  \nRunbook link not opened (outside the dashboard and GEADMIN_RUNBOOK_BASE_URL): "
                 f"{outside_text.text(alert.outside_link, 300)}")
    return text
