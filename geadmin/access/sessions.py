"""Sessions: how long a dashboard sign-in lasts, and what it may still do.

A session ends after GEADMIN_SESSION_IDLE_MIN without activity and GEADMIN_SESSION_MAX_H
after sign-in, whatever the activity. A local session also ends when its user is removed
from the users file or given a new password by someone else, and takes a changed role at the
next click (`refreshed`). An OIDC login is tracked across the browser's tabs by `OidcLogins`
(Streamlit keeps `st.user` in a cookie that outlives a tab), so an idle or old login stays
signed out until the user signs in at the provider again. A local or token sign-in
survives a reload of the page through `BrowserSessions` (a session cookie naming a session
this process keeps), within the same idle and age limits.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import Role
from geadmin.access.users import User
from geadmin.errors import SessionExpiredError


@dataclass(frozen=True)
class Session:
    identity: Identity
    last_seen_s: float  # monotonic clock
    started_s: float | None = None  # monotonic; None: `last_seen_s` at creation
    password_tag: str = ""  # local users: a digest of the hash signed in with ("" for others)

    def touched(self, now_s: float, idle_s: float, max_s: float | None = None, *,
                touch: bool = True) -> Session:
        """This session at `now_s`; SessionExpiredError after `idle_s` idle or `max_s` after
        sign-in. `touch=False` checks without counting as activity (a fragment's timer)."""
        if now_s - self.last_seen_s > idle_s:
            raise SessionExpiredError(f"signed out after {idle_s / 60:g} minutes without activity: "
                                      "sign in again")
        started_s = self.last_seen_s if self.started_s is None else self.started_s
        if max_s is not None and now_s - started_s > max_s:
            raise SessionExpiredError(f"signed out: sessions last at most {max_s / 3600:g} hours "
                                      "(GEADMIN_SESSION_MAX_H): sign in again")
        return replace(self, last_seen_s=now_s, started_s=started_s) if touch else self


def password_tag(user: User) -> str:
    """Changes whenever the user's password does (never the hash itself in the session)."""
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def local_session(user: User, now_s: float) -> Session:
    identity = Identity(user.name, user.role, Mode.LOCAL, must_change=user.must_change)
    return Session(identity, now_s, now_s, password_tag(user))


def refreshed(session: Session, users: Mapping[str, User]) -> Session:
    """A local session with its user's role read again from the users file: a demoted user
    has the new role at the next click; a removed user, or one given a new password by
    someone else, is signed out (SessionExpiredError)."""
    if session.identity.mode is not Mode.LOCAL:
        return session
    name = session.identity.name
    user = users.get(name)
    if user is None:
        raise SessionExpiredError(f"signed out: the user {name!r} no longer exists: ask an admin")
    if session.password_tag and password_tag(user) != session.password_tag:
        raise SessionExpiredError(f"signed out: the password of {name!r} was changed: sign in with the "
                                  "new one")
    identity = replace(session.identity, role=user.role, must_change=user.must_change)
    return session if identity == session.identity else replace(session, identity=identity)


def login_key(claims: Mapping[str, object]) -> str:
    """One OIDC login: each sign-in at the provider gives a new token (iat, nonce), so a new key."""
    return hashlib.sha256(json.dumps(claims, sort_keys=True, default=str).encode()).hexdigest()


class OidcLogins:
    """OIDC logins seen by this dashboard process, across browser tabs: Streamlit keeps
    `st.user` in a cookie that outlives a browser session, so the idle and age limits are
    kept here, per login, not per tab. An ended login stays ended until the user signs in
    at the provider again. Thread-safe, at most `max_entries` logins (oldest activity goes)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._seen: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (first, last)
        self._ended: OrderedDict[str, str] = OrderedDict()  # key -> why
        self._lock = threading.Lock()

    def touch(self, claims: Mapping[str, object], now_s: float, idle_s: float, max_s: float, *,
              touch: bool = True) -> None:
        """SessionExpiredError when this login has ended, idled past `idle_s` or is older than
        `max_s` (from its `iat` claim when present); wall-clock seconds."""
        key = login_key(claims)
        issued = claims.get("iat")
        with self._lock:
            if key in self._ended:
                raise SessionExpiredError(self._ended[key])
            first_s, last_s = self._seen.pop(key, (now_s, now_s))
            if isinstance(issued, (int, float)) and not isinstance(issued, bool):
                first_s = min(first_s, float(issued))
            try:
                Session(Identity("", Role.VIEWER, Mode.OIDC), last_s, first_s).touched(now_s, idle_s, max_s)
            except SessionExpiredError as exc:
                self._end(key, str(exc))
                raise
            self._seen[key] = (first_s, now_s if touch else last_s)
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)

    def end(self, claims: Mapping[str, object], why: str) -> None:
        with self._lock:
            self._seen.pop(login_key(claims), None)
            self._end(login_key(claims), why)

    def _end(self, key: str, why: str) -> None:
        self._ended[key] = why
        while len(self._ended) > self.max_entries:
            self._ended.popitem(last=False)


SESSION_COOKIE = "geadmin_session"
COOKIE_ID_BYTES = 32


def session_cookie_name(port: int | str) -> str:
    """Cookies are shared by every port of a host: one name per dashboard port, so two
    dashboards on one machine never read each other's."""
    return f"{SESSION_COOKIE}_{port}"


class BrowserSessions:
    """Signed-in sessions by browser, so a reload or a deep link opened in the same browser
    keeps its sign-in: the browser holds a random id in a session cookie (gone when the
    browser closes), this dashboard process holds the session (the idle and age limits go on
    counting, a restart of the dashboard signs everyone out). Only a digest of the id is kept,
    so this table reveals no cookie. Thread-safe, at most `max_entries` sessions (the least
    recently active go first)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._table: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._table)

    @staticmethod
    def new_id() -> str:
        return secrets.token_urlsafe(COOKIE_ID_BYTES)

    @staticmethod
    def _key(cookie_id: str) -> str:
        return hashlib.sha256(cookie_id.encode("utf-8", "replace")).hexdigest()

    def save(self, cookie_id: str, session: Session) -> None:
        key = self._key(cookie_id)
        with self._lock:
            self._table.pop(key, None)
            self._table[key] = session
            while len(self._table) > self.max_entries:
                self._table.popitem(last=False)

    def get(self, cookie_id: str | None) -> Session | None:
        """The session this cookie names; None for no cookie, an unknown or an ended one."""
        if not cookie_id or len(cookie_id) > 128:
            return None
        with self._lock:
            return self._table.get(self._key(cookie_id))

    def drop(self, cookie_id: str | None) -> None:
        if cookie_id:
            with self._lock:
                self._table.pop(self._key(cookie_id), None)
