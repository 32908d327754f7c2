"""Count the repository-index reads geadmin makes of each Triton, per step of a rollout.

A counting wrapper around `TritonClient.repository_index` (the one call every index read goes
through, geadmin.triton.client): each call made while `counting()` is open is counted against
the server's URL and the step running then, named by the rollout's progress lines (`step()`
reads the prefix a version rollout puts on them: `[load v2 beside v1]`, `[retire v1]`). The
servers are real tritonservers; the wrapper only counts, every read still goes to Triton.
"""

from __future__ import annotations

import collections
import contextlib
import re
import threading
import traceback
from collections.abc import Iterator

from geadmin.domain import ModelEntry
from geadmin.triton.client import TritonClient

BEFORE = "before any progress line"


class IndexReads:
    def __init__(self) -> None:
        self.step = BEFORE
        self.counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.callers: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        self._lock = threading.Lock()

    def progress(self, line: str) -> None:
        """A rollout's `progress` callback: the step is the line's bracketed prefix."""
        found = re.match(r"\[([^\]]+)\]", line)
        self.step = found.group(1) if found else "rollout"

    def count(self, url: str) -> None:
        caller = next((f"{f.filename.split('geadmin/')[-1]}:{f.lineno} {f.name}"
                       for f in reversed(traceback.extract_stack()[:-2]) if "/geadmin/" in f.filename
                       and not f.filename.endswith(("triton/client.py", "fleet/index_once.py"))), "?")
        with self._lock:
            self.counts[self.step][url] += 1
            self.callers[(self.step, url)].append(caller)

    def most(self, step: str) -> int:
        return max(self.counts[step].values(), default=0)


@contextlib.contextmanager
def counting() -> Iterator[IndexReads]:
    """Every `TritonClient.repository_index` call while open, counted (and made); put back after."""
    reads = IndexReads()
    real = TritonClient.repository_index

    def counted(self: TritonClient) -> list[ModelEntry]:
        reads.count(self.url)
        return real(self)

    TritonClient.repository_index = counted  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        TritonClient.repository_index = real  # type: ignore[method-assign]
