"""What a create or a write cut short left in a repository, removed once no process holds it.

Two kinds, each found by the name geadmin gave it and removed only under the lock its writer
held (a lock nobody holds means no process is writing it; a held one means it still runs and
removes its own):

- the staging directories of creates (`.geadmin-staging-<name>-<random>`, see
  `geadmin.ops.models.create`): under the model's "create" lock (`remove_staging`);
- the temp files `geadmin.repository.atomic.atomic_write` left in model directories (and their
  version directories) when its process was killed before the rename: under the model's
  "apply" lock, and only when older than `TEMP_FILE_GRACE_S` (`remove_temp_files`).

`geadmin.ops.models.reconcile.reconcile` runs both at every start.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from geadmin.diagnose.interrupted import CREATE_ACTION
from geadmin.errors import ConfigLockedError, GeAdminError
from geadmin.repository import locks
from geadmin.repository.atomic import is_temp_file_name
from geadmin.repository.layout import is_model_name

# geadmin.ops.models.create stages in `<repository>/<prefix><name>-<random>`
STAGING_PREFIX = ".geadmin-staging-"
_MKDTEMP_SUFFIX_CHARS = 8  # tempfile.mkdtemp's random part


def remove_staging(repository: Path, *, home: Path | None = None) -> list[Path]:
    """Remove the staging directories of creates that no geadmin process is running."""
    removed = []
    for staging in _staging_dirs(repository):
        name = _staged_name(staging)
        try:
            with _create_lock(repository, name, home):
                shutil.rmtree(staging)
        except (ConfigLockedError, OSError):
            continue  # a create still runs (it removes its own), or it vanished meanwhile
        except GeAdminError:
            continue
        removed.append(staging)
    return removed


def remove_temp_files(repository: Path, *, home: Path | None = None) -> list[Path]:
    """Remove the temp files atomic_write left in model directories (and their version
    directories) when its process was killed before the rename: only regular files named as it
    names them (`atomic.is_temp_file_name`), and only of models no geadmin process is writing
    (the model's apply lock is free; a write in progress renames its own)."""
    removed = []
    for model in _children(Path(repository)):
        if not is_model_name(model.name) or model.name.startswith("."):
            continue
        leftovers = [p for d in (model, *_children(model)) for p in _files(d)
                     if is_temp_file_name(p.name) and _older_than(p, TEMP_FILE_GRACE_S)]
        if not leftovers:
            continue
        try:
            with locks.edit_lock(Path(repository).resolve(), model.name, "apply", home=home, wait_s=0):
                for path in leftovers:
                    path.unlink()
                    removed.append(path)
        except (GeAdminError, OSError):
            continue  # a write still runs, or the file vanished meanwhile
    return removed


TEMP_FILE_GRACE_S = 60.0  # a plain write holds only the "write" lock: its temp file is younger


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except OSError:
        return False


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if not p.is_symlink() and p.is_file())
    except OSError:
        return []


def _staging_dirs(repository: Path) -> Iterator[Path]:
    try:
        entries = sorted(Path(repository).iterdir())
    except OSError:
        return
    for path in entries:
        if path.name.startswith(STAGING_PREFIX) and path.is_dir() and not path.is_symlink():
            yield path


def _staged_name(staging: Path) -> str:
    """The model a staging directory was for: its only subdirectory, else its name's middle."""
    inside = [p.name for p in staging.iterdir() if p.is_dir()] if staging.is_dir() else []
    if len(inside) == 1:
        return inside[0]
    return staging.name[len(STAGING_PREFIX):-(_MKDTEMP_SUFFIX_CHARS + 1)]


@contextlib.contextmanager
def _create_lock(repository: Path, name: str, home: Path | None) -> Iterator[None]:
    if not is_model_name(name):  # nothing can hold a lock for it: no create runs
        yield
        return
    with locks.edit_lock(Path(repository).resolve(), name, CREATE_ACTION, home=home, wait_s=0):
        yield
