"""`geadmin alerts`: the active alerts Alertmanager holds, each with its triage link.

Reads GEADMIN_ALERTMANAGER_URL (or `--alertmanager`); links point at GEADMIN_DASHBOARD_URL.
The first line says how many fire and the most severe; exit 0 none, 1 some fire, 3
Alertmanager does not answer.
"""

from __future__ import annotations

import argparse
import json

from geadmin import settings
from geadmin.cli.common import format_table
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import AlertmanagerError, ConfigError
from geadmin.telemetry.alerting.alertmanager import Alert, active_alerts


def headline(alerts: list[Alert]) -> str:
    if not alerts:
        return "OK: no alert fires"
    first = alerts[0]
    more = f" (and {len(alerts) - 1} more)" if len(alerts) > 1 else ""
    return f"FIRING: {first.name}: {first.summary}{more}"


def render(alerts: list[Alert]) -> str:
    lines = [headline(alerts)]
    for alert in alerts:
        since = f"since {alert.starts_at:%Y-%m-%d %H:%M:%S %Z}" if alert.starts_at else ""
        lines.append("")
        lines.append(format_table([(alert.severity or "-", alert.name, alert.subject, since)]))
        if alert.description:
            lines.append("  " + alert.description.replace("\n", "\n  "))  # never a line of its own
        lines.append(f"  open:    {alert.link}")
        if alert.outside_link:  # anyone can post an alert: a link elsewhere is named, not offered
            lines.append(f"  runbook outside the configured bases (not opened): {alert.outside_link}")
        lines.append(f"  silence: {alert.silence_url}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    url = args.alertmanager or settings.ALERTMANAGER_URL.get()
    if not url:
        raise ConfigError("no Alertmanager to ask: set GEADMIN_ALERTMANAGER_URL (e.g. "
                          "http://alertmanager:9093) or pass --alertmanager")
    try:
        alerts = active_alerts(settings.parse_http_url(url), settings.dashboard_url())
    except AlertmanagerError as exc:
        print(f"DOWN: {exc}")
        return ExitCode.UNREACHABLE
    print(json.dumps([a.to_json() for a in alerts], indent=2) if args.json else render(alerts))
    return ExitCode.FAILED if alerts else ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "alerts", help="the active alerts (Alertmanager), each with the dashboard page that explains it",
        description="Lists the alerts Alertmanager holds as active (not silenced or inhibited), the most "
        "severe first, each with its triage link (a dashboard deep link, GEADMIN_DASHBOARD_URL) and a "
        "link to silence it. Exit codes: 0 none fires; 1 some fire; 3 Alertmanager does not answer; "
        "2 bad usage.")
    parser.add_argument("--alertmanager", default=None, metavar="URL",
                        help="Alertmanager's base URL (env GEADMIN_ALERTMANAGER_URL)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.set_defaults(func=run)
