"""Closing a thread pool whose workers each own a connection (gevent HTTP clients must be
closed on the thread that made them)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def close_on_each_thread(pool: ThreadPoolExecutor, close_thread: Callable[[threading.Barrier], None],
                         timeout_s: float) -> None:
    """Run `close_thread` once on every worker of `pool` — the barrier it gets holds each task
    until all run, so each lands on its own thread — then shut the pool down. At interpreter
    exit Python's hook has already stopped every pool: the connections go with the process."""
    workers = len(getattr(pool, "_threads", ())) or 1
    barrier = threading.Barrier(workers)
    try:
        futures = [pool.submit(close_thread, barrier) for _ in range(workers)]
    except RuntimeError:  # "cannot schedule new futures after shutdown": the interpreter is exiting
        futures = []
    for future in futures:
        future.result(timeout=timeout_s)
    pool.shutdown(wait=True)
