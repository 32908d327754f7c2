"""Sign-in with a token, Jupyter's way, for a dashboard with no users configured.

Protocol (GEADMIN_AUTH=auto with no users file and no OIDC, or GEADMIN_AUTH=token):
1. Each start of `geadmin up` or `geadmin dashboard` writes a new random token (192 bits,
   hex) to `$GEADMIN_HOME/dashboard-token`: created 0600 in a 0700 workspace, through a temp
   file and a rename (`write_secret_atomically`), so no other account can read it, not even
   half-written. A dashboard started some other way (`streamlit run pages/app.py`) creates
   one when the file is missing. Links from an earlier start stop working.
2. The launcher prints `http://HOST:PORT/?token=TOKEN` beside the other addresses;
   `geadmin dashboard --print-url` prints it again later (read from the file). The log of
   the dashboard process itself never holds the token.
3. The dashboard asks every new browser session for the token, whatever address or Host a
   request names: from the `token` query parameter (then removed from the URL) or a form.
   It is compared with `hmac.compare_digest`, against the file as it is now; wrong guesses
   are rate-limited per client like password sign-ins (`FailedSignIns`).
4. A right token makes that browser session the admin, audited as the account that started
   the dashboard (it holds the file); the session then lives like any other (idle and age
   limits, surviving a reload: `sessions.BrowserSessions`).
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from geadmin import disk
from geadmin.access.signin import FailedSignIns
from geadmin.errors import ConfigError, SignInError, SignInTokenError
from geadmin.repository.atomic import private_directory, write_secret_atomically

TOKEN_FILE = "dashboard-token"
TOKEN_BYTES = 24  # 48 hex characters, as Jupyter's
MAX_TOKEN_CHARS = 256  # longer is no token of ours: refused before it is compared
TOKEN_NAME = "(token)"  # the name failed token sign-ins count under, per client


def token_file(home: Path) -> Path:
    return home / TOKEN_FILE


def new_token(home: Path) -> str:
    """A fresh token in the workspace (0600, atomic), replacing any earlier one."""
    token = secrets.token_hex(TOKEN_BYTES)
    try:
        private_directory(home)
    except OSError as exc:
        fix = disk.next_step(exc, home, "set GEADMIN_HOME to a writable directory")
        raise ConfigError(f"cannot create the workspace {home}: {exc.strerror or exc}; {fix}") from exc
    write_secret_atomically(token_file(home), (token + "\n").encode())
    return token


def read_token(home: Path) -> str | None:
    """The workspace's token; None when there is none. SignInTokenError when the file cannot be read
    or holds no token of ours (then nobody gets in with one until the dashboard starts again)."""
    path = token_file(home)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SignInTokenError(f"cannot read the dashboard's sign-in token {path}: {exc}: start the "
                               f"dashboard "
                          "again (`geadmin up` or `geadmin dashboard` writes a new one)") from exc
    if len(text) != 2 * TOKEN_BYTES or any(c not in "0123456789abcdef" for c in text):
        raise SignInTokenError(f"{path} holds no sign-in token geadmin wrote: start the dashboard again "
                          "(`geadmin up` or `geadmin dashboard` writes a new one)")
    return text


def ensure_token(home: Path) -> tuple[str, bool]:
    """The workspace's token, and True when it had to be created now."""
    token = read_token(home)
    return (token, False) if token is not None else (new_token(home), True)


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an over-long or non-ASCII guess is simply wrong."""
    if not given or len(given) > MAX_TOKEN_CHARS or not given.isascii():
        return False
    return hmac.compare_digest(given.strip().encode("ascii"), expected.encode("ascii"))


def check_token(home: Path, attempts: FailedSignIns, given: str, *, client: str) -> None:
    """Nothing when `given` is the workspace's token now; SignInError (rate-limited per
    client, SignInRateLimitedError while locked out) otherwise. SignInTokenError when the
    workspace has no usable token."""
    name = f"{TOKEN_NAME}@{client}"  # per client: a stranger's guesses never lock the owner out
    attempts.check(name, client)  # reserves the attempt: settled below whatever happens
    try:
        expected = read_token(home)
    except BaseException:
        attempts.released(name, client)
        raise
    if expected is None:
        attempts.released(name, client)  # no guess was judged
        raise SignInTokenError(f"the dashboard has no sign-in token ({token_file(home)} is missing): "
                               f"start it "
                          "again with `geadmin up` or `geadmin dashboard`")
    if not token_matches(given, expected):
        attempts.failed(name, client)
        raise SignInError("wrong token: copy the link `geadmin up` printed, or run "
                          "`geadmin dashboard --print-url` on the dashboard's host")
    attempts.succeeded(name, client)


def sign_in_url(base_url: str, token: str) -> str:
    """`http://127.0.0.1:8501` -> `http://127.0.0.1:8501/?token=...` (the path kept)."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", f"token={token}", ""))
