"""Sign-in without users, Jupyter's way (geadmin/access/token.py): the token file is private
and written whole, a guess is compared in constant time and rate-limited per client, the
link carries it, `geadmin dashboard --print-url` finds it again; a browser keeps its sign-in
across reloads through BrowserSessions, bounded and holding no cookie in clear."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from geadmin.access import token
from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import Role
from geadmin.access.sessions import BrowserSessions, Session, session_cookie_name
from geadmin.access.signin import FailedSignIns
from geadmin.access.token import (
    check_token,
    ensure_token,
    new_token,
    read_token,
    sign_in_url,
    token_file,
    token_matches,
)
from geadmin.cli.main import main
from geadmin.errors import SignInError, SignInRateLimitedError, SignInTokenError


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_token_is_private_random_and_replaces_the_last(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = new_token(home)
    assert mode_of(token_file(home)) == 0o600 and mode_of(home) == 0o700
    assert len(first) == 48 and int(first, 16) >= 0
    second = new_token(home)
    assert second != first and read_token(home) == second  # a new start: old links stop working
    assert sorted(p.name for p in home.iterdir()) == ["dashboard-token"]  # no temp file left behind


def test_a_token_file_someone_made_readable_is_replaced_private(tmp_path: Path) -> None:
    token_file(tmp_path).write_text("left by hand\n")
    token_file(tmp_path).chmod(0o644)
    new_token(tmp_path)
    assert mode_of(token_file(tmp_path)) == 0o600


def test_reading_the_token(tmp_path: Path) -> None:
    assert read_token(tmp_path) is None
    value, created = ensure_token(tmp_path)
    assert created and read_token(tmp_path) == value
    assert ensure_token(tmp_path) == (value, False)  # a dashboard started later keeps `up`'s token
    token_file(tmp_path).write_text("not-a-token\n")
    with pytest.raises(SignInTokenError, match="holds no sign-in token geadmin wrote"):
        read_token(tmp_path)
    token_file(tmp_path).write_bytes(b"\xff" * 48)
    with pytest.raises(SignInTokenError, match="cannot read the dashboard's sign-in token"):
        read_token(tmp_path)


@pytest.mark.parametrize(("given", "matches"), [
    ("ab" * 24, True), (" " + "ab" * 24 + "\n", True), ("ab" * 23, False), ("AB" * 24, False), ("", False),
    ("ab" * 24 + "x", False), ("ä" * 48, False), ("ab" * 10_000, False)])
def test_token_comparison(given: str, matches: bool) -> None:
    assert token_matches(given, "ab" * 24) is matches


def test_the_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    monkeypatch.setattr(token.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or a == b)
    assert token_matches("cd" * 24, "cd" * 24)
    assert calls == [(b"cd" * 24, b"cd" * 24)]


def test_wrong_tokens_are_rate_limited_per_client(tmp_path: Path) -> None:
    right = new_token(tmp_path)
    attempts = FailedSignIns(limit=3, client_limit=10)
    check_token(tmp_path, attempts, right, client="10.0.0.1")
    for _ in range(3):
        with pytest.raises(SignInError, match=r"wrong token.*geadmin dashboard --print-url"):
            check_token(tmp_path, attempts, "0" * 48, client="10.0.0.1")
    with pytest.raises(SignInRateLimitedError, match="too many failed sign-ins"):
        check_token(tmp_path, attempts, right, client="10.0.0.1")  # even the right one, while locked out
    check_token(tmp_path, attempts, right, client="127.0.0.1")  # another client is not locked out


def test_without_a_token_file_nobody_gets_in(tmp_path: Path) -> None:
    with pytest.raises(SignInTokenError, match=r"has no sign-in token.*start it again"):
        check_token(tmp_path, FailedSignIns(), "ab" * 24, client="127.0.0.1")


def test_the_link_carries_the_token(tmp_path: Path) -> None:
    assert sign_in_url("http://127.0.0.1:8501", "ab") == "http://127.0.0.1:8501/?token=ab"
    assert sign_in_url("http://127.0.0.1:8501/stack", "ab") == "http://127.0.0.1:8501/stack?token=ab"


def test_print_url_reads_the_workspace_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    monkeypatch.setenv("GEADMIN_DASHBOARD_PORT", "18555")
    monkeypatch.delenv("GEADMIN_HOST", raising=False)
    assert main(["dashboard", "--print-url"]) != 0
    assert "no dashboard sign-in token in" in capsys.readouterr().err
    value = new_token(tmp_path)
    assert main(["dashboard", "--print-url"]) == 0
    assert capsys.readouterr().out.strip() == f"http://127.0.0.1:18555/?token={value}"


# -- a sign-in that survives a reload ---------------------------------------------------------
def session(name: str = "ann") -> Session:
    return Session(Identity(name, Role.ADMIN, Mode.TOKEN), 1.0, 1.0)


def test_browser_sessions_find_a_session_by_its_cookie_only() -> None:
    sessions = BrowserSessions()
    cookie = BrowserSessions.new_id()
    assert len(cookie) >= 40 and cookie != BrowserSessions.new_id()
    sessions.save(cookie, session())
    assert sessions.get(cookie) == session()
    assert sessions.get(cookie[:-1] + ("A" if cookie[-1] != "A" else "B")) is None
    assert sessions.get(None) is None and sessions.get("") is None and sessions.get("x" * 10_000) is None
    assert cookie not in repr(sessions._table)  # a digest only: the table hands no cookie out
    sessions.drop(cookie)
    assert sessions.get(cookie) is None


def test_browser_sessions_are_bounded() -> None:
    sessions = BrowserSessions(max_entries=3)
    cookies = [BrowserSessions.new_id() for _ in range(5)]
    for n, cookie in enumerate(cookies):
        sessions.save(cookie, session(f"u{n}"))
    assert len(sessions) == 3
    assert sessions.get(cookies[0]) is None and sessions.get(cookies[4]) == session("u4")


def test_each_dashboard_port_has_its_own_cookie() -> None:
    assert session_cookie_name(8501) != session_cookie_name(8502)
