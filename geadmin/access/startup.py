"""Before a dashboard starts: which sign-in it will use, so `geadmin up --host 0.0.0.0` with no
sign-in configured (or the dashboard image, which sets GEADMIN_REQUIRE_SIGN_IN, whatever the
bind address) refuses up front instead of serving a dashboard anyone could drive."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from geadmin import settings
from geadmin.access.identity import ModeDecision, resolve_mode
from geadmin.access.users import UsersFile, default_users_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

OIDC_KEYS = ("redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url")


def secrets_files(cwd: Path) -> list[Path]:
    """Where Streamlit reads secrets from: the project's .streamlit/, then the user's."""
    return [cwd / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"]


def oidc_in(files: Iterable[Path]) -> bool:
    """True when one of `files` has an [auth] table with every key st.login needs."""
    for path in files:
        try:
            auth = tomllib.loads(path.read_text(encoding="utf-8")).get("auth")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):  # deep nesting
            continue
        if isinstance(auth, dict) and all(key in auth for key in OIDC_KEYS):
            return True
    return False


def dashboard_sign_in(address: str, cwd: Path, home: Path | None = None) -> ModeDecision:
    """The mode a dashboard bound to `address` will use; ConfigError with the options when it
    would serve other hosts with no sign-in at all."""
    users = UsersFile(default_users_file(home))
    return resolve_mode(settings.AUTH.get(), address=address, users_file_exists=users.exists(),
                        oidc_configured=oidc_in(secrets_files(cwd)), users_file=str(users.path),
                        sign_in_required=settings.REQUIRE_SIGN_IN.get())
