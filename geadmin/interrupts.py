"""SIGTERM ends a long CLI run (a tune, a sweep, a preview) like Ctrl-C, and neither is lost.

Python runs a signal's handler at the next bytecode of the main thread, which can be inside a
fork's at-fork hook (logging releasing its lock as subprocess starts perf_analyzer with a
preexec_fn); CPython prints "Exception ignored" there and drops the KeyboardInterrupt. Seen:
a SIGTERM sent as a preview started measuring its trial let the preview run to its end and
exit 0, its trial measured and its verdict printed. So the handler also marks the interrupt
pending, and the loop that waits on perf_analyzer (geadmin.ops.bench.invocation) calls
`raise_pending` at each poll: a dropped interrupt is raised there, at most a poll later.

`signals_deferred` keeps both signals back for a step that must not be cut in two (an apply's
outcome row after its change is done), and delivers one that came meanwhile after it.
"""

from __future__ import annotations

import contextlib
import os
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


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """For the block: SIGINT and SIGTERM are noted, not acted on, then acted on after it with
    the handler that was in place (a KeyboardInterrupt, or the default end of the process).
    Handlers, not a signal mask: the kernel hands a process's signal to any thread that does
    not block it (the HTTP workers), and Python runs every handler on the main thread anyway.
    Off the main thread no signal arrives: nothing to hold."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: came.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if came:
            handler = previous[signal.Signals(came[0])]
            if callable(handler):
                handler(came[0], None)  # raises: default_int_handler, or ours
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), came[0])  # the default: the process ends as it would have
