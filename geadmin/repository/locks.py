"""Writers of one model's config are serialized by a lock file in the workspace
(`$GEADMIN_HOME/locks`), so a hash check and the rename after it cannot interleave with
another geadmin process's; `purpose` keeps an apply's lock apart from a plain write's.
`file_lock` is the same lock for any other file geadmin rewrites whole (the users file)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from geadmin import settings
from geadmin.errors import ConfigLockedError, RepositoryError
from geadmin.repository.layout import is_model_name

LOCK_WAIT_S = 10.0


@contextlib.contextmanager
def edit_lock(repository: Path, model: str, purpose: str = "write", *, home: Path | None = None,
              wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the workspace lock `purpose` ("write", "apply") of one model, waiting up to
    `wait_s` (0: do not wait) for another geadmin process to release it."""
    if not is_model_name(model):
        raise RepositoryError(f"refused model name {model!r}: a model name is one directory name")
    lock_dir = (home or settings.home()) / "locks"
    key = hashlib.sha256(str(Path(repository).resolve()).encode()).hexdigest()[:16]
    busy = (f"a config {purpose} of {model!r} right now (from the dashboard or a CLI): wait for it to "
            "finish, reopen the config, and retry")
    with file_lock(lock_dir / f"{key}-{model}.{purpose}.lock", busy, wait_s=wait_s):
        yield


@contextlib.contextmanager
def file_lock(path: Path, busy: str, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the lock file `path` (created with its directory), waiting up to `wait_s` (0: do
    not wait); else `ConfigLockedError` "another geadmin (pid N) is running `busy`"."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115 - closed below; closing releases the lock
    except OSError as exc:
        raise RepositoryError(f"cannot create the lock {path}: {exc.strerror or exc}; check that "
                              "its directory (the workspace, GEADMIN_HOME) is writable") from exc
    try:
        _acquire(handle, busy, wait_s)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


def _acquire(handle: TextIO, busy: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise ConfigLockedError(f"another geadmin ({holder}) is running {busy}") from exc
            time.sleep(0.05)
