"""What every AppTest module needs: the app, a run that fails on an exception, buttons by
label, and an environment that points the app at one test server and nothing else."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.stack.tritonserver import TritonProcess

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
TARGET_VARIABLES = ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY",
                    "STACK")


def isolate(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No server, log, repository or stack from the developer's environment; a private home."""
    for name in TARGET_VARIABLES:
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(home))


def point_at(monkeypatch: pytest.MonkeyPatch, triton: TritonProcess) -> TritonProcess:
    """The app talks to `triton`, reads its log and edits its repository."""
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(triton.log_path))
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(triton.repository))
    return triton


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def change_session(at: AppTest, **changes: Any) -> None:
    """Change `at`'s signed-in session (age it) as time would: in the tab, and in the browser's
    session table that a reload or another tab reads (pages.ui.access: the table is the truth)."""
    from pages.ui import access_browser, keys

    session = replace(at.session_state[keys.ACCESS_SESSION], **changes)
    at.session_state[keys.ACCESS_SESSION] = session
    if keys.ACCESS_COOKIE in at.session_state:  # AppTest's state has no .get
        access_browser.sessions().save(at.session_state[keys.ACCESS_COOKIE], session)


def button(at: AppTest, label: str) -> object:
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r}; have {[b.label for b in at.button]}"
    return matches[0]
