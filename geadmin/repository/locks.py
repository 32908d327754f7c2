"""The one pid-file lock, and the locks built on it.

`PidLock`: an exclusive flock on a file that names its holder (`pid N`, or `WHAT, pid N`). The
kernel drops the flock when the holder closes the file or dies, however it dies (SIGKILL
included), so a lock is never left stale; the name is only for the message of the one refused.
Every lock of geadmin is one: a `geadmin up` per workspace, the sampler per workspace, a load
test per server, a tuning run per model, the config writers below, the users file.

Writers of one model's config are serialized by a lock file in the workspace
(`$GEADMIN_HOME/locks`), so a hash check and the rename after it cannot interleave with
another geadmin process's; `purpose` keeps an apply's lock apart from a plain write's. An
apply also holds a flock on the model's directory, which other workspaces on the same
repository (a host CLI beside the compose dashboard) see too.
`file_lock` is the same lock for any other file geadmin rewrites whole (the users file)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from geadmin import disk, settings
from geadmin.errors import ConfigLockedError, GeAdminError, RepositoryError
from geadmin.repository.layout import is_model_name

LOCK_WAIT_S = 10.0
PRIVATE_DIR_MODE = 0o700
LOCK_FILE_MODE = 0o600
HOLDER_BYTES = 512


class PidLock:
    """A held pid-file lock: `close()` (or the end of a `with` block) empties the file and
    releases it; the process's end releases it too."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # empty: nobody holds it (`holder` reads this)
        finally:
            os.close(fd)  # releases the flock

    def __enter__(self) -> PidLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def pid_lock(path: Path, busy: Callable[[str], GeAdminError], *, what: str = "",
             wait_s: float = 0.0) -> PidLock:
    """Take the lock file `path` (created 0600, its directory 0700 when new), waiting up to
    `wait_s` (0: do not wait) for its holder; the file then says `what, pid N` (`pid N`).
    Raises `busy(holder)` while another holds it (holder: what its file says), and OSError
    when the file cannot be created: each caller says which workspace is unusable."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_FILE_MODE)
    try:
        if not _flock_within(fd, wait_s):
            holder = os.pread(fd, HOLDER_BYTES, 0).decode(errors="replace").strip()
            raise busy(holder or "another process")
        note = f"pid {os.getpid()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, (f"{what}, {note}" if what else note).encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return PidLock(path, fd)


def _flock_within(fd: int, wait_s: float) -> bool:
    """Take an exclusive flock on `fd`, waiting up to `wait_s`; False when another holds it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def holder(path: Path) -> str:
    """What the live holder of the lock `path` wrote (`what, pid N`), read without locking so
    asking never disturbs it; "" when nobody holds it (never taken, released, or its holder
    died: its pid is gone)."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    _, _, pid = text.rpartition("pid ")
    return text if pid.isdigit() and _alive(int(pid)) else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


@contextlib.contextmanager
def edit_lock(repository: Path, model: str, purpose: str = "write", *, home: Path | None = None,
              wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the workspace lock `purpose` ("write", "apply") of one model, waiting up to
    `wait_s` (0: do not wait) for another geadmin process to release it."""
    busy = (f"a config {purpose} of {model!r} right now (from the dashboard or a CLI): wait for it to "
            "finish, reopen the config, and retry")
    with file_lock(edit_lock_path(repository, model, purpose, home), busy, wait_s=wait_s), \
            _model_directory_lock(Path(repository) / model, purpose, busy, wait_s):
        yield


def edit_lock_path(repository: Path, model: str, purpose: str, home: Path | None = None) -> Path:
    """The workspace's lock file of `purpose` for one model of `repository`."""
    if not is_model_name(model):
        raise RepositoryError(f"refused model name {model!r}: a model name is one directory name")
    key = hashlib.sha256(str(Path(repository).resolve()).encode()).hexdigest()[:16]
    return (home or settings.home()) / "locks" / f"{key}-{model}.{purpose}.lock"


def apply_running(repository: Path, model: str, home: Path | None = None) -> str:
    """Who runs an apply (or rollback, or put back) of `model` in this workspace now ("" when
    nobody does), read without taking the lock."""
    return holder(edit_lock_path(repository, model, "apply", home))


@contextlib.contextmanager
def _model_directory_lock(directory: Path, purpose: str, busy: str, wait_s: float) -> Iterator[None]:
    """An apply's flock on the model directory itself: held across workspaces (two geadmin homes
    on one repository, a host CLI beside the compose dashboard) and containers on one kernel,
    by anyone who can read the directory; no file is written. Only the outermost lock of an
    apply takes it (a "write" runs inside an apply of the same process, and a second flock of
    the directory from that process would wait on the first). A model with no directory yet
    (a create) has nothing to hold."""
    if purpose != "apply":
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        try:
            held = _flock_within(fd, wait_s)
        except OSError:  # NFS emulates flock with byte-range locks: none on a directory (EBADF)
            held = True  # the workspace lock alone, as before this lock existed
        if not held:
            raise ConfigLockedError(f"another geadmin (of another workspace on this repository, or another "
                                    f"user's) is running {busy}")
        yield
    finally:
        os.close(fd)  # releases the flock


@contextlib.contextmanager
def file_lock(path: Path, busy: str, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the lock file `path` (created with its directory), waiting up to `wait_s` (0: do
    not wait); else `ConfigLockedError` "another geadmin (pid N) is running `busy`"."""
    def refused(holder: str) -> GeAdminError:
        return ConfigLockedError(f"another geadmin ({holder}) is running {busy}")

    try:
        held = pid_lock(path, refused, wait_s=wait_s)
    except OSError as exc:
        fix = disk.next_step(exc, path.parent, "check that its directory (the workspace, GEADMIN_HOME) "
                             "is writable")
        raise RepositoryError(f"cannot create the lock {path}: {exc.strerror or exc}; {fix}") from exc
    with held:
        yield
