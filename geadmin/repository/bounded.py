"""The one bounded reader for files a user names (`config apply FILE`, `models create --file`,
`infer --input x=@FILE`, a config from stdin): at most `limit_bytes + 1` bytes are ever read,
so a file over the limit is refused from what was read, not from what `stat` claims (a
device such as /dev/zero says 0 bytes and never ends; a file may grow while it is read). What
is not a regular file (a device, a FIFO that would hang the reader, a directory) is refused
before it is read. Every refusal names the path, the limit and what to do, in the caller's
error class."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from geadmin.errors import GeAdminError, RepositoryError


def size_text(count: int) -> str:
    """`count` bytes for a person: "4.0 MiB", "1.5 GiB", "512 bytes"."""
    if count < 1024:
        return f"{count} bytes"
    value, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


MOST_READ = "the most geadmin reads"


def read_bounded(path: str | Path, limit_bytes: int, *, what: str, fix: str,
                 error: type[GeAdminError] = RepositoryError,
                 too_large: type[GeAdminError] | None = None, limit: str = MOST_READ) -> bytes:
    """The bytes of the regular file at `path`, at most `limit_bytes` of them. `what` names the
    file for the operator ("--file '1/model.om'"), `fix` says what to do when it is refused,
    `limit` names the limit ("the upload limit (--upload-limit)"); `error` is raised
    (`too_large` for a file over the limit, default `error`)."""
    file = Path(path).expanduser()
    try:  # O_NONBLOCK: opening a FIFO nobody writes to must not hang before fstat refuses it
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"{what}: cannot read {file}: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked on the raw handle: a directory cannot be fdopen'ed
        os.close(fd)
        raise error(f"{what}: {file} is not a regular file (a device, a pipe or a directory): "
                    f"geadmin reads only regular files of at most {size_text(limit_bytes)}; {fix}")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit_bytes:  # known from its size: not read at all
            raise (too_large or error)(f"{what} ({file}) is {info.st_size:,} bytes, more than "
                                       f"{size_text(limit_bytes)}, {limit}: {fix}")
        os.set_blocking(fd, True)  # it may still grow while it is read: never more than the limit + 1
        return read_stream(handle, limit_bytes, what=f"{what} ({file})", fix=fix,
                           error=too_large or error, limit=limit)


def read_stream(stream: BinaryIO, limit_bytes: int, *, what: str, fix: str,
                error: type[GeAdminError] = RepositoryError, limit: str = MOST_READ) -> bytes:
    """At most `limit_bytes` from an open stream (a file, stdin); `error` when there is more."""
    try:
        data = stream.read(limit_bytes + 1)
    except OSError as exc:
        raise error(f"{what}: cannot read it: {exc.strerror or exc}") from exc
    if len(data) > limit_bytes:
        raise error(f"{what} is more than {size_text(limit_bytes)}, {limit}: {fix}")
    return data
