"""`scan_components_once` (tests/support/apptest.py) changes no page test's outcome: its result
is a fresh scan's, and AppTest looks the scan up where it is replaced."""

from __future__ import annotations

import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

from tests.support.apptest import scan_components_once


def found(manifests: list[tuple[object, object]]) -> list[tuple[str, str]]:
    return sorted((getattr(manifest, "name", ""), str(root)) for manifest, root in manifests)


def test_the_scan_made_once_is_what_a_fresh_scan_finds() -> None:
    scan_components_once()  # conftest did it; a second call keeps the first
    scanned = manifest_scanner.scan_component_manifests
    assert getattr(scanned, "scanned_once", False)
    assert found(scanned()) == found(scanned.fresh())  # type: ignore[attr-defined]


def test_apptest_asks_the_scanner_module_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def counted(max_workers: int | None = None) -> list[object]:
        asked.append(1)
        return []

    monkeypatch.setattr(manifest_scanner, "scan_component_manifests", counted)
    AppTest.from_string("import streamlit as st\nst.write('hi')\n").run()
    assert asked, "AppTest no longer scans through manifest_scanner: scan_components_once spares nothing"
