"""What a failed file operation asks of the operator, from its errno and the free space
measured: "the filesystem of /var/lib/geadmin is full (0 KiB free): free space there" rather
than "check that the directory is writable" when the disk is full.

A full disk does not always say ENOSPC: SQLite says "disk I/O error" when it cannot grow its
shared-memory file (measured: SQLITE_IOERR_SHMSIZE on a full ext4), and a lock file's
`open(O_CREAT)` says ENOSPC only once the directory itself needs a new block. So the free
space is measured too, and under `FULL_BELOW_BYTES` the disk counts as full whatever the
error said.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

FULL_BELOW_BYTES = 1 << 20  # SQLite's WAL and shared memory, a config's temp file: less is full
_FULL = (errno.ENOSPC, errno.EDQUOT)
_DENIED = (errno.EACCES, errno.EPERM)


def _statvfs(path: Path) -> os.statvfs_result | None:
    """The filesystem figures of `path`'s nearest existing parent, None when unreadable."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return os.statvfs(probe)
    except OSError:
        return None


def free_bytes(path: Path) -> int | None:
    """Free bytes on the filesystem of `path` (its nearest existing parent) for an ordinary
    user, None when it cannot be measured. Root's share (ext4 keeps blocks for root, and more
    for itself that nobody gets: measured 1.3 MiB "free" to root on a full 64 MiB ext4 that
    refused root's next file) is not counted."""
    stats = _statvfs(path)
    return None if stats is None else stats.f_bavail * stats.f_frsize


def is_full(path: Path) -> bool:
    """Almost no space left for an ordinary user, on a filesystem that has space at all (a
    pseudo filesystem such as /sys or /proc has 0 blocks: never full, its errors are its own)."""
    stats = _statvfs(path)
    return stats is not None and stats.f_blocks > 0 and stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


def full_fix(path: Path) -> str:
    free = free_bytes(path)
    shown = f"{free / 1024:.0f} KiB free" if free is not None else "no space left"
    return f"the filesystem of {path} is full ({shown}): free space there, then retry"


def next_step(exc: OSError, path: Path, otherwise: str) -> str:
    """The fix for `exc`, raised working in `path`: a full disk, a read-only mount or a
    permission named as such; `otherwise` for any other cause."""
    if exc.errno in _FULL or is_full(path):
        return full_fix(path)
    if exc.errno == errno.EROFS:
        return f"{path} is on a read-only filesystem: remount it read-write, or use another directory"
    if exc.errno in _DENIED:
        return f"this user (uid {os.geteuid()}) may not write in {path}: fix its owner or mode"
    return otherwise
