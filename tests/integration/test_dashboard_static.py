"""The dashboard serves its static files without errors (a Streamlit / Starlette pairing that
does not fit answers 500 and fills dashboard.log with ASGI tracebacks, which the Stack page
shows to operators)."""

from __future__ import annotations

import re

import requests

from geadmin.stack.dashboard import DashboardProcess


def test_dashboard_serves_static_files_without_asgi_errors(dashboard: DashboardProcess) -> None:
    index = requests.get(dashboard.url, timeout=10)
    assert index.status_code == 200
    assets = sorted(set(re.findall(r'(?:src|href)="\.?/?(static/[^"]+)"', index.text)))
    paths = ["favicon.png", *assets[:6]]
    for path in paths:
        for headers in ({}, {"Accept-Encoding": "gzip"}):
            answer = requests.get(f"{dashboard.url}/{path}", headers=headers, timeout=10)
            assert answer.status_code == 200, f"/{path} {headers}: HTTP {answer.status_code}"
    log = dashboard.log_path.read_text(errors="replace")
    assert "Exception in ASGI application" not in log
    assert "Expected ASGI message" not in log
