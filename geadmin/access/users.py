"""The local users file: TOML, one table per user, argon2id password hashes (argon2-cffi).

    [users.alice]
    role = "operator"
    password_hash = "$argon2id$v=19$m=65536,t=3,p=4$..."
    must_change = false       # true: asked for a new password at the next sign-in

Written atomically with mode 0600 from the start (it holds hashes), each change (read, modify,
write) under a lock file beside it (`.users.toml.lock`, `geadmin.repository.locks.file_lock`),
so two `geadmin users` commands, or one and the dashboard's first start, never lose a change.
Failed sign-ins are rate-limited per user and per client address inside the dashboard process
(`FailedSignIns`, lockouts capped at 15 minutes, the table bounded); at most VERIFY_SLOTS
password checks run at once (`VerifySlots`); a wrong user and a wrong password get the same
message, and an unknown user costs a hash like a known one.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomli_w
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from geadmin import settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction, Role
from geadmin.errors import ConfigError, SignInBusyError, SignInError, SignInRateLimitedError, UserAccountError
from geadmin.repository.atomic import write_secret_atomically
from geadmin.repository.locks import LOCK_WAIT_S, file_lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MIN_PASSWORD_CHARS = 12
MAX_LOCKOUT_S = 15 * 60.0  # a locked-out user waits at most this long, however many guesses came
VERIFY_SLOTS = 4  # password checks at once (argon2id, 64 MiB each)
MAX_PASSWORD_CHARS = 1024  # longer is no password anyone types: refused before it is hashed
MAX_NAME_CHARS = 64
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
_HASHER = PasswordHasher()  # argon2id with the library's current recommended parameters


_CACHE: dict[Path, tuple[tuple[int, int, int], dict[str, User]]] = {}
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

    def load(self) -> dict[str, User]:
        try:
            document = tomllib.loads(self.path.read_text(encoding="utf-8"))
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
        """`load()`, parsed again only when the file changed (size, mtime, inode): the
        dashboard re-reads each signed-in user's role at every click."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the users file {self.path}: {exc}") from exc
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
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

    def set_password(self, name: str, password: str) -> User:
        hashed = _HASHER.hash(check_password(password))
        with self.changing() as users:
            if name not in users:
                raise UserAccountError(f"no user {name!r} in {self.path}")
            users[name] = replace(users[name], password_hash=hashed, must_change=False)
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
        return user


@dataclass
class _Failures:
    times_s: list[float] = field(default_factory=list)  # failures in the window, oldest first
    locked_until_s: float = 0.0
    lockouts: int = 0  # lockouts in a row: each doubles the next, up to the cap


class FailedSignIns:
    """Failed sign-ins, counted per user name and per client address. After `limit` failures
    of one user (or `client_limit` from one client) within `window_s`, that user (or client)
    is refused for `lockout_s`, doubling while the failures go on, never longer than
    `max_lockout_s`. The table holds at most `max_entries` names and addresses (the least
    recently failed go first), so a flood of made-up names cannot grow it without bound.
    Thread-safe; one per dashboard process."""

    def __init__(self, *, limit: int = 5, client_limit: int = 20, window_s: float = 300.0,
                 lockout_s: float = 30.0, max_lockout_s: float = MAX_LOCKOUT_S,
                 max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.client_limit, self.window_s = limit, client_limit, window_s
        self.lockout_s, self.max_lockout_s, self.max_entries = lockout_s, max_lockout_s, max_entries
        self.clock = clock
        self._table: OrderedDict[tuple[str, str], _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._table)

    def check(self, name: str, client: str = "") -> None:
        """SignInRateLimitedError while the user or the client is locked out."""
        now = self.clock()
        with self._lock:
            user_wait_s = self._wait_s(("user", name), now)
            client_wait_s = self._wait_s(("client", client), now) if client else 0.0
        if user_wait_s > 0:
            raise SignInRateLimitedError(f"too many failed sign-ins for {name!r}: try again in "
                                         f"{user_wait_s:.0f} s", retry_after_s=user_wait_s)
        if client_wait_s > 0:
            raise SignInRateLimitedError(f"too many failed sign-ins from your address ({client}): try "
                                         f"again in {client_wait_s:.0f} s", retry_after_s=client_wait_s)

    def failed(self, name: str, client: str = "") -> None:
        now = self.clock()
        with self._lock:
            self._count(("user", name), self.limit, now)
            if client:
                self._count(("client", client), self.client_limit, now)

    def succeeded(self, name: str, client: str = "") -> None:
        """The user's record goes; the client's stays (one good password does not excuse
        guesses at other names from the same address)."""
        with self._lock:
            self._table.pop(("user", name), None)

    def _wait_s(self, key: tuple[str, str], now: float) -> float:
        record = self._table.get(key)
        return record.locked_until_s - now if record else 0.0

    def _count(self, key: tuple[str, str], limit: int, now: float) -> None:
        record = self._table.pop(key, None) or _Failures()
        self._table[key] = record  # most recent last: eviction takes the front
        record.times_s = [t for t in record.times_s if now - t < self.window_s] + [now]
        if len(record.times_s) >= limit:
            lockout_s = self.lockout_s * 2 ** min(record.lockouts, 32)
            record.locked_until_s = now + min(self.max_lockout_s, lockout_s)
            record.lockouts += 1
            record.times_s = []
        while len(self._table) > self.max_entries:
            self._table.popitem(last=False)


class VerifySlots:
    """At most `slots` password checks at once: each argon2id check holds 64 MiB and a core
    for a while, so a burst of sign-ins must not exhaust the dashboard's memory. Over the
    bound, a sign-in waits up to `wait_s`, then is refused (SignInBusyError), not queued."""

    def __init__(self, slots: int = VERIFY_SLOTS, *, wait_s: float = 2.0) -> None:
        self.slots, self.wait_s = slots, wait_s
        self._semaphore = threading.BoundedSemaphore(slots)

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        if not self._semaphore.acquire(timeout=self.wait_s):
            raise SignInBusyError(f"the dashboard is checking {self.slots} other sign-ins right now: "
                                  "try again in a few seconds")
        try:
            yield
        finally:
            self._semaphore.release()


def sign_in(users: UsersFile, attempts: FailedSignIns, name: str, password: str, *, client: str = "",
            slots: VerifySlots | None = None) -> User:
    """Check the rate limits (user and client), take a password-check slot, then check the
    password; every wrong password counts against the user and the client. A name or password
    longer than any real one is refused unhashed (and counted under its first characters)."""
    name = name[:MAX_NAME_CHARS + 1]  # a made-up name longer than any user's never matches one
    attempts.check(name, client)
    if len(password) > MAX_PASSWORD_CHARS:
        attempts.failed(name, client)
        raise SignInError("unknown user or wrong password")
    with slots.slot() if slots is not None else contextlib.nullcontext():
        try:
            user = users.verify(name, password)
        except SignInError:
            attempts.failed(name, client)
            raise
    attempts.succeeded(name, client)
    return user


def random_password() -> str:
    return secrets.token_urlsafe(18)  # 24 characters, 144 bits
