"""The local users file: TOML, one table per user, argon2id password hashes (argon2-cffi).

    [users.alice]
    role = "operator"
    password_hash = "$argon2id$v=19$m=65536,t=3,p=4$..."
    must_change = false       # true: asked for a new password at the next sign-in

Written atomically with mode 0600 (it holds hashes). Failed sign-ins are rate-limited per
user inside the dashboard process (`FailedSignIns`); a wrong user and a wrong password get
the same message, and an unknown user costs a hash like a known one.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from geadmin import settings
from geadmin.access.roles import Role
from geadmin.errors import ConfigError, SignInError, SignInRateLimitedError
from geadmin.repository.store import atomic_write

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MIN_PASSWORD_CHARS = 12
USERS_FILE_MODE = 0o600
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
_HASHER = PasswordHasher()  # argon2id with the library's current recommended parameters
_DUMMY_HASH = _HASHER.hash(secrets.token_urlsafe(16))  # unknown users cost a verify too


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    password_hash: str
    must_change: bool = False


def check_name(name: str) -> str:
    if not name or len(name) > 64 or not set(name) <= NAME_CHARS:
        raise ConfigError(f"{name!r} is not a user name: use 1-64 letters, digits, '.', '_', '-' or '@'")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_CHARS:
        raise ConfigError(f"the password is too short: use at least {MIN_PASSWORD_CHARS} characters")
    return password


def default_users_file(home: Path | None = None) -> Path:
    return settings.get("USERS_FILE") or (home or settings.home()) / "users.toml"


class UsersFile:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_users_file()

    def exists(self) -> bool:
        return self.path.is_file()

    def load(self) -> dict[str, User]:
        try:
            document = tomllib.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the users file {self.path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"the users file {self.path} is not valid TOML ({exc}): fix it, or "
                              "recreate it with `geadmin users add`") from exc
        users = {}
        for name, table in document.get("users", {}).items():
            try:
                users[name] = User(name, Role.parse(str(table["role"])), str(table["password_hash"]),
                                   bool(table.get("must_change", False)))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"the users file {self.path}: user {name!r} is malformed ({exc}); "
                                  "it needs role and password_hash") from exc
        return users

    def save(self, users: dict[str, User]) -> None:
        document = {"users": {u.name: {"role": u.role.label, "password_hash": u.password_hash,
                                       "must_change": u.must_change} for u in users.values()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, tomli_w.dumps(document).encode("utf-8"))
        os.chmod(self.path, USERS_FILE_MODE)

    def add(self, name: str, role: Role, password: str, *, must_change: bool = False) -> User:
        users = self.load()
        if check_name(name) in users:
            raise ConfigError(f"user {name!r} exists already: use `geadmin users passwd {name}`")
        users[name] = User(name, role, _HASHER.hash(check_password(password)), must_change)
        self.save(users)
        return users[name]

    def set_password(self, name: str, password: str) -> User:
        users = self.load()
        if name not in users:
            raise ConfigError(f"no user {name!r} in {self.path}")
        users[name] = replace(users[name], password_hash=_HASHER.hash(check_password(password)),
                              must_change=False)
        self.save(users)
        return users[name]

    def set_role(self, name: str, role: Role) -> User:
        users = self.load()
        if name not in users:
            raise ConfigError(f"no user {name!r} in {self.path}")
        users[name] = replace(users[name], role=role)
        self.save(users)
        return users[name]

    def remove(self, name: str) -> None:
        users = self.load()
        if name not in users:
            raise ConfigError(f"no user {name!r} in {self.path}")
        del users[name]
        self.save(users)

    def verify(self, name: str, password: str) -> User:
        """The user, if `password` is theirs; SignInError otherwise (same message either way)."""
        user = self.load().get(name)
        try:
            _HASHER.verify(user.password_hash if user else _DUMMY_HASH, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            user = None
        if user is None:
            raise SignInError("unknown user or wrong password")
        return user


class FailedSignIns:
    """Per-user failed attempts: after `limit` failures within `window_s`, refuse that user for
    `lockout_s` (doubling while the failures go on). Thread-safe; one per dashboard process."""

    def __init__(self, *, limit: int = 5, window_s: float = 300.0, lockout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window_s, self.lockout_s, self.clock = limit, window_s, lockout_s, clock
        self._failures: dict[str, list[float]] = {}
        self._locked_until: dict[str, float] = {}
        self._lockouts: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, name: str) -> None:
        with self._lock:
            wait_s = self._locked_until.get(name, 0.0) - self.clock()
        if wait_s > 0:
            raise SignInRateLimitedError(f"too many failed sign-ins for {name!r}: try again in "
                                         f"{wait_s:.0f} s", retry_after_s=wait_s)

    def failed(self, name: str) -> None:
        now = self.clock()
        with self._lock:
            recent = [t for t in self._failures.get(name, []) if now - t < self.window_s] + [now]
            self._failures[name] = recent
            if len(recent) >= self.limit:
                count = self._lockouts.get(name, 0)
                self._locked_until[name] = now + self.lockout_s * 2**count
                self._lockouts[name] = count + 1
                self._failures[name] = []

    def succeeded(self, name: str) -> None:
        with self._lock:
            for table in (self._failures, self._locked_until, self._lockouts):
                table.pop(name, None)


def sign_in(users: UsersFile, attempts: FailedSignIns, name: str, password: str) -> User:
    """Check the rate limit, then the password; every failure counts."""
    attempts.check(name)
    try:
        user = users.verify(name, password)
    except SignInError:
        attempts.failed(name)
        raise
    attempts.succeeded(name)
    return user


def random_password() -> str:
    return secrets.token_urlsafe(18)  # 24 characters, 144 bits
