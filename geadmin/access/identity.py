"""Who is signed in, how they signed in, and how long a session lives.

Sign-in modes (GEADMIN_AUTH):
- `auto` (default): OIDC when Streamlit's `[auth]` secrets are configured, else the local
  users file when it exists, else no sign-in when the dashboard listens on a loopback address
  only (and GEADMIN_REQUIRE_SIGN_IN is not set, as the dashboard image sets it), else refuse
  to start (`resolve_mode` says why and what to do);
- `local`: the users file; when it does not exist yet, an `admin` with a random password is
  created on first start (the compose stack's secure default, `bootstrap.py`);
- `oidc`: Streamlit's `st.login` with an identity provider; roles from a claim;
- `open`: no sign-in, allowed on loopback only (the single local user is an admin), never
  when GEADMIN_REQUIRE_SIGN_IN is set, and never for a request that came through a reverse
  proxy or names another host (`open_request_problem`: each request is checked).

Sessions end after GEADMIN_SESSION_IDLE_MIN without activity and GEADMIN_SESSION_MAX_H after
sign-in, whatever the activity; a local session also ends when its user is removed or given
a new password, and takes a changed role at the next click (`refreshed`). An OIDC login is
tracked across the browser's tabs by `OidcLogins`, so an idle or old login stays signed out.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from geadmin.access.roles import Role
from geadmin.access.users import User
from geadmin.audit import Actor, os_user_name
from geadmin.errors import ConfigError, SessionExpiredError, SignInError

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class Mode(str, enum.Enum):
    OPEN = "open"
    LOCAL = "local"
    OIDC = "oidc"


@dataclass(frozen=True)
class Identity:
    name: str
    role: Role
    mode: Mode
    must_change: bool = False  # a first-start or reset password: set a new one before anything

    def actor(self) -> Actor:
        return Actor.dashboard(self.name)

    @classmethod
    def local_admin(cls) -> Identity:
        """The one user of a dashboard without sign-in (loopback only)."""
        return cls(os_user_name(), Role.ADMIN, Mode.OPEN)


def is_loopback(address: str | None) -> bool:
    """True only for an address that cannot be reached from another host; unset means all."""
    if not address:
        return False
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ModeDecision:
    mode: Mode
    bootstrap: bool = False  # local mode with no users file yet: create the first admin


REFUSAL = ("the dashboard would listen on {address} with no sign-in configured, so anyone who "
           "reaches the port could unload models and rewrite configs. Choose one: (1) local users — "
           "`geadmin users add NAME --role admin` (creates {users_file}), or set GEADMIN_AUTH=local to "
           "have an admin with a random password created at start; (2) OpenID Connect — configure "
           "[auth] in .streamlit/secrets.toml and set GEADMIN_AUTH=oidc. Or bind 127.0.0.1 "
           "(--host 127.0.0.1) to run without sign-in on this machine only.")


REQUIRED = ("GEADMIN_REQUIRE_SIGN_IN is set (the dashboard image sets it: a container's port is "
            "published to other hosts whatever address the dashboard binds inside it), so the dashboard "
            "needs sign-in: ")


def resolve_mode(setting: str, *, address: str | None, users_file_exists: bool, oidc_configured: bool,
                 users_file: str = "the users file", sign_in_required: bool = False) -> ModeDecision:
    """The sign-in mode for `setting` (GEADMIN_AUTH); ConfigError with the options when the
    dashboard would be reachable from other hosts without any sign-in, or when sign-in is
    required (GEADMIN_REQUIRE_SIGN_IN) and none is configured."""
    choice = setting.strip().lower()
    if choice == "oidc":
        if not oidc_configured:
            raise ConfigError("GEADMIN_AUTH=oidc but .streamlit/secrets.toml has no [auth] section with "
                              "redirect_uri, cookie_secret, client_id, client_secret and "
                              "server_metadata_url: add it (see docs/security.md, 'Sign-in')")
        return ModeDecision(Mode.OIDC)
    if choice == "local":
        return ModeDecision(Mode.LOCAL, bootstrap=not users_file_exists)
    refusal = REFUSAL.format(address=address or "every interface", users_file=users_file)
    if choice == "open":
        if sign_in_required:
            raise ConfigError("GEADMIN_AUTH=open is refused: " + REQUIRED + refusal.partition(". ")[2])
        if not is_loopback(address):
            raise ConfigError("GEADMIN_AUTH=open is allowed on a loopback address only: " + refusal)
        return ModeDecision(Mode.OPEN)
    if choice != "auto":
        raise ConfigError(f"GEADMIN_AUTH must be auto, local, oidc or open, got {setting!r}")
    if oidc_configured:
        return ModeDecision(Mode.OIDC)
    if users_file_exists:
        return ModeDecision(Mode.LOCAL)
    if sign_in_required:
        raise ConfigError(REQUIRED + refusal.partition(". ")[2])
    if is_loopback(address):
        return ModeDecision(Mode.OPEN)
    raise ConfigError(refusal)


FORWARDED_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP")


def open_request_problem(headers: Mapping[str, str]) -> str:
    """Why a dashboard without sign-in must not serve this request ("" when it may): it came
    through a reverse proxy (forwarded headers), or it names a host that is not loopback (a
    proxy passing the visitor's Host, or a web page rebinding its DNS name to 127.0.0.1)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    forwarded = [name for name in FORWARDED_HEADERS if name.lower() in lowered]
    if forwarded:
        return (f"this request came through a reverse proxy (it carries {', '.join(forwarded)}), and a "
                "dashboard without sign-in serves this machine only")
    host = lowered.get("host", "")
    try:
        name = urlsplit(f"//{host}").hostname or ""
    except ValueError:  # a malformed Host header
        name = ""
    if host and not is_loopback(name):
        return (f"this request names the host {host!r}, and a dashboard without sign-in answers only to "
                "localhost, 127.0.0.1 or [::1]")
    return ""


def client_address(remote_ip: str | None, headers: Mapping[str, str], proxy_hops: int) -> str:
    """The address sign-in limits count against: the connection's peer, or with `proxy_hops`
    reverse proxies in front (GEADMIN_PROXY_HOPS), the address the outermost of them saw,
    read from the right of X-Forwarded-For (the left part is whatever the client sent)."""
    peer = remote_ip or "loopback"
    if proxy_hops <= 0:
        return peer
    lowered = {key.lower(): value for key, value in headers.items()}
    chain = [part.strip() for part in lowered.get("x-forwarded-for", "").split(",") if part.strip()]
    if len(chain) < proxy_hops:
        return peer  # fewer hops than configured: the proxy chain is not what we were told
    return chain[-proxy_hops]


# -- OIDC: roles from a claim -------------------------------------------------------------
def parse_role_map(text: str) -> dict[str, Role]:
    """`ml-admins=admin,oncall=operator` -> {group: role}."""
    mapping: dict[str, Role] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        group, sep, role = item.rpartition("=")
        if not sep or not group.strip():
            raise ConfigError(f"GEADMIN_OIDC_ROLE_MAP: {item!r} is not GROUP=ROLE")
        try:
            mapping[group.strip()] = Role.parse(role)
        except ValueError as exc:
            raise ConfigError(f"GEADMIN_OIDC_ROLE_MAP: {exc}") from None
    return mapping


def role_from_claims(claims: Mapping[str, object], claim: str, mapping: Mapping[str, Role],
                     default: Role | None) -> Role:
    """The highest role any of the user's groups maps to, else `default`."""
    value = claims.get(claim)
    groups: Iterable[object] = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    roles = [mapping[str(g)] for g in groups if str(g) in mapping]
    if roles:
        return max(roles)
    if default is None:
        raise SignInError(f"your account is in no group that GEADMIN_OIDC_ROLE_MAP maps to a role "
                          f"(claim {claim!r}): ask an admin to add your group")
    return default


def oidc_identity(claims: Mapping[str, object], claim: str, mapping: Mapping[str, Role],
                  default: Role | None) -> Identity:
    name = str(claims.get("email") or claims.get("preferred_username") or claims.get("sub") or "")
    if not name:
        raise SignInError("the identity provider sent no email, preferred_username or sub claim")
    return Identity(name, role_from_claims(claims, claim, mapping, default), Mode.OIDC)


# -- sessions -------------------------------------------------------------------------------
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
