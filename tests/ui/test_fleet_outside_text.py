"""The Fleet page's Sources, Down and Failed lines quote what discovery and members said — a
Prometheus job or pod label, a Kubernetes name, an untrusted member's error body — inside
geadmin's sentences: shown as text, never a link or an image the browser would fetch
(DESIGN.md: outside input is rendered as text). The page's markdown is read back by a real
CommonMark parser (tests/support/markdown_render.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import isolate
from tests.support.markdown_render import render


def fleet_with_a_hostile_source() -> None:
    from geadmin.fleet.discovery import Discovery, Fleet, Found
    from geadmin.fleet.status import FleetStatus
    from pages.fleet import show_status

    said = "[fix here](http://evil.example/login) ![x](http://evil.example/t.png)"
    found = Found("prometheus:x", (), error=f"pod {said} did not answer")
    show_status(FleetStatus(Discovery(Fleet("f", ("prometheus:x",)), (), (found,)), (), 0.1))


def test_what_a_source_said_is_shown_as_text_never_a_link(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    at = AppTest.from_function(fleet_with_a_hostile_source, default_timeout=60).run()
    assert not at.exception, at.exception
    (sources,) = [m.value for m in at.markdown if m.value.startswith("**Sources**")]
    shown = render(sources)
    assert not shown.links, shown.links
    assert "fix here" in shown.words and "evil" in shown.words  # shown, as its characters
