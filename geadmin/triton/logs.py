"""Triton's log: where it can be read, how its lines parse, and what it says about each model.

A `LogSource` answers two kinds of question:

- around an action: `cursor()` before it, `lines_since(cursor)` after it — only what
  Triton wrote in between (how a failed load is explained);
- at any time: `last_lines(names)` — the latest line about each model (how a model whose
  config Triton could not even parse gets its reason: the index shows no reason for it).

Finding the log of a server on this host (`geadmin.stack.log_discovery` puts these
together with the workspaces' stack.json): `log_file_setting` reads Triton's logging API
answer (`GET /v2/logging` has `log_file` when Triton was started with `--log-file`), and
`listening_pids` / `process_log_file` find the process listening on the server's port and
where it writes (its `--log-file`, else the regular file its stdout goes to, as `geadmin up`
starts it) — readable for processes of the same user only.

`LocalLogFile` reads a file on this machine incrementally: it remembers how far it read
(offset and inode), so each call costs only the bytes written since, however large the log
grew and however verbose Triton was set; a rotated or truncated file is read from its start.
"""

from __future__ import annotations

import abc
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from geadmin.binaries import TRITON_BINARY
from geadmin.domain import LogCursor, LogLine

CHUNK_BYTES = 1 << 20  # read this much at a time: memory stays flat for any log size

# Triton's default log format, and --log-format=ISO8601.
_LOG_LINE = re.compile(
    r"^(?:(?P<sev>[IWEV])\d{4} \S+|\d{4}-\d\d-\d\dT\S+ (?P<sev2>[IWEV]))"
    r"\s+\d+\s+(?P<src>\S+)\]\s?(?P<msg>.*)$"
)
# Lines Triton logs at INFO level that are in fact the end of a load: the load never
# finishes after them (FACTS.md: a python model without model.py stays LOADING forever).
FATAL_INFO_MARKERS = (
    "Failed to preinitialize Python stub",
    "Stub process is not healthy",
    "failed to initialize the python backend stub",
)


def parse_log_line(raw: str) -> LogLine:
    match = _LOG_LINE.match(raw)
    if not match:
        return LogLine("", raw.strip(), raw)
    message = match["msg"].strip()
    if len(message) >= 2 and message[0] == message[-1] == '"':
        try:
            message = json.loads(message)
        except ValueError:
            message = message[1:-1]
    return LogLine(match["sev"] or match["sev2"], message, raw)


def is_failure(line: LogLine) -> bool:
    """An error line, or one of the INFO lines after which a load never completes."""
    return line.severity == "E" or any(marker in line.message for marker in FATAL_INFO_MARKERS)


def mentions_pattern(names: Iterable[str]) -> re.Pattern[str]:
    """Matches a model name (or an instance of it, `name_0_1`) standing alone in a line;
    longest names first, so `digits` never claims a line about `digits_pipeline`."""
    ordered = sorted(set(names), key=len, reverse=True)
    alternatives = "|".join(re.escape(name) for name in ordered) or r"(?!x)x"
    return re.compile(rf"(?<![\w.-])({alternatives})(?:_\d+_\d+)?(?![\w.-])")


def model_log_lines(lines: Iterable[str], name: str) -> list[LogLine]:
    """The lines that name the model."""
    mentions = mentions_pattern([name])
    return [parse_log_line(raw) for raw in lines if mentions.search(raw)]


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
    def read(self, cursor: LogCursor) -> tuple[list[str], LogCursor]:
        """The complete lines written after `cursor`, and the cursor after them (to follow
        the log while something runs)."""

    def lines_since(self, cursor: LogCursor) -> list[str]:
        return self.read(cursor)[0]

    @abc.abstractmethod
    def last_lines(self, names: Iterable[str]) -> dict[str, str]:
        """For each of `names` that the log mentions: the latest line about it. A line
        belongs to the first name it mentions (Triton names the model a line is about
        first, e.g. an ensemble before the step it waits for)."""


class LocalLogFile(LogSource):
    """A log file on this machine; safe to share between threads (pages cache one per path)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._tracked: frozenset[str] = frozenset()
        self._pattern = mentions_pattern(())
        self._last: dict[str, str] = {}
        self._read_to = LogCursor(0, datetime.now(timezone.utc))
        self._partial = b""
        self.bytes_read = 0  # total, for the tests that prove reading is incremental

    @property
    def description(self) -> str:
        return f"log file {self.path}"

    def cursor(self) -> LogCursor:
        try:
            stat = self.path.stat()
        except OSError:
            return LogCursor(0, datetime.now(timezone.utc))
        return LogCursor(stat.st_size, datetime.now(timezone.utc), stat.st_ino)

    def read(self, cursor: LogCursor) -> tuple[list[str], LogCursor]:
        reader = _Reader(self, cursor)
        data = b"".join(reader)
        complete, _, partial = data.rpartition(b"\n")  # a line still being written waits
        end = LogCursor(reader.end.offset - len(partial), reader.end.at, reader.end.inode)
        lines = complete.decode("utf-8", errors="replace").splitlines() if complete else []
        return lines, end

    def last_lines(self, names: Iterable[str]) -> dict[str, str]:
        wanted = frozenset(names)
        with self._lock:
            if not wanted <= self._tracked:  # a model seen for the first time: one full pass
                self._tracked |= wanted
                self._pattern = mentions_pattern(self._tracked)
                self._forget()
            self._catch_up()
            return {name: line for name, line in self._last.items() if name in wanted}

    def _forget(self) -> None:
        self._last, self._partial = {}, b""
        self._read_to = LogCursor(0, datetime.now(timezone.utc))

    def _catch_up(self) -> None:
        reader = _Reader(self, self._read_to)
        for chunk in reader:
            if reader.restarted and reader.end.offset == len(chunk):  # first chunk of a new file
                self._forget()
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", errors="replace")
                match = self._pattern.search(line)
                if match:
                    self._last[match.group(1)] = line
        if reader.restarted and reader.end.offset == 0:  # rotated to an empty file
            self._forget()
        self._read_to = reader.end


class _Reader:
    """The bytes of a log file after a cursor, in chunks. From the start when the file was
    rotated (another inode) or truncated since (`restarted`); `end` follows the reading."""

    def __init__(self, log: LocalLogFile, cursor: LogCursor) -> None:
        self.log = log
        self.cursor = cursor
        self.end = cursor
        self.restarted = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            handle = open(self.log.path, "rb")  # noqa: SIM115 - closed below, also on early exit
        except OSError:
            return
        with handle:
            stat = os.fstat(handle.fileno())
            start = self.cursor.offset
            if (self.cursor.inode and self.cursor.inode != stat.st_ino) or start > stat.st_size:
                start, self.restarted = 0, True
            handle.seek(start)
            self.end = LogCursor(start, datetime.now(timezone.utc), stat.st_ino)
            while chunk := handle.read(CHUNK_BYTES):
                self.end = LogCursor(self.end.offset + len(chunk), self.end.at, stat.st_ino)
                self.log.bytes_read += len(chunk)
                yield chunk


# -- finding the log of a server on this host ------------------------------------------------
PROC = Path("/proc")
_TCP_LISTEN = "0A"  # st of a listening socket in /proc/net/tcp{,6}


def log_file_setting(settings: dict[str, object]) -> Path | None:
    """`log_file` of Triton's log settings (`TritonClient.log_settings()`), when it names an
    existing file on this host; None when Triton logs to stdout."""
    value = settings.get("log_file")
    if not isinstance(value, str) or not value:
        return None
    path = Path(value)
    return path if path.is_absolute() and path.is_file() else None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == _TCP_LISTEN and fields[1].rsplit(":", 1)[-1] == f"{port:04X}":
                inodes.add(fields[9])
    return inodes


def listening_pids(port: int) -> list[int]:
    """The processes (of this user: others' descriptors cannot be read) listening on TCP `port`."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not wanted:
        return []
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:  # another user's process, or gone
            continue
        if links & wanted:
            found.append(int(entry.name))
    return sorted(found)


def process_arguments(pid: int) -> list[str]:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def flag_value(arguments: list[str], flag: str) -> str | None:
    """`--flag=value` or `--flag value` in a command line."""
    for index, argument in enumerate(arguments):
        if argument.startswith(flag + "="):
            return argument[len(flag) + 1:]
        if argument == flag and index + 1 < len(arguments):
            return arguments[index + 1]
    return None


def is_tritonserver(pid: int) -> bool:
    """Whether process `pid` runs Triton's binary (its executable, else its argv[0]): another
    program on Triton's port is not Triton, and what it prints is not Triton's log."""
    try:
        executable = Path(os.readlink(PROC / str(pid) / "exe")).name.removesuffix(" (deleted)")
    except OSError:  # another user's process: its argv[0] is still readable
        executable = ""
    arguments = process_arguments(pid)
    return TRITON_BINARY in (executable, Path(arguments[0]).name if arguments and arguments[0] else "")


def process_log_file(pid: int) -> Path | None:
    """Where process `pid` (a tritonserver) writes its log: its `--log-file`, else the regular
    file its stdout is (not a terminal or a pipe)."""
    named = flag_value(process_arguments(pid), "--log-file")
    if named:
        path = Path(named)
        if not path.is_absolute():
            try:
                path = Path(os.readlink(PROC / str(pid) / "cwd")) / path
            except OSError:
                return None
        return path if path.is_file() else None
    try:
        stdout = Path(os.readlink(PROC / str(pid) / "fd" / "1"))
    except OSError:
        return None
    return stdout if stdout.is_absolute() and stdout.is_file() else None
