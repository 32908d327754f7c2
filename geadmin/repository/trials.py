"""Tuning trials on disk: which model directories are geadmin's own trial copies, and whose.

A trial copy (`geadmin.ops.tune.search`) is named `<model>__tune_<run>` — `<run>` is the tuning
run's id, 8 lowercase hex digits drawn at random when the run starts — and its directory
holds the marker `.geadmin-trial.json`, written before the directory takes its name (it is
staged hidden, then renamed). The marker says which run made it, for which model, when,
from which process and host, against which server and from which workspace.

Only a directory with a marker whose run and name match is a trial. A name alone proves
nothing (`resnet__tune` or `resnet__tune_0a1b2c3d` may be an operator's model): nothing in
geadmin loads, unloads or deletes a model by its name's shape, and the views exclude a model
from their verdicts as a trial only when its marker says so (by name alone only where no
repository is known to read the marker from, and then only the exact shape above).

The run holds an exclusive flock on its marker for as long as it runs: the kernel drops it
when the process ends, however it ends (SIGKILL included). A marker nobody holds belongs to a
run that is over: its trial is left over (`geadmin.ops.tune.trials` removes it at the next
start of the stack, the sampler or a tuning run of that model).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MARKER = ".geadmin-trial.json"
INFIX = "__tune_"
STAGING_PREFIX = ".geadmin-trial-"  # a trial being made: hidden, so nothing lists it
RUN_CHARS = 8
MAX_NAME_BYTES = 255  # a model is a directory: one path component
_NAME = re.compile(rf"^(?P<model>.+){INFIX}(?P<run>[0-9a-f]{{{RUN_CHARS}}})$")
MAX_MARKER_BYTES = 16 << 10


def new_run_id() -> str:
    return secrets.token_hex(RUN_CHARS // 2)


def trial_name(model: str, run: str) -> str:
    return f"{model}{INFIX}{run}"


def parse_name(name: str) -> tuple[str, str] | None:
    """(model, run) when `name` has a trial's shape, else None (the shape proves nothing)."""
    found = _NAME.match(name)
    return (found["model"], found["run"]) if found else None


def fits(model: str, run: str = "0" * RUN_CHARS) -> bool:
    """True when the trial's name is a legal directory name (Triton's model names are directories)."""
    return len(trial_name(model, run).encode()) <= MAX_NAME_BYTES


@dataclass(frozen=True)
class TrialMarker:
    """What `.geadmin-trial.json` says."""

    run: str
    model: str
    trial: str
    created_at: str  # ISO 8601, UTC
    pid: int
    host: str
    server: str  # the Triton the run measures on
    workspace: str  # the workspace the run is journaled in

    def to_json(self) -> dict[str, Any]:
        return {"geadmin_trial": 1, **asdict(self)}


def new_marker(model: str, run: str, server: str, workspace: Path) -> TrialMarker:
    created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return TrialMarker(run, model, trial_name(model, run), created_at, os.getpid(), socket.gethostname(),
                       server, str(workspace))


def read_marker(directory: Path) -> TrialMarker | None:
    """The marker of `directory` when it is a trial's (marker present, well formed, naming the
    directory itself); None for anything else."""
    path = Path(directory) / MARKER
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_MARKER_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        marker = TrialMarker(str(data["run"]), str(data["model"]), str(data["trial"]),
                             str(data["created_at"]), int(data["pid"]), str(data["host"]),
                             str(data["server"]), str(data["workspace"]))
    except (KeyError, TypeError, ValueError):
        return None
    name = Path(directory).name
    staged = name.startswith(f"{STAGING_PREFIX}{marker.run}-")
    if marker.trial != trial_name(marker.model, marker.run) or (not staged and name != marker.trial):
        return None
    return marker


def is_trial(repository: Path | None, name: str) -> bool:
    """`name` is one of geadmin's trial copies: its directory in `repository` has a marker for
    it. By the name's exact shape only where the marker cannot be read: no repository known,
    or no such directory in it (a trial Triton still lists for a moment after its removal)."""
    if parse_name(name) is None:
        return False
    if repository is None:
        return True
    directory = Path(repository) / name
    if not directory.exists() and not directory.is_symlink():
        return True
    return read_marker(directory) is not None


def marked(repository: Path) -> list[tuple[Path, TrialMarker]]:
    """Every trial directory of `repository` (staging ones too), with its marker."""
    try:
        entries = sorted(Path(repository).iterdir())
    except OSError:
        return []
    found = []
    for path in entries:
        if path.is_symlink() or not path.is_dir():
            continue
        if (marker := read_marker(path)) is not None:
            found.append((path, marker))
    return found


@contextlib.contextmanager
def held(directory: Path) -> Iterator[bool]:
    """Try to take the marker's lock: yields True (held by us, for the block) when no running
    tune holds it, False when one does."""
    try:
        handle = os.open(Path(directory) / MARKER, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        yield True  # no marker any more: nobody can be holding it
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(handle)


def write_marker(directory: Path, marker: TrialMarker) -> int:
    """Write the marker (exclusive create) and lock it; returns the open descriptor, which the
    run keeps for its lifetime (closing it, or dying, releases the lock)."""
    handle = os.open(Path(directory) / MARKER, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(handle, (json.dumps(marker.to_json(), indent=2) + "\n").encode())
        os.fsync(handle)
    except BaseException:
        os.close(handle)
        raise
    return handle
