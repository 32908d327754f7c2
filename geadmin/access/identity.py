"""Who is signed in, how they signed in, and how long a session lives.

Sign-in modes (GEADMIN_AUTH):
- `auto` (default): OIDC when Streamlit's `[auth]` secrets are configured, else the local
  users file when it exists, else a token (Jupyter's convention, `token.py`) when the
  dashboard listens on a loopback address only (and GEADMIN_REQUIRE_SIGN_IN is not set, as
  the dashboard image sets it), else refuse to start (`resolve_mode` says why and what to do).
  Loopback alone never makes anyone admin: behind a reverse proxy on the same host
  (`proxy_pass http://127.0.0.1:8501`) every visitor's request comes from loopback;
- `local`: the users file; when it does not exist yet, an `admin` with a random password is
  created on first start (the compose stack's secure default, `bootstrap.py`);
- `oidc`: Streamlit's `st.login` with an identity provider; roles from a claim;
- `token`: the token `geadmin up` prints, asked once per browser session (`token.py`);
- `open`: no sign-in, chosen explicitly, allowed on loopback only (the single local user is
  an admin, and every page says so), never when GEADMIN_REQUIRE_SIGN_IN is set, and never
  for a request that came through a reverse proxy or names another host
  (`open_request_problem`: each request is checked).
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from geadmin.access.roles import Role
from geadmin.audit import Actor, os_user_name
from geadmin.errors import ConfigError, SignInError

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class Mode(str, enum.Enum):
    OPEN = "open"
    LOCAL = "local"
    OIDC = "oidc"
    TOKEN = "token"


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

    @classmethod
    def token_holder(cls) -> Identity:
        """Whoever brought the dashboard's token: the account that started it holds the file."""
        return cls(os_user_name(), Role.ADMIN, Mode.TOKEN)


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
           "[auth] in .streamlit/secrets.toml and set GEADMIN_AUTH=oidc; (3) a token — set "
           "GEADMIN_AUTH=token and open the link `geadmin up` prints. Or bind 127.0.0.1 "
           "(--host 127.0.0.1): with no users the dashboard then asks for that token by itself.")


REQUIRED = ("GEADMIN_REQUIRE_SIGN_IN is set (the dashboard image sets it: a container's port is "
            "published to other hosts whatever address the dashboard binds inside it), so the dashboard "
            "needs sign-in: ")


def resolve_mode(setting: str, *, address: str | None, users_file_exists: bool, oidc_configured: bool,
                 users_file: str = "the users file", sign_in_required: bool = False) -> ModeDecision:
    """The sign-in mode for `setting` (GEADMIN_AUTH); ConfigError with the options when the
    dashboard would be reachable from other hosts without any sign-in, or when sign-in is
    required (GEADMIN_REQUIRE_SIGN_IN) and none is configured."""
    choice = setting.strip().lower()
    refusal = REFUSAL.format(address=address or "every interface", users_file=users_file)
    if choice != "auto":
        return _chosen_mode(choice, address=address, users_file_exists=users_file_exists,
                            oidc_configured=oidc_configured, sign_in_required=sign_in_required,
                            refusal=refusal)
    if oidc_configured:
        return ModeDecision(Mode.OIDC)
    if users_file_exists:
        return ModeDecision(Mode.LOCAL)
    if sign_in_required:
        raise ConfigError(REQUIRED + refusal.partition(". ")[2])
    if is_loopback(address):
        return ModeDecision(Mode.TOKEN)  # never OPEN: a proxy on this host makes every visitor loopback
    raise ConfigError(refusal)


def _chosen_mode(choice: str, *, address: str | None, users_file_exists: bool, oidc_configured: bool,
                 sign_in_required: bool, refusal: str) -> ModeDecision:
    """GEADMIN_AUTH set to a mode by name."""
    if choice == "oidc":
        if not oidc_configured:
            raise ConfigError("GEADMIN_AUTH=oidc but .streamlit/secrets.toml has no [auth] section with "
                              "redirect_uri, cookie_secret, client_id, client_secret and "
                              "server_metadata_url: add it (see docs/security.md, 'Sign-in')")
        return ModeDecision(Mode.OIDC)
    if choice == "local":
        return ModeDecision(Mode.LOCAL, bootstrap=not users_file_exists)
    if choice == "token":
        return ModeDecision(Mode.TOKEN)
    if choice == "open":
        if sign_in_required:
            raise ConfigError("GEADMIN_AUTH=open is refused: " + REQUIRED + refusal.partition(". ")[2])
        if not is_loopback(address):
            raise ConfigError("GEADMIN_AUTH=open is allowed on a loopback address only: " + refusal)
        return ModeDecision(Mode.OPEN)
    raise ConfigError(f"GEADMIN_AUTH must be auto, local, oidc, token or open, got {choice!r}")


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
    peer = remote_ip if isinstance(remote_ip, str) and remote_ip else "loopback"  # none: AppTest
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
            raise ConfigError(f"GEADMIN_OIDC_ROLE_MAP: {exc}") from exc
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


def oidc_name(claims: Mapping[str, object]) -> str:
    """The name the audit keeps for an OIDC user: the email only when the provider says it verified
    it (anyone may type any address into an unverified one), else preferred_username beside the
    subject `sub`, the one claim OIDC keeps stable and unique."""
    email = claims.get("email")
    if isinstance(email, str) and email and claims.get("email_verified") in (True, "true"):
        return email
    username, subject = (str(claims.get(key) or "") for key in ("preferred_username", "sub"))
    if username and subject and username != subject:
        return f"{username} (sub {subject})"
    if username or subject:
        return username or subject
    raise SignInError("the identity provider sent no verified email, preferred_username or sub claim")


def oidc_identity(claims: Mapping[str, object], claim: str, mapping: Mapping[str, Role],
                  default: Role | None) -> Identity:
    return Identity(oidc_name(claims), role_from_claims(claims, claim, mapping, default), Mode.OIDC)
