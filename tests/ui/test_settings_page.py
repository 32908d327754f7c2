"""The Settings page: every GEADMIN_* variable, sign-in set-up, and secrets only as set / not set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin import settings
from tests.support.apptest import APP, isolate, run

ADMIN_KEY = "key-that-must-never-show-4242"
CLIENT_SECRET = "client-secret-that-must-never-show-77"
COOKIE_SECRET = "cookie-secret-that-must-never-show-99"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_AUTH", "open")  # loopback (tests/conftest.py): no sign-in
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def everything_shown(at: AppTest) -> str:
    parts = [df.value.to_string() for df in at.dataframe]
    for kind in ("markdown", "caption", "code", "error", "info", "warning", "title"):
        parts += [str(e.value) for e in at.get(kind)]
    parts += [str(e.value) for e in at.sidebar.caption]
    return "\n".join(parts)


def settings_page(at: AppTest | None = None) -> AppTest:
    if at is None:
        at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("settings.py")
    return run(at)


def test_every_setting_is_listed_and_the_admin_key_only_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", ADMIN_KEY)
    at = settings_page()
    table = at.dataframe[0].value.set_index("variable")
    assert set(table.index) == {s.env_name for s in settings.SETTINGS.values()}
    assert table.loc["GEADMIN_ADMIN_KEY", "value"] == "set"
    assert table.loc["GEADMIN_AUTH", "value"] == "open"
    assert ADMIN_KEY not in everything_shown(at)
    assert "Mode: **open**" in everything_shown(at)


def test_oidc_secrets_show_as_set_and_the_rest_of_auth_as_written() -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "https://geadmin.example.org/oauth2callback",
                          "cookie_secret": COOKIE_SECRET, "client_id": "geadmin",
                          "client_secret": CLIENT_SECRET,
                          "server_metadata_url": "https://idp.example.org/.well-known/openid-configuration"}
    at = settings_page(at)
    assert len(at.dataframe) == 3, everything_shown(at)  # settings, servers, [auth]
    auth = dict(at.dataframe[2].value.values.tolist())
    assert auth["client_secret"] == "set" and auth["cookie_secret"] == "set"
    assert auth["client_id"] == "geadmin" and auth["redirect_uri"].startswith("https://geadmin.example.org")
    shown = everything_shown(at)
    assert CLIENT_SECRET not in shown and COOKIE_SECRET not in shown


def test_no_admin_key_is_not_set() -> None:
    table = settings_page().dataframe[0].value.set_index("variable")
    assert table.loc["GEADMIN_ADMIN_KEY", "value"] == "not set"


def test_servers_show_whose_key_is_set_and_warn_where_it_travels_unencrypted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URLS", "a=http://10.0.0.5:8000,b=https://10.0.0.6:8000")
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://10.0.0.5:8000")  # GEADMIN_ADMIN_KEY is a's only
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", ADMIN_KEY)
    at = settings_page()
    servers = at.dataframe[1].value.set_index("name")
    assert servers.loc["a", "admin key"] == "set" and servers.loc["b", "admin key"] == "not set"
    assert servers.loc["a", "gRPC"] == "grpc://10.0.0.5:8001"
    (warning,) = [w.value for w in at.warning]
    assert "sent unencrypted to http://10.0.0.5:8000" in warning
    assert ADMIN_KEY not in everything_shown(at)
