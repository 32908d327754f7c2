"""SIGTERM ends a long CLI run (a tune, a sweep, a preview) like Ctrl-C, and neither is lost.

Python runs a signal's handler at the next bytecode of the main thread, which can be inside a
fork's at-fork hook (logging releasing its lock as subprocess starts perf_analyzer with a
preexec_fn); CPython prints "Exception ignored" there and drops the KeyboardInterrupt. Seen:
a SIGTERM sent as a preview started measuring its trial let the preview run to its end and
exit 0, its trial measured and its verdict printed. So the handler also marks the interrupt
pending, and the loop that waits on perf_analyzer (geadmin.ops.bench.invocation) calls
`raise_pending` at each poll: a dropped interrupt is raised there, at most a poll later.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_pending = threading.Event()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _pending.set()
    raise KeyboardInterrupt


def raise_pending() -> None:
    """KeyboardInterrupt when an interrupt came and its own raise may have been dropped."""
    if _pending.is_set():
        _pending.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def as_interrupts() -> Iterator[None]:
    """For the block: SIGTERM and SIGINT raise KeyboardInterrupt (the run cleans up, as for
    Ctrl-C: its trial copies are removed) and are never dropped. Main thread only (as any
    signal handler)."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    _pending.clear()
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _pending.clear()
