"""Active alerts from Alertmanager's API (v2), for the Overview and `geadmin alerts`.

Each alert keeps what an operator acts on first: its name and severity, the summary, the
model and server it is about, and two links — its triage view (the rule's `runbook_url`, a
dashboard deep link; else one built from its labels) and a silence form in Alertmanager's
own UI, pre-filled with the alert's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import requests

from geadmin.errors import AlertmanagerError

TIMEOUT_S = 5.0
SEVERITY_ORDER = ("page", "critical", "ticket", "warning", "info")
MAX_ALERTS = 500  # an answer with more is cut: a page never draws thousands of rows


@dataclass(frozen=True)
class Alert:
    name: str
    labels: Mapping[str, str]
    summary: str
    description: str
    link: str  # the triage view in geadmin
    silence_url: str
    starts_at: datetime | None = None
    state: str = "active"  # active, suppressed
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")

    @property
    def subject(self) -> str:
        """What it is about: model (and server), else the instance or device."""
        labels = self.labels
        if labels.get("model"):
            return labels["model"] + (f" on {labels['server']}" if labels.get("server") else "")
        return labels.get("instance") or (f"NPU {labels['id']}" if labels.get("id") else "")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "severity": self.severity, "subject": self.subject,
                "summary": self.summary, "description": self.description, "link": self.link,
                "silence_url": self.silence_url, "state": self.state, "labels": dict(self.labels),
                "starts_at": self.starts_at.isoformat() if self.starts_at else None}


def active_alerts(alertmanager_url: str, dashboard_url: str, *, session: requests.Session | None = None
                  ) -> list[Alert]:
    """The alerts Alertmanager holds as active (silenced and inhibited ones left out), the most
    severe first, then the oldest."""
    base = alertmanager_url.rstrip("/")
    http = session or requests
    try:
        answer = http.get(f"{base}/api/v2/alerts", params={"active": "true", "silenced": "false",
                                                            "inhibited": "false"}, timeout=TIMEOUT_S)
    except requests.Timeout:
        raise AlertmanagerError(f"Alertmanager at {base} did not answer within {TIMEOUT_S:g} s: check "
                                "that it runs (GEADMIN_ALERTMANAGER_URL)") from None
    except requests.RequestException as exc:
        raise AlertmanagerError(f"Alertmanager at {base} is unreachable ({type(exc).__name__}): check "
                                "GEADMIN_ALERTMANAGER_URL") from None
    if answer.status_code != 200:
        raise AlertmanagerError(f"Alertmanager at {base} answered HTTP {answer.status_code} to "
                                "/api/v2/alerts: is GEADMIN_ALERTMANAGER_URL its base URL?")
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, list):
        raise AlertmanagerError(f"{base}/api/v2/alerts did not answer with a list of alerts: is "
                                "GEADMIN_ALERTMANAGER_URL an Alertmanager?")
    alerts = [parse_alert(item, base, dashboard_url) for item in body[:MAX_ALERTS] if isinstance(item, dict)]
    return sorted(alerts, key=lambda a: (_rank(a.severity), a.starts_at.timestamp() if a.starts_at else 0.0))


def parse_alert(item: Mapping[str, Any], alertmanager_url: str, dashboard_url: str) -> Alert:
    labels = {str(k): str(v) for k, v in (item.get("labels") or {}).items()}
    notes = {str(k): str(v) for k, v in (item.get("annotations") or {}).items()}
    status = item.get("status") or {}
    return Alert(
        name=labels.get("alertname", "?"), labels=labels,
        summary=notes.get("summary", labels.get("alertname", "")),
        description=notes.get("description", ""),
        link=notes.get("runbook_url") or triage_link(labels, dashboard_url),
        silence_url=silence_url(labels, alertmanager_url), starts_at=_time(item.get("startsAt")),
        state=str(status.get("state", "active")) if isinstance(status, dict) else "active", annotations=notes)


def triage_link(labels: Mapping[str, str], dashboard_url: str) -> str:
    """The dashboard page that explains an alert without a runbook link: its model's, else the Overview."""
    base = dashboard_url.rstrip("/")
    if labels.get("model"):
        query = {k: labels[k] for k in ("server", "model") if labels.get(k)}
        return f"{base}/models?{urlencode(query)}"
    return f"{base}/overview"


def silence_url(labels: Mapping[str, str], alertmanager_url: str) -> str:
    """Alertmanager's "new silence" form, its matchers filled in with the alert's labels."""
    matchers = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "severity")
    return f"{alertmanager_url.rstrip('/')}/#/silences/new?filter={quote('{' + matchers + '}', safe='')}"


def _rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
