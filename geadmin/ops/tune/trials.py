"""The tuner's trial copies: made with a marker, removed only when the marker is ours, and
left-overs of killed runs removed at the next start.

Protocol (`geadmin.repository.trials` has the name and marker):

1. Journal: an audit row `tune` / `started` names the run, the trial and its directory
   before anything is written (`journal_row`).
2. Make: the copy is staged in a hidden directory (`.geadmin-trial-<run>-*`) with the marker
   written first and locked (flock, held by the run's process), the live config renamed and
   links to the live model's version directories; then renamed to `<model>__tune_<run>`. A
   directory already under that name is never touched (`RepositoryError`).
3. Every load, and the removal, first read the marker back: a directory whose marker is gone
   or names another run is not ours, and is left alone (`RepositoryError`).
4. Remove: unload, wait until Triton no longer lists it as loaded, delete the directory,
   release the lock. The run's outcome row closes the journal.
5. Left over (SIGKILL, OOM, power cut): the marker's lock is free. `remove_left` — at the
   start of `geadmin up`'s Triton, of `geadmin sampler`, of a tuning run and of a preview
   (`geadmin.ops.models.preview`, journaled as `preview` rows the same way) — unloads the
   trial where it can, deletes the directory and closes the journal with an `interrupted`
   row. A trial whose lock is held belongs to a run still going and is left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import audit, settings
from geadmin.audit import Actor, AuditEntry, Result, facts
from geadmin.domain import ModelState, same_server
from geadmin.errors import (
    GeAdminError,
    RepositoryError,
    TritonError,
    TuneBusyError,
    TuneRefusedError,
)
from geadmin.repository import trials
from geadmin.repository.layout import model_dir
from geadmin.repository.locks import pid_lock
from geadmin.repository.modelconfig import CONFIG_FILE, parse_pbtxt, read_config_text, to_file_text
from geadmin.repository.trials import TrialMarker
from geadmin.triton.client import TritonClient

ACTION = "tune"
JOURNALED = (ACTION, "preview")  # runs that journal a trial this way (geadmin.ops.models.preview too)
RUN, TRIAL, DIRECTORY = "run", "trial", "trial directory"  # the facts of a `started` row
UNLOAD_WAIT_S = 30.0


@dataclass
class TrialCopy:
    """A trial this process made; `handle` holds the marker's lock until `release`."""

    path: Path
    marker: TrialMarker
    handle: int | None = field(default=None, repr=False)
    refused: bool = False  # its last load failed: Triton stays "not ready" until the name loads again

    @property
    def name(self) -> str:
        return self.marker.trial

    def check(self) -> None:
        """Raise `RepositoryError` unless the directory still carries this run's marker."""
        found = trials.read_marker(self.path)
        if found is None or found.run != self.marker.run or self.path.is_symlink():
            raise RepositoryError(
                f"{self.path} no longer carries tuning run {self.marker.run}'s marker "
                f"({trials.MARKER}): it is not this run's trial any more, so it is neither loaded, "
                "unloaded nor deleted; look at what replaced it")

    def release(self) -> None:
        if self.handle is not None:
            os.close(self.handle)
            self.handle = None


def journal_row(model: str, marker: TrialMarker, path: Path, server: str, actor: Actor,
                home: Path | None) -> AuditEntry:
    message = "\n".join((f"started: tuning run {marker.run} of {model!r} on the trial copy {marker.trial}",
                         f"{RUN}: {marker.run}", f"{TRIAL}: {marker.trial}", f"{DIRECTORY}: {path}"))
    return audit.record(ACTION, model, Result.STARTED, actor=actor, server=server, message=message, home=home)


def record_cut_short(what: str, model: str, run: str, exc: BaseException, *, server: str, actor: Actor,
                     home: Path) -> None:
    """Audit a trial run (`what`: "tuning run", "capacity sweep") that ended without a result,
    closing its `started` row; a GeAdminError says its first line, anything else its type."""
    why = str(exc).splitlines()[0] if isinstance(exc, GeAdminError) else type(exc).__name__
    audit.try_record_action(ACTION, model, False, f"{what} {run} ended without a result: {why}\n{RUN}: {run}",
                            server=server, actor=actor, home=home)


def make_trial(repository: Path, model: str, run: str, *, server: str, home: Path) -> TrialCopy:
    """The trial copy of `model` for run `run` (see the module docstring, step 2)."""
    if not trials.fits(model, run):
        raise TuneRefusedError(f"the trial copy's name {trials.trial_name(model, run)!r} would be longer "
                               f"than "
                          f"{trials.MAX_NAME_BYTES} bytes: {model!r} cannot be tuned under this name")
    live = model_dir(repository, model)
    marker = trials.new_marker(model, run, server, home)
    target = Path(repository) / marker.trial
    if target.exists() or target.is_symlink():
        raise RepositoryError(f"{target} already exists and this run did not make it: it is left alone")
    staging = Path(tempfile.mkdtemp(prefix=f"{trials.STAGING_PREFIX}{run}-", dir=repository))
    handle: int | None = None
    try:
        handle = trials.write_marker(staging, marker)
        for entry in sorted(live.iterdir()):
            if entry.name not in (CONFIG_FILE, trials.MARKER) and not entry.name.startswith("."):
                (staging / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
        config = parse_pbtxt(read_config_text(live / CONFIG_FILE))
        config.name = marker.trial
        (staging / CONFIG_FILE).write_text(to_file_text(config))
        if target.exists() or target.is_symlink():
            raise RepositoryError(f"{target} appeared while the trial was made: it is left alone")
        os.rename(staging, target)
    except BaseException:
        if handle is not None:
            os.close(handle)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return TrialCopy(target, marker, handle)


def remove_trial(client: TritonClient | None, copy: TrialCopy) -> None:
    """Unload and delete this run's trial (step 4); raises `RepositoryError`, touching
    nothing, when the directory is not this run's any more."""
    try:
        copy.check()
        if client is not None:
            if copy.refused:  # its own file (the live config, renamed) loads: Triton is ready again
                with contextlib.suppress(GeAdminError):
                    client.load(copy.name)
            unload_and_wait(client, copy.name)
        shutil.rmtree(copy.path)
    except FileNotFoundError:
        pass
    finally:
        copy.release()


def unload_and_wait(client: TritonClient, name: str, wait_s: float = UNLOAD_WAIT_S) -> bool:
    """Unload `name` and wait until Triton no longer lists it as loaded or unloading; True
    when it was listed."""
    with contextlib.suppress(TritonError):
        client.unload(name)
    deadline = time.monotonic() + wait_s
    listed = False
    while time.monotonic() < deadline:
        try:
            entry = next((m for m in client.repository_index() if m.name == name), None)
        except TritonError:
            return listed
        if entry is None or entry.state not in (ModelState.READY, ModelState.LOADING, ModelState.UNLOADING):
            return listed or entry is not None
        listed = True
        time.sleep(0.2)
    return listed


@contextlib.contextmanager
def tune_lock(home: Path, model: str, *, purpose: str = "") -> Iterator[None]:
    """One tuning run per model and workspace; TuneBusyError while another runs."""

    def refused(holder: str) -> GeAdminError:
        return TuneBusyError(f"another tuning run of {model} is under way ({holder}); wait for it to end")

    with pid_lock(home / "locks" / f"tune-{model}.lock", refused, what=purpose):
        yield


def _run_going(home: Path | None, model: str) -> bool:
    """A tuning run of `model` holds the workspace's tune lock now."""
    if home is None:
        return False
    try:
        with tune_lock(home, model):
            return False
    except TuneBusyError:
        return True
    except OSError:
        return False


# -- left over by a run that died ---------------------------------------------------------
@dataclass(frozen=True)
class Leftovers:
    removed: tuple[str, ...] = ()  # one line each, for the operator
    running: tuple[str, ...] = ()  # trials of runs still going (their marker is locked)
    problems: tuple[str, ...] = ()


def remove_left(repository: Path | None, *, client: TritonClient | None = None, home: Path | None = None,
                model: str | None = None, actor: Actor | None = None) -> Leftovers:
    """Remove the trials of tuning runs that died (module docstring, step 5): the marked
    directories of `repository` and those the workspace's journal names, of `model` only
    when given. Never raises for what it meets: it is in the result."""
    actor = actor or Actor.os_user()
    home = home or settings.home()
    removed: list[str] = []
    running: list[str] = []
    problems: list[str] = []
    journal = _open_runs(home, problems)
    places = {path.resolve(): marker for path, marker in (trials.marked(repository) if repository else [])}
    for _, path in journal.values():
        if path.is_dir() and (marker := trials.read_marker(path)) is not None:
            places.setdefault(path.resolve(), marker)
    for path, marker in sorted(places.items()):
        if model is not None and marker.model != model:
            continue
        with trials.held(path) as ours:
            if not ours:
                running.append(f"{marker.trial} (tuning run {marker.run}, pid {marker.pid} on {marker.host})")
                continue
            try:
                line = _remove_dead(path, marker, client)
            except (OSError, GeAdminError) as exc:
                problems.append(f"the trial {path} of tuning run {marker.run} was not removed: {exc}")
                continue
        removed.append(line)
        _close(journal.pop(marker.run, (None, path))[0], marker.model, marker.run, line, marker.server,
               actor, home, problems)
    for run, (entry, path) in journal.items():  # journaled, but its directory is gone or not a trial
        mine = model is None or entry.model == model
        if mine and not path.exists() and not _run_going(home, entry.model):
            _close(entry, entry.model, run, f"tuning run {run} was cut short; its trial copy {path.name} is "
                   "no longer on disk", entry.server, actor, home, problems)
    return Leftovers(tuple(removed), tuple(running), tuple(problems))


def _remove_dead(path: Path, marker: TrialMarker, client: TritonClient | None) -> str:
    where = ""
    if client is not None and path.name == marker.trial:  # a staged copy was never loaded
        _clear_refusal(client, marker.trial)
        unloaded = unload_and_wait(client, marker.trial)
        where = f"; unloaded it from {client.url}" if unloaded else ""
        if not same_server(client.url, marker.server):
            where += (f"; it was measured on {marker.server}, which may still hold it until it restarts "
                      f"(unload {marker.trial} there)")
    if trials.read_marker(path) != marker:  # replaced while we looked: not ours to delete
        raise RepositoryError(f"{path} changed while it was being removed: left alone")
    shutil.rmtree(path)
    return (f"removed the trial copy {marker.trial} that tuning run {marker.run} of {marker.model!r} "
            f"left (started {marker.created_at} by pid {marker.pid} on {marker.host}, which ended before "
            f"removing it){where}")


def _clear_refusal(client: TritonClient, name: str) -> None:
    """A trial whose last load Triton refused keeps Triton "not ready" until that name loads
    again: load its own file (the live config, renamed) once before it is unloaded."""
    with contextlib.suppress(GeAdminError):
        entry = next((m for m in client.repository_index() if m.name == name), None)
        if entry is not None and entry.state is ModelState.UNAVAILABLE and entry.reason != "unloaded":
            client.load(name)


def _open_runs(home: Path | None, problems: list[str]) -> dict[str, tuple[AuditEntry, Path]]:
    """run -> (its `started` row, the trial directory) for tuning runs with no outcome row."""
    try:
        rows = sorted((r for action in JOURNALED for r in audit.query(action=action, home=home, limit=500)),
                      key=lambda r: r.id, reverse=True)
    except GeAdminError as exc:
        problems.append(f"cannot read the audit log for tuning runs cut short: {exc}")
        return {}
    closed = {facts(r.message).get(RUN) for r in rows if r.result != Result.STARTED.value}
    found = {}
    for row in rows:
        known = facts(row.message)
        if row.result == Result.STARTED.value and known.get(RUN) and known[RUN] not in closed \
                and known.get(DIRECTORY):
            found[known[RUN]] = (row, Path(known[DIRECTORY]))
    return found


def _close(entry: AuditEntry | None, model: str, run: str, line: str, server: str, actor: Actor,
           home: Path | None, problems: list[str]) -> None:
    message = f"{line}\n{RUN}: {run}"
    try:
        audit.record(entry.action if entry else ACTION, model, Result.INTERRUPTED, actor=actor,
                     server=entry.server if entry else server,
                     message=message, home=home)
    except GeAdminError as exc:
        problems.append(f"the removal is not in the audit log: {exc}")


def at_start(repository: Path | None, *, client: TritonClient | None = None, home: Path | None = None,
             actor: Actor | None = None) -> list[str]:
    """`remove_left` as a start-up step: one line per trial removed or problem met."""
    if repository is not None and not Path(repository).is_dir():
        repository = None
    found = remove_left(repository, client=client, home=home, actor=actor)
    return [*found.removed, *found.problems]
