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
import secrets
import stat
import string
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


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, inside: Path | None = None,
                 make_parents: bool = False) -> None:
    """Replace `path` with `data` all at once (or not at all): temp file in the same
    directory, fsync, rename, fsync the directory. Raises `RepositoryError`: before the rename,
    the old file untouched and no temp file; after it (the directory fsync), saying the new
    file is written. The file keeps its mode (a new one gets NEW_FILE_MODE)
    unless `mode` is given; the temp file has its final mode before the rename.

    `inside`: a directory `path` must stay in (the model repository, which whoever can write it
    could rearrange while geadmin writes): the parent is opened one name at a time from there,
    never through a link (`make_parents`: missing ones made on the way), and the temp file, the
    rename and the fsync all go through that handle — a model directory swapped for a link to
    /etc between the check and the write cannot send the file there."""
    try:
        parent = _open_parent(path, inside, make_parents)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RepositoryError(f"refused {path}: a directory on its way is a symbolic link (or not a "
                                  "directory), and geadmin never writes through one; nothing was "
                                  "written — replace it with a regular directory") from exc
        fix = disk.next_step(exc, path.parent, "check the disk, then retry")
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}; the previous file is "
                              f"untouched — {fix}") from exc
    try:
        _replace_in(parent, path, data, mode)
    finally:
        os.close(parent)


def _open_parent(path: Path, inside: Path | None, make_parents: bool) -> int:
    """A handle on `path`'s directory (see `atomic_write`)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if inside is None:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, flags)
    root = Path(inside).resolve()
    fd = os.open(root, flags)
    try:
        for part in path.parent.relative_to(root).parts:
            if make_parents:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            below = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace_in(parent: int, path: Path, data: bytes, mode: int | None) -> None:
    name = path.name
    try:
        mode = stat.S_IMODE(os.stat(name, dir_fd=parent).st_mode) if mode is None else mode
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    except OSError as exc:
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}") from exc
    tmp = ""
    try:
        fd, tmp = _temp_file(parent, name)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        tmp = ""
    except OSError as exc:
        fix = disk.next_step(exc, path.parent, "check the disk, then retry")
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}; the previous file is "
                              f"untouched — {fix}") from exc
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
    try:
        _fsync_handle(parent)
    except OSError as exc:  # after the rename: the new file IS in place, only its durability is unknown
        fix = disk.next_step(exc, path.parent, "check the disk, then read the file back")
        raise RepositoryError(f"{path} IS written (the new content replaced the previous file), but the "
                              f"directory fsync failed ({exc.strerror or exc}), so it may not survive a "
                              f"power cut — {fix}") from exc


_TEMP_ALPHABET = string.ascii_letters + string.digits + "_"


def _temp_file(parent: int, name: str) -> tuple[int, str]:
    """A new private file `.<name>.<8 random>.geadmin-tmp` in `parent`, never through a link."""
    for _ in range(100):
        tmp = f".{name}.{''.join(secrets.choice(_TEMP_ALPHABET) for _ in range(8))}{TEMP_SUFFIX}"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(tmp, flags, SECRET_FILE_MODE, dir_fd=parent), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {name}")


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
        _fsync_handle(fd)
    finally:
        os.close(fd)


def _fsync_handle(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems cannot fsync a directory; the rename is done
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise


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
