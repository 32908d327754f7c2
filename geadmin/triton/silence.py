"""A Triton that takes connections but answers nothing: asked once, then not again for a while.

A hung tritonserver (a deadlocked frontend, a machine swapping) still accepts TCP connections,
so every call waits its whole timeout. A dashboard page asks a server a dozen questions: the
Overview took 64 s to render against one (measured), and an operator at 3 a.m. waits that long
for a DOWN they could have read in five. So when a server-level question — liveness, readiness,
server metadata, which Triton's frontend answers without touching any model — goes unanswered,
the `Silence` holds for `HOLD_S`: every call to that endpoint fails at once with the same cause,
saying when it was asked and when it will be asked again. After the hold the next call goes
through; any answer ends the silence. A model's slow inference or load never opens it: that is
the model, not the server.

Only reads are held, and they fail with `TritonNotAskedError` (nothing was sent, as with a
refused connection), never with a timeout: callers read a timeout as "sent, and may still be
running". Changes — loads, unloads, inference, the steps and the way back of an apply — are
always sent: a hold another page opened must not cut one in half.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from geadmin.errors import TritonNotAskedError, TritonTimeoutError

HOLD_S = 15.0  # long enough for a page's questions, short enough to see a recovery soon


@dataclass(frozen=True)
class _Unanswered:
    action: str
    at: float  # monotonic time the question went unanswered
    until: float
    timeout_s: float


class Silence:
    """Per endpoint; safe to share between threads. `clock` is time.monotonic (tests pass theirs)."""

    def __init__(self, url: str, *, hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.hold_s = hold_s
        self._clock = clock
        self._lock = threading.Lock()
        self._unanswered: _Unanswered | None = None

    def check(self, action: str) -> None:
        """For a read: raise at once while the hold lasts; after it, let the call go through."""
        with self._lock:
            held = self._unanswered
        now = self._clock()
        if held is None or now >= held.until:
            return
        raise TritonNotAskedError(
            f"{action}: not asked — Triton at {self.url} answered nothing in {held.timeout_s:g}s when "
            f"asked to {held.action} {now - held.at:.0f}s ago: {_CAUSE_AND_FIX}; geadmin asks it again "
            f"in {held.until - now:.0f}s", url=self.url)

    def unanswered(self, action: str, timeout_s: float) -> TritonTimeoutError:
        """A server-level question went unanswered: hold, and the error that says so."""
        now = self._clock()
        with self._lock:
            self._unanswered = _Unanswered(action, now, now + self.hold_s, timeout_s)
        return TritonTimeoutError(
            f"{action}: Triton at {self.url} accepts connections but answered nothing in {timeout_s:g}s "
            f"— {_CAUSE_AND_FIX}", url=self.url)

    def answered(self) -> None:
        with self._lock:
            self._unanswered = None

    @property
    def holding(self) -> bool:
        with self._lock:
            held = self._unanswered
        return held is not None and self._clock() < held.until


# Any server's, not only the local stack's: which restart fits is the caller's to say
# (geadmin.stack.server_history names the stack's own, with its pid and log).
_CAUSE_AND_FIX = "it is hung or overloaded, not down: read the end of its log, and restart it if it stays so"
