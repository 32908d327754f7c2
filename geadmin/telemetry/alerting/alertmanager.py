"""Active alerts from Alertmanager's API (v2), for the Overview and `geadmin alerts`.

Each alert keeps what an operator acts on first: its name and severity, the summary, the
model and server it is about, and two links — its triage view (the rule's `runbook_url`, a
dashboard deep link; else one built from its labels) and a silence form in Alertmanager's
own UI, pre-filled with the alert's labels.

Everything in an alert is outside input: Alertmanager accepts alerts from anyone who can reach
its API (no authentication by default). So the answer is read with a size and nesting bound
(`geadmin.outside`), texts lose their control characters and are cut, a `runbook_url` is a
link only when it points under the dashboard (GEADMIN_DASHBOARD_URL) or the runbooks
(GEADMIN_RUNBOOK_BASE_URL) — any other is kept as `outside_link`, text to show, never to
follow — and the silence form's matchers are quoted as Alertmanager's matcher syntax wants.
The views show the texts as text, never as markdown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import requests

from geadmin import outside, settings
from geadmin.errors import AlertmanagerError

TIMEOUT_S = 5.0
SEVERITY_ORDER = ("page", "critical", "ticket", "warning", "info")
MAX_ALERTS = 500  # an answer with more is cut: a page never draws thousands of rows
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # 500 alerts with long annotations are well under 1 MiB
MAX_LABELS = 64  # per alert: more are dropped (a silence form with hundreds of matchers helps nobody)
SUMMARY_CHARS = 500
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Alert:
    name: str
    labels: Mapping[str, str]
    summary: str
    description: str
    link: str  # the triage view: the runbook_url when under a configured base, else geadmin's own
    silence_url: str
    starts_at: datetime | None = None
    state: str = "active"  # active, suppressed
    annotations: Mapping[str, str] = field(default_factory=dict)
    outside_link: str = ""  # a runbook_url under no configured base: shown as text, never a link

    @property
    def severity(self) -> str:
        return outside.plain(self.labels.get("severity", ""), 40)

    @property
    def subject(self) -> str:
        """What it is about: model (and server), else the instance or device."""
        labels = self.labels
        if labels.get("model"):
            text = labels["model"] + (f" on {labels['server']}" if labels.get("server") else "")
        else:
            text = labels.get("instance") or (f"NPU {labels['id']}" if labels.get("id") else "")
        return outside.plain(text, 500)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "severity": self.severity, "subject": self.subject,
                "summary": self.summary, "description": self.description, "link": self.link,
                "silence_url": self.silence_url, "outside_link": self.outside_link, "state": self.state,
                "labels": dict(self.labels),
                "starts_at": self.starts_at.isoformat() if self.starts_at else None}


def active_alerts(alertmanager_url: str, dashboard_url: str, *, link_bases: Sequence[str] | None = None,
                  session: requests.Session | None = None) -> list[Alert]:
    """The alerts Alertmanager holds as active (silenced and inhibited ones left out), the most
    severe first, then the oldest. `link_bases`: where a runbook_url may point to be a link
    (default: the dashboard and GEADMIN_RUNBOOK_BASE_URL)."""
    base = alertmanager_url.rstrip("/")
    bases = tuple(link_bases) if link_bases is not None else (dashboard_url, *_runbooks())
    body = _read(base, session)
    if not isinstance(body, list):
        raise AlertmanagerError(f"{base}/api/v2/alerts did not answer with a list of alerts: is "
                                "GEADMIN_ALERTMANAGER_URL an Alertmanager?")
    alerts = [parse_alert(item, base, dashboard_url, bases)
              for item in body[:MAX_ALERTS] if isinstance(item, dict)]
    return sorted(alerts, key=lambda a: (_rank(a.severity), a.starts_at.timestamp() if a.starts_at else 0.0))


def _read(base: str, session: requests.Session | None) -> Any:
    http = session or requests
    try:
        answer = http.get(f"{base}/api/v2/alerts", params={"active": "true", "silenced": "false",
                                                            "inhibited": "false"},
                          timeout=TIMEOUT_S, stream=True)
        with answer:
            if answer.status_code != 200:
                raise AlertmanagerError(f"Alertmanager at {base} answered HTTP {answer.status_code} to "
                                        "/api/v2/alerts: is GEADMIN_ALERTMANAGER_URL its base URL?")
            what = f"the answer of {base}/api/v2/alerts"
            raw = outside.read_limited(answer.iter_content(65536), what=what, error=AlertmanagerError,
                                       max_bytes=MAX_ANSWER_BYTES)
            return outside.loads(raw, what=what, error=AlertmanagerError)
    except requests.Timeout as exc:
        raise AlertmanagerError(f"Alertmanager at {base} did not answer within {TIMEOUT_S:g} s: check "
                                "that it runs (GEADMIN_ALERTMANAGER_URL)") from exc
    except requests.RequestException as exc:
        raise AlertmanagerError(f"Alertmanager at {base} is unreachable ({type(exc).__name__}): check "
                                "GEADMIN_ALERTMANAGER_URL") from exc
    except ValueError:  # not JSON: said by the caller (requests' own ValueErrors are caught above)
        return None


def _runbooks() -> tuple[str, ...]:
    runbooks = settings.RUNBOOK_BASE_URL.get()
    return (runbooks,) if runbooks else ()


def parse_alert(item: Mapping[str, Any], alertmanager_url: str, dashboard_url: str,
                link_bases: Sequence[str] | None = None) -> Alert:
    """One alert of the API's answer, its texts made plain and its links checked (module docstring)."""
    labels = _strings(item.get("labels"), labels=True)  # raw: the silence must match them exactly
    notes = _strings(item.get("annotations"), labels=False)
    status = item.get("status") or {}
    runbook = notes.get("runbook_url", "").strip()
    trusted = outside.under_base(runbook, link_bases if link_bases is not None else (dashboard_url,))
    return Alert(
        name=outside.plain(labels.get("alertname", "?"), 200), labels=labels,
        summary=" ".join(outside.plain(notes.get("summary", labels.get("alertname", "")), SUMMARY_CHARS)
                         .split()),  # one line: a summary cannot forge lines of `geadmin alerts`
        description=notes.get("description", ""),
        link=runbook if trusted else triage_link(labels, dashboard_url),
        silence_url=silence_url(labels, alertmanager_url), starts_at=_time(item.get("startsAt")),
        state=str(status.get("state", "active"))[:20] if isinstance(status, dict) else "active",
        annotations=notes, outside_link="" if trusted else outside.plain(runbook, 500))


def _strings(raw: Any, *, labels: bool) -> dict[str, str]:
    """A label map (valid label names, values as sent) or an annotation map (plain texts), at
    most MAX_LABELS entries."""
    if not isinstance(raw, dict):
        return {}
    kept = {}
    for key, value in list(raw.items())[:MAX_LABELS]:
        if labels and LABEL_NAME.fullmatch(str(key)):
            kept[str(key)] = str(value)
        elif not labels:
            kept[outside.plain(key, 200)] = outside.plain(value)
    return kept


def triage_link(labels: Mapping[str, str], dashboard_url: str) -> str:
    """The dashboard page that explains an alert without a runbook link: its model's, else the Overview."""
    base = dashboard_url.rstrip("/")
    if labels.get("model"):
        query = {k: labels[k] for k in ("server", "model") if labels.get(k)}
        return f"{base}/models?{urlencode(query)}"
    return f"{base}/overview"


def silence_url(labels: Mapping[str, str], alertmanager_url: str) -> str:
    """Alertmanager's "new silence" form, its matchers filled in with the alert's labels."""
    matchers = ",".join(silence_matchers(labels))
    return f"{alertmanager_url.rstrip('/')}/#/silences/new?filter={quote('{' + matchers + '}', safe='')}"


def silence_matchers(labels: Mapping[str, str]) -> list[str]:
    """`name="value"` per label (severity left out, so the silence holds if it changes), the
    value quoted as Alertmanager's matcher syntax wants: backslash, double quote and newline
    escaped — a value with `"`, `,` or `}` is one value, never the end of the matcher."""
    return [f'{name}="{matcher_quote(value)}"' for name, value in sorted(labels.items())
            if name != "severity" and LABEL_NAME.fullmatch(name)]


def matcher_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
