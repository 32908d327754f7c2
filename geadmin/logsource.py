"""Where Triton's log can be read from, so a failed load can be explained by its real reason.

The interface is two calls: `cursor()` before an action, `read_since(cursor)` after it —
only what Triton wrote in between is returned. Implementations:

- `LocalLogFile`: the log file of the embedded stack (`geadmin up` passes its path to the
  dashboard as `GEADMIN_TRITON_LOG`).
- a `docker compose logs triton` source comes with the deployment issue; the cursor carries
  a timestamp for it (`--since`).
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from geadmin import settings

DEFAULT_MAX_BYTES = 1 << 20  # never read more than this much of a log at once


@dataclass(frozen=True)
class LogCursor:
    """A point in a log: a byte offset (files) and a wall-clock time (streams)."""

    offset: int
    at: datetime


class LogSource(abc.ABC):
    """A readable Triton log."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Where the log comes from, for messages ("log file /x/tritonserver.log")."""

    @abc.abstractmethod
    def cursor(self) -> LogCursor:
        """The current end of the log."""

    @abc.abstractmethod
    def read_since(self, cursor: LogCursor) -> str:
        """What was written after `cursor` (at most the last `max_bytes` of it)."""


class LocalLogFile(LogSource):
    """A log file on this machine. A truncated or rotated file is read from its start."""

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes

    @property
    def description(self) -> str:
        return f"log file {self.path}"

    def cursor(self) -> LogCursor:
        try:
            size = self.path.stat().st_size
        except OSError:
            size = 0
        return LogCursor(size, datetime.now(timezone.utc))

    def read_since(self, cursor: LogCursor) -> str:
        try:
            with open(self.path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                start = cursor.offset if cursor.offset <= size else 0  # truncated: start over
                start = max(start, size - self.max_bytes)
                log.seek(start)
                return log.read(size - start).decode("utf-8", errors="replace")
        except OSError:
            return ""


def log_source_from_env() -> LogSource | None:
    """The embedded stack's log (`GEADMIN_TRITON_LOG`), or None when it is not known."""
    path = settings.env("TRITON_LOG")
    return LocalLogFile(path) if path else None



def log_source_for(url: str, explicit_path: str | os.PathLike[str] | None = None) -> LogSource | None:
    """The log to explain `url`'s failures with: an explicit file, else GEADMIN_TRITON_LOG —
    but only for the server that log belongs to (GEADMIN_TRITON_URL's), never another's."""
    from geadmin.servers import is_default_server  # servers -> triton; keep this module light

    if explicit_path:
        return LocalLogFile(explicit_path)
    return log_source_from_env() if is_default_server(url) else None
