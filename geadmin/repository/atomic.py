"""Atomic file writes: a temp file in the same directory, fsync, rename over the old file,
fsync of the directory. A failure up to the rename leaves the old file untouched and no temp
file behind; a failure of the directory fsync after it says that the new file IS written, its
durability unconfirmed (a caller checks the disk: read the file back). The new file keeps the
old one's permission bits. Secrets (0600), and the private workspace directory and logs, are
written the same way. A whole directory staged beside its destination is moved in by a rename
that never replaces what is there (`rename_noreplace`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from geadmin import disk
from geadmin.errors import RepositoryError

TEMP_SUFFIX = ".geadmin-tmp"  # atomic_write's temp files: `.<name>.<8 random>.geadmin-tmp`
_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.[A-Za-z0-9_]{8}" + re.escape(TEMP_SUFFIX))
NEW_FILE_MODE = 0o644  # readable by a Triton running as another user
SECRET_FILE_MODE = 0o600  # users file, passwords, keys: the owner only
PRIVATE_DIR_MODE = 0o700  # the workspace and its logs directory


def is_temp_file_name(name: str) -> bool:
    """Whether `name` is one atomic_write gives its temp files (a process killed between the
    write and the rename leaves it behind; geadmin.ops.models.leftovers removes it)."""
    return _TEMP_NAME.fullmatch(name) is not None


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` all at once (or not at all): temp file in the same
    directory, fsync, rename, fsync the directory. Raises `RepositoryError`: before the rename,
    the old file untouched and no temp file; after it (the directory fsync), saying the new
    file is written. The file keeps its mode (a new one gets NEW_FILE_MODE)
    unless `mode` is given; the temp file has its final mode before the rename."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if mode is None else mode
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    except OSError as exc:
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}") from exc
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = ""
    except OSError as exc:
        fix = disk.next_step(exc, path.parent, "check the disk, then retry")
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}; the previous file is "
                              f"untouched — {fix}") from exc
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    try:
        fsync_directory(path.parent)
    except OSError as exc:  # after the rename: the new file IS in place, only its durability is unknown
        fix = disk.next_step(exc, path.parent, "check the disk, then read the file back")
        raise RepositoryError(f"{path} IS written (the new content replaced the previous file), but the "
                              f"directory fsync failed ({exc.strerror or exc}), so it may not survive a "
                              f"power cut — {fix}") from exc


def write_secret_atomically(path: Path, data: bytes) -> None:
    """A secret (users file, password, key): like `atomic_write`, but always mode 0600, and
    the temp file is created 0600 (mkstemp) so the secret is never readable by others, not
    even for the moment before the rename."""
    atomic_write(path, data, mode=SECRET_FILE_MODE)


def private_directory(path: Path) -> Path:
    """`path` created 0700 (parents as usual), or made 0700 when it exists and is ours: the
    workspace holds secrets, logs and the audit database, for its owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    info = path.stat()
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def open_private_log(path: Path) -> BinaryIO:
    """The log at `path` opened for appending, created 0600 (an older log is made 0600 too):
    logs carry model names, paths and error text that are nobody else's business."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, SECRET_FILE_MODE)
    try:
        os.fchmod(fd, SECRET_FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def fsync_directory(directory: Path) -> None:
    """Make a rename (or a new entry) in `directory` durable: fsync the directory itself. A
    filesystem that cannot fsync a directory (EINVAL, EOPNOTSUPP) is no error: the rename is
    done; any other failure is raised."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems cannot fsync a directory; the rename is done
        if exc.errno not in (22, 95):  # EINVAL, EOPNOTSUPP
            raise
    finally:
        os.close(fd)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def rename_noreplace(source: Path, destination: Path) -> None:
    """rename(2) that fails with FileExistsError rather than replace what is at `destination`
    (renameat2 RENAME_NOREPLACE; a check then rename where the kernel or libc lacks it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(destination),
                     _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(code, os.strerror(code), str(destination))
    if os.path.lexists(destination):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(destination))
    os.rename(source, destination)
