"""Changes cut short: what an apply or a create left behind when its process died, found at
the next start and reported — never guessed, never silently dropped.

An apply writes an audit row with result `started` before it writes the file, and a create
one before it stages its directory (`started_message` names the repository, the path and,
for an apply, the hashes of the previous and the new config). Each then writes its outcome
row (ok, rolled back, refused, ...); an apply's names its started row (`STARTED_ROW`). A `started`
row with no later outcome row of the same change (a refusal by another process, e.g. of a
locked config, is none), whose lock nobody holds, is a change that was cut short (SIGKILL,
OOM, power cut, a Streamlit rerun that unwound the script). `reconcile` — run by the dashboard at
start and by the CLI commands that touch the repository — closes each such row:

1. Look at what is on disk. The write is atomic (temp file + rename), so a config is either
   the previous one or the new one, never half-written; a created model directory is either
   in place whole (one rename) or absent.
2. Validate the config on disk (`geadmin.repository.validate`).
3. Write an `interrupted` audit row that says what is on disk, whether it is valid, and which
   kept revision to roll back to (`geadmin config rollback MODEL N`).
4. Remove the staging directories of creates that no process holds (`.geadmin-staging-*`).

`geadmin.diagnose.interrupted.unresolved` lists the interrupted applies that left a config
nobody has applied or rolled back since: the verdict (`geadmin status`, the Overview) and the
Models page show them until an operator applies or rolls back that model.

Fleet rollouts are journaled the same way (`geadmin.diagnose.rollouts`): a running rollout
holds its fleet's lock (`rollout_lock`); `close_rollouts` ends every open journal whose lock
nobody holds with an `interrupted` row that says what changed where and, for an apply, which
config each repository holds now. It runs at every start `at_start` runs, and at the start of
`geadmin fleet` commands and of the Fleet page; the rollout then stays flagged (DEGRADED,
rule interrupted-change) until `geadmin fleet restore ID` or a resume.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from geadmin import audit, db, settings
from geadmin.audit import Actor, AuditEntry, Result, facts
from geadmin.diagnose import interrupted as flags
from geadmin.diagnose import rollouts
from geadmin.diagnose.interrupted import (
    APPLY_ACTIONS,
    CREATE_ACTION,
    NEW,
    ON_DISK,
    PATH,
    PREVIOUS,
    REPOSITORY,
    REVISION,
    Interrupted,
)
from geadmin.errors import ConfigLockedError, GeAdminError
from geadmin.repository import locks, revisions
from geadmin.repository.atomic import is_temp_file_name
from geadmin.repository.layout import is_model_name
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_bytes
from geadmin.repository.validate import Severity, validate_text

# geadmin.ops.models.create stages in `<repository>/<prefix><name>-<random>`
STAGING_PREFIX = ".geadmin-staging-"
_MKDTEMP_SUFFIX_CHARS = 8  # tempfile.mkdtemp's random part
STARTED_ROW = "started row"  # the fact that links an outcome row to the id of its `started` row


@dataclass(frozen=True)
class Started:
    """A `started` audit row, read back."""

    entry: AuditEntry
    repository: Path
    path: Path  # the config file (apply) or the model directory (create)
    previous_sha256: str = ""
    new_sha256: str = ""


@dataclass(frozen=True)
class Report:
    """What one `reconcile` found and did."""

    interrupted: tuple[Interrupted, ...] = ()  # closed now
    in_progress: tuple[str, ...] = ()  # started rows whose process still runs (their lock is held)
    staging_removed: tuple[Path, ...] = ()
    temp_removed: tuple[Path, ...] = ()  # atomic_write's temp files left by a process killed mid-write
    problems: tuple[str, ...] = ()  # what could not be read or written (never raises)


def started_message(headline: str, repository: Path, path: Path, previous_sha256: str = "",
                    new_sha256: str = "") -> str:
    """The message of a `started` row: the headline, then the facts `reconcile` needs."""
    lines = [headline, f"{REPOSITORY}: {_key(repository)}", f"{PATH}: {path}"]
    if previous_sha256 or new_sha256:
        lines += [f"{PREVIOUS}: {previous_sha256}", f"{NEW}: {new_sha256}"]
    return "\n".join(lines)


def outcome_message(message: str, start: Started) -> str:
    """`message` with the fact that makes it the outcome of `start` (and of no other row)."""
    return f"{message}\n{STARTED_ROW}: {start.entry.id}"


def reconcile(repository: Path, *, home: Path | None = None, actor: Actor | None = None) -> Report:
    """Close every change of `repository` that was cut short (see the module docstring)."""
    actor = actor or Actor.os_user()
    closed: list[Interrupted] = []
    running: list[str] = []
    problems: list[str] = []
    try:
        starts = open_starts(repository, home=home)
    except GeAdminError as exc:
        return Report(problems=(f"cannot read the audit log to find interrupted changes: {exc}",))
    for start in starts:
        purpose = "apply" if start.entry.action in APPLY_ACTIONS else CREATE_ACTION
        try:
            with locks.edit_lock(start.repository, start.entry.model, purpose, home=home, wait_s=0):
                if _is_open(start.entry, home):  # another start may have closed it meanwhile
                    closed.append(close(start, actor=actor, home=home))
        except ConfigLockedError:
            running.append(f"{start.entry.action} of {start.entry.model!r}")
        except GeAdminError as exc:
            problems.append(f"the interrupted {start.entry.action} of {start.entry.model!r}: {exc}")
    removed = remove_staging(repository, home=home)
    temp = _remove_temp_files(repository, home=home)
    return Report(tuple(closed), tuple(running), tuple(removed), tuple(temp), tuple(problems))


def open_starts(repository: Path | None = None, *, home: Path | None = None) -> list[Started]:
    """`started` rows (of `repository`, when given) with no outcome row after them, oldest first."""
    found = []
    for entry in reversed(audit.query(result=Result.STARTED, home=home)):
        start = parse_started(entry)
        if start is None or (repository is not None and _key(start.repository) != _key(repository)):
            continue
        if _is_open(entry, home):
            found.append(start)
    return found


def _is_open(entry: AuditEntry, home: Path | None) -> bool:
    """No outcome row of the same change after `entry` (`_closes`)."""
    later = audit.query(model=entry.model, action=entry.action, home=home)
    return not any(_closes(row, entry) for row in later)


def _closes(row: AuditEntry, entry: AuditEntry) -> bool:
    """Is `row` (same action and model) the outcome of the change `entry` started? A row linked
    to a started row (`STARTED_ROW`) closes that one only. An unlinked row (written before the
    link, or by hand) closes it unless it is a start, comes from another server or repository,
    or, for an apply, is a refusal: another process refused while this apply held the lock (a
    locked config, a declined confirmation) is not this apply's outcome."""
    if row.id <= entry.id or row.result == Result.STARTED.value:
        return False
    known = facts(row.message)
    if STARTED_ROW in known:
        return known[STARTED_ROW] == str(entry.id)
    if row.server and entry.server and row.server != entry.server:
        return False
    repository = facts(entry.message).get(REPOSITORY)
    if REPOSITORY in known and repository is not None and known[REPOSITORY] != repository:
        return False
    return not (entry.action in APPLY_ACTIONS and row.result == Result.REFUSED.value)


def parse_started(entry: AuditEntry) -> Started | None:
    known = facts(entry.message)
    if REPOSITORY not in known or PATH not in known:
        return None
    return Started(entry, Path(known[REPOSITORY]), Path(known[PATH]), known.get(PREVIOUS, ""),
                   known.get(NEW, ""))


def close(start: Started, *, actor: Actor | None = None, home: Path | None = None,
          cause: str = "its process ended before it wrote the outcome") -> Interrupted:
    """Look at the disk, validate, and write the `interrupted` row of `start` (raises
    `WorkspaceDatabaseError` when the row cannot be written)."""
    if start.entry.action == CREATE_ACTION:
        on_disk, headline, revision = _created_state(start)
    else:
        on_disk, headline, revision = _config_state(start, home)
    lines = [f"{headline} ({cause}; started at {start.entry.at.isoformat()} by {start.entry.who})",
             f"{ON_DISK}: {on_disk}", f"{REPOSITORY}: {_key(start.repository)}",
             f"{STARTED_ROW}: {start.entry.id}"]
    if revision is not None:
        lines.append(f"{REVISION}: {revision}")
    message = "\n".join(lines)
    row = audit.record(start.entry.action, start.entry.model, Result.INTERRUPTED, actor=actor,
                       server=start.entry.server, message=message, diff=start.entry.diff, home=home)
    return flags.from_row(row)


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


def _remove_temp_files(repository: Path, *, home: Path | None = None) -> list[Path]:
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


def _config_state(start: Started, home: Path | None) -> tuple[str, str, int | None]:
    """What an apply cut short left: which config is on disk, is it valid, what to roll back to."""
    model = start.entry.model
    try:
        data = read_config_bytes(start.path)
    except FileNotFoundError:
        return "missing", f"{start.path} is missing", None
    except (OSError, GeAdminError) as exc:
        return "other", f"{start.path} cannot be read ({getattr(exc, 'strerror', None) or exc})", None
    sha = revisions.sha256_of(data)
    if sha == start.previous_sha256:
        return "previous", (f"the previous {CONFIG_FILE} of {model!r} is on disk, unchanged: nothing "
                            "was written"), None
    kept = revisions.revision_with_hash(start.repository, model, start.previous_sha256, home) \
        if start.previous_sha256 else None
    which = "the new" if sha == start.new_sha256 else "another (changed since)"
    state = "new" if sha == start.new_sha256 else "other"
    findings = validate_text(data.decode("utf-8", errors="replace"), start.path.parent)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    valid = (f"it does not validate: {errors[0].message}" if errors else "it validates")
    loaded = "; Triton may not have loaded it (check `geadmin models list`)"
    return state, f"{which} {CONFIG_FILE} of {model!r} is on disk, whole; {valid}{loaded}", \
        kept.number if kept else None


def _created_state(start: Started) -> tuple[str, str, None]:
    if start.path.is_dir():
        return "created", (f"the model directory {start.path} is in place, whole (it is moved in by one "
                           "rename), but was not loaded by this create: load it or remove it"), None
    return "absent", f"nothing was created at {start.path}; its staging directory is removed", None


def _key(repository: Path) -> str:
    return str(Path(repository).expanduser().resolve())


def at_start(repository: Path | None, *, home: Path | None = None, actor: Actor | None = None) -> list[str]:
    """`reconcile` as a start-up step (the CLI's commands that name a repository, the
    dashboard): one line per change closed or directory removed, for the operator; and
    `close_rollouts`, whatever the repository."""
    blind = db.unreadable(home)
    if blind:  # one line, not one per reader of the same file
        return [f"interrupted changes and rollouts not checked: {blind}"]
    rollout_lines = close_rollouts(home=home, actor=actor)
    if repository is None or not Path(repository).is_dir():
        return rollout_lines
    report = reconcile(repository, home=home, actor=actor)
    lines = [item.reason() for item in report.interrupted]
    lines += [f"removed {path}: the staging directory of a create that was cut short"
              for path in report.staging_removed]
    lines += [f"removed {path}: a temp file geadmin left when a write was cut short (the file it was "
              "replacing is untouched)" for path in report.temp_removed]
    return [*rollout_lines, *lines, *report.problems]


# -- fleet rollouts -------------------------------------------------------------------------
@contextlib.contextmanager
def rollout_lock(fleet: str, *, home: Path | None = None, wait_s: float = 0) -> Iterator[None]:
    """Held by a rollout (and a restore) of `fleet` while it runs, in any geadmin process:
    `ConfigLockedError` when another holds it."""
    key = hashlib.sha256(fleet.encode()).hexdigest()[:16]
    path = (home or settings.home()) / "locks" / f"fleet-{key}.rollout.lock"
    with locks.file_lock(path, f"a rollout of fleet {fleet!r} (wait for it to end, or abort it where it "
                         "runs)", wait_s=wait_s):
        yield


def close_rollouts(*, home: Path | None = None, actor: Actor | None = None) -> list[str]:
    """End every open rollout journal whose process is gone with an `interrupted` row (what
    changed where); one line per journal closed, or why it could not be. Never raises."""
    actor = actor or Actor.os_user()
    lines: list[str] = []
    try:
        found = rollouts.open_journals(home=home)
    except GeAdminError as exc:
        return [f"cannot read the audit log to find interrupted rollouts: {exc}"]
    for journal in found:
        try:
            with rollout_lock(journal.plan.fleet, home=home):
                if rollouts.read(journal.id, home=home).open:  # another start may have closed it
                    close_rollout(journal, actor=actor, home=home)
                    lines.append(f"{journal.reason()}: restore it with `{journal.restore_command}`")
        except ConfigLockedError:
            continue  # it runs: its own process ends it
        except GeAdminError as exc:
            lines.append(f"the interrupted rollout #{journal.id}: {exc}")
    return lines


def close_rollout(journal: rollouts.Journal, *, actor: Actor, home: Path | None,
                  cause: str = "its process ended before it wrote the end row") -> AuditEntry:
    """The `interrupted` row of `journal`: what changed where, and what each repository holds."""
    lines = [f"{journal.what} cut short ({cause}; started at {journal.started.at.isoformat()} by "
             f"{journal.started.who}): {journal.where()}", f"{rollouts.JOURNAL}: {journal.id}",
             f"{rollouts.LEFT}: {rollouts.names(journal.touched)}"]
    lines += [f"{ON_DISK} {previous.repository}: {_rollout_disk(journal, previous)}"
              for previous in journal.plan.previous]
    return audit.record(journal.plan.action, journal.plan.model, Result.INTERRUPTED, actor=actor,
                        server=journal.plan.fleet, message="\n".join(lines), home=home)


def _rollout_disk(journal: rollouts.Journal, previous: rollouts.Previous) -> str:
    path = Path(previous.repository) / journal.plan.model / CONFIG_FILE
    try:
        sha = revisions.sha256_of(read_config_bytes(path))
    except (OSError, GeAdminError) as exc:
        return f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if sha == previous.sha256:
        return "the previous config"
    return "the new config" if sha == journal.plan.new_sha256 else f"another config (sha256 {sha[:12]})"
