"""The dashboard's Triton clients: one per configured server, with the load timeout the
settings give (GEADMIN_LOAD_TIMEOUT_S), so an operator with slow NPU loads sets it once."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.stack.target import configured_targets
from pages.ui.context import client_for
from tests.support.apptest import isolate


def test_the_dashboard_waits_for_a_load_as_long_as_the_setting_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://127.0.0.1:18999")
    (target,) = configured_targets(None)
    assert client_for(target).load_timeout_s == 120.0  # unset: the default
    monkeypatch.setenv("GEADMIN_LOAD_TIMEOUT_S", "600")
    assert client_for(target).load_timeout_s == 600.0
