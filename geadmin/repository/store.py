"""A model's config.pbtxt, read and written safely: conflict detection, a revision before
every overwrite, atomic writes under a lock.

- `read_config` returns a model's `config.pbtxt` bytes with their sha256: the editor keeps
  the hash and hands it back to `write_config`, which writes only if the file on disk still
  has it (optimistic concurrency) — else `ConfigConflictError`, with both texts for a diff.
- The write is atomic (`geadmin.repository.atomic`), under the model's lock
  (`geadmin.repository.locks`), after the old content is kept as a revision
  (`geadmin.repository.revisions`); every path goes through `geadmin.repository.paths`.
- `write_model_file` writes an uploaded file at a checked path, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.errors import ConfigConflictError, RepositoryError
from geadmin.repository.atomic import atomic_write
from geadmin.repository.layout import is_model_name
from geadmin.repository.locks import edit_lock
from geadmin.repository.modelconfig import CONFIG_FILE, MAX_CONFIG_BYTES, read_config_bytes
from geadmin.repository.paths import (
    DEFAULT_UPLOAD_LIMIT_BYTES,
    check_upload_size,
    config_path,
    repository_root,
    safe_model_path,
)
from geadmin.repository.revisions import record_revision, revision_with_hash, sha256_of, text_diff

ABSENT = ""  # the "hash" of a config file that does not exist (expect it when creating one)


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
        return ConfigFile(model, path, read_config_bytes(path))
    except FileNotFoundError as exc:
        raise RepositoryError(f"no {CONFIG_FILE} in {path.parent}: check the model name, or create "
                              "the model first") from exc


def _on_disk(path: Path) -> bytes | None:
    try:
        return read_config_bytes(path)
    except FileNotFoundError:
        return None


def refuse_oversized(model: str, data: bytes) -> None:
    """A config larger than a config can be read back (MAX_CONFIG_BYTES) is refused before
    anything is written: written, it could never be restored, rolled back or edited again."""
    if len(data) > MAX_CONFIG_BYTES:
        raise RepositoryError(f"the new {CONFIG_FILE} of {model!r} is {len(data):,} bytes, more than a "
                              f"config can be ({MAX_CONFIG_BYTES:,} bytes, {MAX_CONFIG_BYTES >> 20} MiB): "
                              "nothing was written; shorten it (is it the right file?) and apply again")


def write_config(repository: Path, model: str, data: bytes, *, expected_sha256: str, who: str,
                 note: str = "before a change", backup: bool = True,
                 home: Path | None = None) -> ConfigFile | None:
    """Replace the model's config with `data` if the file on disk still hashes to
    `expected_sha256` (`ABSENT`: it must not exist yet); else `ConfigConflictError`.
    With `backup`, the old content is kept as a revision first (unless it already is the
    latest one). Returns what was on disk before (None: nothing). A config over
    MAX_CONFIG_BYTES is refused first (`refuse_oversized`)."""
    refuse_oversized(model, data)
    path = config_path(repository, model)
    with edit_lock(repository, model, "write", home=home):
        before = _on_disk(path)
        found = ABSENT if before is None else sha256_of(before)
        if found != expected_sha256:
            raise conflict(repository, model, path, expected_sha256, before, home)
        if backup and before is not None:
            record_revision(repository, model, before, who=who, note=note, home=home)
        atomic_write(path, data, inside=repository_root(repository))
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


def write_model_file(repository: Path, model: str, relative: str, data: bytes, *,
                     limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES) -> Path:
    """An uploaded file, written atomically at a checked path (directories created); a
    config.pbtxt is held to MAX_CONFIG_BYTES whatever `limit_bytes` says."""
    check_upload_size(relative, len(data), limit_bytes)
    if Path(relative) == Path(CONFIG_FILE):
        refuse_oversized(model, data)
    path = safe_model_path(repository, model, relative)
    # Directories made and the file written one name at a time from the repository, never
    # through a link: one raced in after the check above cannot send the write elsewhere.
    atomic_write(path, data, inside=repository_root(repository), make_parents=True)
    return path
