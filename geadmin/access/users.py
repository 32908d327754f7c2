"""The local users file: TOML, one table per user, argon2id password hashes (argon2-cffi).

    [users.alice]
    role = "operator"
    password_hash = "$argon2id$v=19$m=65536,t=3,p=4$..."
    must_change = false       # true: asked for a new password at the next sign-in

Written atomically with mode 0600 from the start (it holds hashes), each change (read, modify,
write) under a lock file beside it (`.users.toml.lock`, `geadmin.repository.locks.file_lock`),
so two `geadmin users` commands, or one and the dashboard's first start, never lose a change.
Read only when nobody else can have written it (`UsersFile.read_text`): whoever can write it
can add an admin. A password is set by its own user, or reset by one holding USERS (then it
must be changed at the next sign-in).
A wrong user and a wrong password get the same message, and an unknown user costs a hash like
a known one; the sign-in around the check (rate limits, bounded password checks) is
geadmin.access.signin.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from geadmin import settings
from geadmin.access.guard import Authorization, require
from geadmin.access.identity import Mode
from geadmin.access.roles import REQUIRED_ROLE, GuardedAction, Role
from geadmin.audit import Origin
from geadmin.errors import (
    ConfigError,
    GeAdminError,
    RepositoryError,
    SignInError,
    UserAccountError,
)
from geadmin.repository.atomic import write_secret_atomically
from geadmin.repository.locks import LOCK_WAIT_S, file_lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 1024  # longer is no password anyone types: refused before it is hashed
MAX_NAME_CHARS = 64
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
_HASHER = PasswordHasher()  # argon2id with the library's current recommended parameters


_CACHE: dict[Path, tuple[tuple[int, ...], dict[str, User]]] = {}  # path -> (its stat stamp, its users)
_CACHE_LOCK = threading.Lock()


@functools.cache
def _dummy_hash() -> str:
    """What an unknown user's password is checked against, so a sign-in as nobody costs a verify
    too (made at the first sign-in, not at import: argon2 is slow by design, and every geadmin
    process imports this module)."""
    return _HASHER.hash(secrets.token_urlsafe(16))


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    password_hash: str
    must_change: bool = False


def check_name(name: str) -> str:
    if not name or len(name) > MAX_NAME_CHARS or not set(name) <= NAME_CHARS:
        raise UserAccountError(f"{name!r} is not a user name: use 1-64 letters, digits, '.', '_', '-' or '@'")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_CHARS:
        raise UserAccountError(f"the password is too short: use at least {MIN_PASSWORD_CHARS} characters")
    if len(password) > MAX_PASSWORD_CHARS:
        raise UserAccountError(f"the password is too long: use at most {MAX_PASSWORD_CHARS} characters")
    return password


def default_users_file(home: Path | None = None) -> Path:
    return settings.USERS_FILE.get() or (home or settings.home()) / "users.toml"


class UsersFile:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_users_file()

    def exists(self) -> bool:
        return self.path.is_file()

    def read_text(self) -> str:
        """The file's text, read only when nobody but the dashboard's user (or root) can have
        written it: whoever can write the users file can add an admin. A link is followed only
        to a file in the same directory (a Kubernetes ConfigMap or Secret mounts its files as
        `..data/` links, root-owned, 0644). ConfigError with the fix otherwise."""
        fix = f"`chmod 600 {self.path}`, owned by the dashboard's user (uid {os.geteuid()}), not a link"
        target = self.path.resolve()
        if not target.is_relative_to(self.path.parent.resolve()):
            raise ConfigError(f"the users file {self.path} links out of its directory (to {target}): "
                              f"replace the link with the file itself ({fix})")
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)  # of what was opened: a swap after the checks above changes nothing
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(f"the users file {self.path} is not a regular file: {fix}")
            if info.st_uid not in (os.geteuid(), 0):
                raise ConfigError(f"the users file {self.path} is owned by uid {info.st_uid}, who could add "
                                  f"an admin: {fix}")
            if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise ConfigError(f"the users file {self.path} is writable by others (mode "
                                  f"{stat.S_IMODE(info.st_mode):o}), who could add an admin: {fix}")
            return handle.read().decode("utf-8")

    def load(self) -> dict[str, User]:
        try:
            document = tomllib.loads(self.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the users file {self.path}: {exc}") from exc
        except (tomllib.TOMLDecodeError, RecursionError) as exc:  # tomllib recurses per nesting level
            raise ConfigError(f"the users file {self.path} is not valid TOML ({exc}): fix it, or "
                              "recreate it with `geadmin users add`") from exc
        tables = document.get("users", {})
        if not isinstance(tables, dict):
            raise ConfigError(f"the users file {self.path}: `users` must be tables ([users.NAME]), not "
                              f"{type(tables).__name__}; recreate it with `geadmin users add`")
        users = {}
        for name, table in tables.items():
            try:
                users[name] = User(name, Role.parse(str(table["role"])), str(table["password_hash"]),
                                   bool(table.get("must_change", False)))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"the users file {self.path}: user {name!r} is malformed ({exc}); "
                                  "it needs role and password_hash") from exc
        return users

    def load_cached(self) -> dict[str, User]:
        """`load()`, parsed again only when the file changed (size, mtime, inode, or its owner
        and mode, which `read_text` checks): the dashboard re-reads each signed-in user's role at
        every click."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the users file {self.path}: {exc}") from exc
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode, info.st_uid)
        with _CACHE_LOCK:
            cached = _CACHE.get(self.path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        users = self.load()
        with _CACHE_LOCK:
            _CACHE[self.path] = (stamp, users)
        return users

    def save(self, users: dict[str, User]) -> None:
        document = {"users": {u.name: {"role": u.role.label, "password_hash": u.password_hash,
                                       "must_change": u.must_change} for u in users.values()}}
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_secret_atomically(self.path, tomli_w.dumps(document).encode("utf-8"))

    @contextlib.contextmanager
    def changing(self, *, wait_s: float = LOCK_WAIT_S) -> Iterator[dict[str, User]]:
        """The users, read under the file's lock; saved as left when the block ends normally."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with file_lock(self.path.with_name(f".{self.path.name}.lock"),
                       f"a change of the users file {self.path}: retry in a moment", wait_s=wait_s):
            users = self.load()
            yield users
            self.save(users)

    def add(self, name: str, role: Role, password: str, *, must_change: bool = False,
            auth: Authorization | None = None) -> User:
        require(auth, GuardedAction.USERS)  # before the hash and the lock: nothing runs unauthorized
        hashed = _HASHER.hash(check_password(password))  # before the lock: it takes a while
        with self.changing() as users:
            if check_name(name) in users:
                raise UserAccountError(f"user {name!r} exists already: use `geadmin users passwd {name}`")
            users[name] = User(name, role, hashed, must_change)
        return users[name]

    def set_password(self, name: str, password: str, *, auth: Authorization | None = None) -> User:
        """A user's own new password (`auth` is their signed-in session's, whatever their role),
        or a reset by someone holding USERS: then the password is the resetter's knowledge, so
        the user must choose a new one at the next sign-in."""
        own = (isinstance(auth, Authorization) and auth.who.origin is Origin.DASHBOARD
               and auth.who.name == name)
        if not own:
            require(auth, GuardedAction.USERS)  # before the hash and the lock
        hashed = _HASHER.hash(check_password(password))
        with self.changing() as users:
            if name not in users:
                raise UserAccountError(f"no user {name!r} in {self.path}")
            users[name] = replace(users[name], password_hash=hashed, must_change=not own)
        return users[name]

    def set_role(self, name: str, role: Role, *, auth: Authorization | None = None) -> User:
        require(auth, GuardedAction.USERS)
        with self.changing() as users:
            if name not in users:
                raise UserAccountError(f"no user {name!r} in {self.path}")
            users[name] = replace(users[name], role=role)
        return users[name]

    def remove(self, name: str, *, auth: Authorization | None = None) -> None:
        require(auth, GuardedAction.USERS)
        with self.changing() as users:
            if name not in users:
                raise UserAccountError(f"no user {name!r} in {self.path}")
            del users[name]

    def verify(self, name: str, password: str) -> User:
        """The user, if `password` is theirs; SignInError otherwise (same message either way)."""
        user = self.load().get(name)
        try:
            _HASHER.verify(user.password_hash if user else _dummy_hash(), password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            user = None
        if user is None:
            raise SignInError("unknown user or wrong password")
        if _HASHER.check_needs_rehash(user.password_hash):
            user = self._rehash(user, password)
        return user

    def _rehash(self, user: User, password: str) -> User:
        """`user` with a hash of today's argon2 parameters, saved unless the user changed
        meanwhile; a file that cannot be written (a read-only mount) keeps the old hash."""
        rehashed = replace(user, password_hash=_HASHER.hash(password))
        try:
            with self.changing(wait_s=0.0) as users:  # a sign-in does not wait for a writer
                if users.get(user.name) != user:
                    return user
                users[user.name] = rehashed
        except (ConfigError, RepositoryError):
            return user
        return rehashed  # only once saved: sessions compare their tag with the file's hash


def random_password() -> str:
    return secrets.token_urlsafe(18)  # 24 characters, 144 bits


def still_allowed(auth: Authorization, action: GuardedAction, users: UsersFile | None = None) -> str:
    """"" while the holder of `auth` may still do `action` as the users file says now; why not
    once they were removed or demoted since it was issued: what a background run (a rollout)
    asks before each step. Only local sign-ins are read again: OIDC roles come with the login,
    and the token holder and the OS user own the workspace. An unreadable users file stops the
    run too: who may act cannot be told."""
    if auth.mode is not Mode.LOCAL:
        return ""
    name = auth.who.name
    try:
        user = (users or UsersFile()).load_cached().get(name)
    except GeAdminError as exc:
        return f"who may {action.value} cannot be read now: {exc}"
    if user is None:
        return f"{name} was removed from the users file since this started"
    needed = REQUIRED_ROLE[action]
    if user.role < needed:
        return (f"{name} is {user.role.label} now, and {action.value} needs {needed.label}: demoted since "
                "this started")
    return ""
