"""What every AppTest module needs: the app, a run that fails on an exception, buttons by
label, and an environment that points the app at one test server and nothing else; and
`scan_components_once`, which spares each AppTest Streamlit's scan of every installed package."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

from geadmin.stack.tritonserver import TritonProcess

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
TARGET_VARIABLES = ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY",
                    "STACK")


def scan_components_once() -> None:
    """Every AppTest asks Streamlit for the installed packages' v2 components, a scan that
    parses the metadata of each (about 1 s of CPU here: a fifth of a page test). The packages
    do not change while the tests run, so this process scans once and hands each later AppTest
    that result (tests/unit/test_apptest_support.py compares it with a fresh scan)."""
    scan = manifest_scanner.scan_component_manifests
    if getattr(scan, "scanned_once", False):
        return
    once = functools.cache(lambda: tuple(scan()))

    def scanned(max_workers: int | None = None) -> list[Any]:
        return list(once())

    scanned.scanned_once = True  # type: ignore[attr-defined]
    scanned.fresh = scan  # type: ignore[attr-defined]
    manifest_scanner.scan_component_manifests = scanned


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


def page_pointed_at(monkeypatch: pytest.MonkeyPatch, triton: TritonProcess, home: Path) -> Iterator[None]:
    """An autouse fixture's body: a private home, the app pointed at `triton`, Streamlit's data
    cache cleared before and after."""
    isolate(monkeypatch, home)
    point_at(monkeypatch, triton)
    st.cache_data.clear()
    yield
    st.cache_data.clear()


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
