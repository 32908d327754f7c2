"""Writing to the model repository, safely: atomic writes, backups, conflict detection.

- `read_config` returns a model's `config.pbtxt` bytes with their sha256: the editor keeps
  the hash and hands it back to `write_config`, which writes only if the file on disk still
  has it (optimistic concurrency) — else `ConfigConflictError`, with both texts for a diff.
- Every write is atomic: a temp file in the same directory, fsync, rename over the old file,
  fsync of the directory. A failure at any step leaves the old file untouched and no temp
  file behind. The new file keeps the old one's permission bits.
- Before a config is overwritten, its exact bytes are kept as a revision in the workspace
  database (`config_revisions`, see `geadmin.db`), not next to the file: the model
  directory holds only what Triton should see, a revision and its metadata (when, who, why,
  hash) are stored in one transaction, one file on one volume holds the whole history, and
  two geadmin processes never race on backup file names. `history` lists them,
  `read_revision` returns one, byte for byte.
- Writers of one model's config are serialized by a lock file in the workspace, so the hash
  check and the rename cannot interleave with another geadmin process's.
- `safe_model_path` is the one gate for names that come from users (uploads, new models):
  no `..`, no absolute paths, no symlinks anywhere below the repository, nothing outside it.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TextIO

from geadmin import db, settings
from geadmin.errors import ConfigConflictError, ConfigLockedError, RepositoryError
from geadmin.repository.layout import is_model_name
from geadmin.repository.modelconfig import CONFIG_FILE

ABSENT = ""  # the "hash" of a config file that does not exist (expect it when creating one)
DEFAULT_UPLOAD_LIMIT_BYTES = 1024**3  # 1 GiB
LOCK_WAIT_S = 10.0
NEW_FILE_MODE = 0o644  # readable by a Triton running as another user
SECRET_FILE_MODE = 0o600  # users file, passwords, keys: the owner only
PRIVATE_DIR_MODE = 0o700  # the workspace and its logs directory

def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ConfigFile:
    """A model's config.pbtxt as read: exact bytes and their hash."""

    model: str
    path: Path
    data: bytes

    @property
    def sha256(self) -> str:
        return sha256_of(self.data)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Revision:
    """One earlier (or the current) content of a model's config, kept in the workspace."""

    number: int  # 1, 2, ... per repository and model
    at: datetime  # UTC
    sha256: str
    who: str
    note: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


# -- paths ---------------------------------------------------------------------------
def safe_model_path(repository: Path, model: str, relative: str | PurePosixPath = "") -> Path:
    """`repository/model/relative`, refused (`RepositoryError`) unless it stays inside the
    repository: `model` one directory name, `relative` no `..`, not absolute, and no symlink
    on the way (existing components are checked; missing ones may be created)."""
    root = _root(repository)
    if not is_model_name(model):
        raise RepositoryError(f"refused model name {model!r}: a model name is one directory name, "
                              "without '/', '\\' or '..'")
    text = str(relative)
    if "\0" in text or "\\" in text:
        raise RepositoryError(f"refused path {text!r}: it contains a backslash or NUL; use '/' "
                              "between the parts of a path inside the model directory")
    parts = PurePosixPath(text)
    if parts.is_absolute():
        raise RepositoryError(f"refused path {text!r}: absolute paths are not allowed; give a path "
                              f"inside the model directory, e.g. 1/model.om")
    if ".." in parts.parts:
        raise RepositoryError(f"refused path {text!r}: '..' would leave the model directory; give a "
                              "path inside it, e.g. 1/model.om")
    current = root / model
    on_the_way = [current]
    for part in parts.parts:
        current = current / part
        on_the_way.append(current)
    for step in on_the_way:
        if step.is_symlink():
            raise RepositoryError(f"refused {step}: it is a symbolic link, and geadmin never writes "
                                  "through one; replace it with a regular file or directory")
    if not current.resolve().is_relative_to(root):
        raise RepositoryError(f"refused {current}: it is outside the model repository {root}")
    return current


def _root(repository: Path) -> Path:
    root = Path(repository).expanduser().resolve()
    if not root.is_dir():
        raise RepositoryError(f"the model repository {root} does not exist: check --repository / "
                              "GEADMIN_REPOSITORY")
    return root


def config_path(repository: Path, model: str) -> Path:
    return safe_model_path(repository, model, CONFIG_FILE)


def check_upload_size(name: str, size_bytes: int, limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES) -> None:
    if size_bytes > limit_bytes:
        raise RepositoryError(
            f"refused {name!r}: it is {_size(size_bytes)}, over the upload limit of {_size(limit_bytes)}; "
            "copy large model files into the repository directly (scp, a volume) instead")


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    value, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def write_model_file(repository: Path, model: str, relative: str, data: bytes, *,
                     limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES) -> Path:
    """An uploaded file, written atomically at a checked path (directories created)."""
    check_upload_size(relative, len(data), limit_bytes)
    path = safe_model_path(repository, model, relative)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RepositoryError(f"cannot create {path.parent}: {exc.strerror or exc}") from exc
    safe_model_path(repository, model, relative)  # check again: nothing raced a symlink in
    atomic_write(path, data)
    return path


# -- atomic writes -------------------------------------------------------------------
def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` all at once (or not at all): temp file in the same
    directory, fsync, rename, fsync the directory. Raises `RepositoryError`, leaving the old
    file untouched and no temp file. The file keeps its mode (a new one gets NEW_FILE_MODE)
    unless `mode` is given; the temp file has its final mode before the rename."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if mode is None else mode
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    except OSError as exc:
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}") from exc
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".geadmin-tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = ""
        _fsync_directory(path.parent)
    except OSError as exc:
        raise RepositoryError(f"cannot write {path}: {exc.strerror or exc}; the previous file is "
                              "untouched — free space or fix permissions, then retry") from exc
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


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


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems cannot fsync a directory; the rename is done
        if exc.errno not in (22, 95):  # EINVAL, EOPNOTSUPP
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def edit_lock(repository: Path, model: str, purpose: str = "write", *, home: Path | None = None,
              wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the workspace lock `purpose` ("write", "apply") of one model, waiting up to
    `wait_s` (0: do not wait) for another geadmin process to release it."""
    if not is_model_name(model):
        raise RepositoryError(f"refused model name {model!r}: a model name is one directory name")
    lock_dir = (home or settings.home()) / "locks"
    key = sha256_of(str(Path(repository).resolve()).encode())[:16]
    path = lock_dir / f"{key}-{model}.{purpose}.lock"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115 - closed below; closing releases the lock
    except OSError as exc:
        raise RepositoryError(f"cannot create the lock {path}: {exc.strerror or exc}; check that "
                              "the workspace (GEADMIN_HOME) is writable") from exc
    try:
        _acquire(handle, model, purpose, wait_s)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


def _acquire(handle: TextIO, model: str, purpose: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise ConfigLockedError(
                    f"another geadmin ({holder}) is running a config {purpose} of {model!r} right now "
                    "(from the dashboard or a CLI): wait for it to finish, reopen the config, and "
                    "retry") from None
            time.sleep(0.05)


# -- configs -------------------------------------------------------------------------
def model_names(repository: Path) -> list[str]:
    """The models of `repository` with a config.pbtxt on disk, by name (hidden directories,
    e.g. geadmin's staging ones, excluded)."""
    try:
        entries = sorted(repository.iterdir())
    except OSError as exc:
        raise RepositoryError(f"cannot list the model repository {repository}: {exc.strerror or exc} — "
                              "check GEADMIN_REPOSITORY / --repository") from exc
    return [p.name for p in entries if is_model_name(p.name) and not p.name.startswith(".")
            and (p / CONFIG_FILE).is_file()]


def read_config(repository: Path, model: str) -> ConfigFile:
    path = config_path(repository, model)
    try:
        return ConfigFile(model, path, path.read_bytes())
    except FileNotFoundError:
        raise RepositoryError(f"no {CONFIG_FILE} in {path.parent}: check the model name, or create "
                              "the model first") from None
    except OSError as exc:
        raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _on_disk(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RepositoryError(f"cannot read {path}: {exc.strerror or exc}") from exc


def write_config(repository: Path, model: str, data: bytes, *, expected_sha256: str, who: str,
                 note: str = "before a change", backup: bool = True,
                 home: Path | None = None) -> ConfigFile | None:
    """Replace the model's config with `data` if the file on disk still hashes to
    `expected_sha256` (`ABSENT`: it must not exist yet); else `ConfigConflictError`.
    With `backup`, the old content is kept as a revision first (unless it already is the
    latest one). Returns what was on disk before (None: nothing)."""
    path = config_path(repository, model)
    with edit_lock(repository, model, "write", home=home):
        before = _on_disk(path)
        found = ABSENT if before is None else sha256_of(before)
        if found != expected_sha256:
            raise conflict(repository, model, path, expected_sha256, before, home)
        if backup and before is not None:
            record_revision(repository, model, before, who=who, note=note, home=home)
        atomic_write(path, data)
    return None if before is None else ConfigFile(model, path, before)


def conflict(repository: Path, model: str, path: Path, expected_sha256: str, on_disk: bytes | None,
             home: Path | None = None, base_text: str | None = None) -> ConfigConflictError:
    """The error for a config that changed since it was read; the base text comes from the
    history when the caller does not have it."""
    if base_text is None:
        known = revision_with_hash(repository, model, expected_sha256, home) if expected_sha256 else None
        base_text = known.text if known else ""
    found = ABSENT if on_disk is None else sha256_of(on_disk)
    now = "is gone" if on_disk is None else f"now has sha256 {found[:12]}"
    disk_text = (on_disk or b"").decode("utf-8", errors="replace")
    return ConfigConflictError(
        f"{path} changed since you opened it (it had sha256 {expected_sha256[:12] or '(none)'}, it "
        f"{now}): nothing was written — reload it, redo your edit on top, and apply again",
        path=path, expected_sha256=expected_sha256, found_sha256=found, base_text=base_text,
        disk_text=disk_text,
        diff_text=text_diff(base_text, disk_text, str(path), "when you opened it", "on disk now"))


# -- history -------------------------------------------------------------------------
_COLUMNS = "number, at, sha256, who, note, content"


def _key(repository: Path) -> str:
    return str(Path(repository).expanduser().resolve())


def _revision(row: Sequence[Any]) -> Revision:
    number, at, sha, who, note, content = row
    return Revision(int(number), db.parse_time(at), sha, who, note, bytes(content))


def record_revision(repository: Path, model: str, data: bytes, *, who: str, note: str = "",
                    home: Path | None = None) -> Revision:
    """Keep `data` as the model's newest revision, unless the newest already has it."""
    sha = sha256_of(data)
    with db.connect(home) as conn, db.transaction(conn):
        latest = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? "
            "ORDER BY number DESC LIMIT 1", (_key(repository), model)).fetchone()
        if latest is not None and latest[2] == sha:
            return _revision(latest)
        number = int(latest[0]) + 1 if latest else 1
        at = db.format_time(db.utc_now())
        conn.execute(
            "INSERT INTO config_revisions (repository, model, number, at, sha256, content, who, note) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (_key(repository), model, number, at, sha, data, who, note))
    return Revision(number, db.parse_time(at), sha, who, note, data)


def history(repository: Path, model: str, *, home: Path | None = None) -> list[Revision]:
    """Every kept revision of the model's config, newest first."""
    with db.connect(home) as conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? "
            "ORDER BY number DESC", (_key(repository), model)).fetchall()
    return [_revision(row) for row in rows]


def read_revision(repository: Path, model: str, number: int, *, home: Path | None = None) -> Revision:
    with db.connect(home) as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? AND number = ?",
            (_key(repository), model, number)).fetchone()
    if row is None:
        raise RepositoryError(f"no revision {number} of {model!r} in the config history; "
                              f"`geadmin config history {model}` lists the kept ones")
    return _revision(row)


def revision_with_hash(repository: Path, model: str, sha256: str,
                       home: Path | None = None) -> Revision | None:
    with db.connect(home) as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? AND sha256 = ? "
            "ORDER BY number DESC LIMIT 1", (_key(repository), model, sha256)).fetchone()
    return _revision(row) if row else None


# -- diffs ---------------------------------------------------------------------------
def text_diff(before: str, after: str, name: str, before_label: str, after_label: str) -> str:
    """A unified diff (difflib); a missing final newline is marked as diff(1) does."""
    lines = difflib.unified_diff(_lines(before), _lines(after), fromfile=f"{name} ({before_label})",
                                 tofile=f"{name} ({after_label})")
    return "".join(lines)


def config_diff(before: bytes, after: bytes, model: str, before_label: str = "before",
                after_label: str = "after") -> str:
    return text_diff(before.decode("utf-8", errors="replace"), after.decode("utf-8", errors="replace"),
                     f"{model}/{CONFIG_FILE}", before_label, after_label)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
