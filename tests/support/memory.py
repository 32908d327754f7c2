"""Memory a call holds at its worst, measured with tracemalloc (numpy's arrays are traced;
Pillow's own buffers are not: measure those in a fresh interpreter)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def peak_bytes(call: Callable[[], Any]) -> tuple[Any, int]:
    """What `call` returns, or the exception it raised (the caller asserts on it), and the
    most memory it held at once."""
    tracemalloc.start()
    try:
        try:
            result: Any = call()
        except Exception as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
