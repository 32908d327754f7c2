"""A sign-in around the users file's password check: rate-limited per user and per client
address inside the dashboard process (`FailedSignIns`: attempts reserved before the check,
lockouts capped at 15 minutes and never evicted from the bounded table), at most VERIFY_SLOTS
password checks at once (`VerifySlots`), a name or password longer than any real one refused
unhashed (`sign_in`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from geadmin.access.users import MAX_NAME_CHARS, MAX_PASSWORD_CHARS, User, UsersFile
from geadmin.errors import SignInBusyError, SignInError, SignInRateLimitedError

MAX_LOCKOUT_S = 15 * 60.0  # a locked-out user waits at most this long, however many guesses came
VERIFY_SLOTS = 4  # password checks at once (argon2id, 64 MiB each)


@dataclass
class _Failures:
    times_s: list[float] = field(default_factory=list)  # failures in the window, oldest first
    locked_until_s: float = 0.0
    lockouts: int = 0  # lockouts in a row: each doubles the next, up to the cap
    pending: int = 0  # attempts reserved by check() and not settled yet

    def holds(self, now: float) -> bool:
        """Whether forgetting this record would lift a lock or let an attempt run uncounted."""
        return self.pending > 0 or self.locked_until_s > now


class FailedSignIns:
    """Failed sign-ins, counted per user name and per client address. After `limit` failures
    of one user (or `client_limit` from one client) within `window_s`, that user (or client)
    is refused for `lockout_s`, doubling while the failures go on, never longer than
    `max_lockout_s`. `check` reserves an attempt (pending until `failed`, `succeeded` or
    `released`), so parallel attempts cannot pass the limit together. The table holds at most
    `max_entries` names and addresses: the least recently failed that are neither locked nor
    pending go first; a table full of those refuses new names rather than forget a lock.
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
        """SignInRateLimitedError while the user or the client is locked out, or has as many
        attempts under way as it has left; otherwise the attempt is reserved: settle it with
        `failed`, `succeeded` or `released`."""
        now = self.clock()
        keys = [(("user", name), self.limit)] + ([(("client", client), self.client_limit)] if client else [])
        with self._lock:
            for (kind, who), limit in keys:
                record = self._table.get((kind, who))
                if record is None:
                    continue
                whose = f"for {who!r}" if kind == "user" else f"from your address ({who})"
                wait_s = record.locked_until_s - now
                if wait_s > 0:
                    raise SignInRateLimitedError(f"too many failed sign-ins {whose}: try again in "
                                                 f"{wait_s:.0f} s", retry_after_s=wait_s)
                recent = sum(1 for t in record.times_s if now - t < self.window_s)
                if recent + record.pending >= limit:  # each one under way may fail too
                    raise SignInRateLimitedError(f"too many sign-ins {whose} under way: try again in a few "
                                                 "seconds", retry_after_s=5.0)
            self._make_room(sum(1 for key, _ in keys if key not in self._table), now)
            for key, _ in keys:
                record = self._table.setdefault(key, _Failures())
                record.pending += 1
                self._table.move_to_end(key)

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
            self._settle(("client", client))

    def released(self, name: str, client: str = "") -> None:
        """An attempt that neither failed nor succeeded (busy, a broken users file): not counted."""
        with self._lock:
            self._settle(("user", name))
            self._settle(("client", client))

    def _settle(self, key: tuple[str, str]) -> _Failures | None:
        record = self._table.get(key)
        if record is not None and record.pending > 0:
            record.pending -= 1
        return record

    def _make_room(self, needed: int, now: float) -> None:
        """Evicts the least recently failed records that hold nothing; SignInRateLimitedError
        when only locked or pending ones are left (forgetting one would lift its lock)."""
        while len(self._table) + needed > self.max_entries:
            key = next((k for k, r in self._table.items() if not r.holds(now)), None)
            if key is None:
                wait_s = max(1.0, min(r.locked_until_s for r in self._table.values()) - now)
                raise SignInRateLimitedError(f"too many sign-in attempts on this dashboard right now: try "
                                             f"again in {wait_s:.0f} s", retry_after_s=wait_s)
            del self._table[key]

    def _count(self, key: tuple[str, str], limit: int, now: float) -> None:
        record = self._settle(key)
        if record is None:  # not reserved by check()
            self._make_room(1, now)
            record = self._table[key] = _Failures()
        self._table.move_to_end(key)  # most recent last: eviction takes the front
        record.times_s = [t for t in record.times_s if now - t < self.window_s] + [now]
        if len(record.times_s) >= limit:
            lockout_s = self.lockout_s * 2 ** min(record.lockouts, 32)
            record.locked_until_s = now + min(self.max_lockout_s, lockout_s)
            record.lockouts += 1
            record.times_s = []


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
    attempts.check(name, client)  # reserves the attempt: released below unless it is counted
    try:
        if len(password) > MAX_PASSWORD_CHARS:
            raise SignInError("unknown user or wrong password")
        with slots.slot() if slots is not None else contextlib.nullcontext():
            user = users.verify(name, password)
    except SignInError as exc:
        if isinstance(exc, SignInBusyError):
            attempts.released(name, client)
        else:
            attempts.failed(name, client)
        raise
    except BaseException:
        attempts.released(name, client)
        raise
    attempts.succeeded(name, client)
    return user
