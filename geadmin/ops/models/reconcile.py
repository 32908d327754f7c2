"""Applies and creates cut short: their open `started` rows, closed at the next start as `interrupted`.

What a change left behind when its process died is found at the next start and reported — never
guessed, never silently dropped.

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
4. Remove the staging directories of creates and the temp files of writes that no process
   holds (`geadmin.ops.models.leftovers`).

`geadmin.diagnose.interrupted.unresolved` lists the interrupted applies that left a config
nobody has applied or rolled back since: the verdict (`geadmin status`, the Overview) and the
Models page show them until an operator applies or rolls back that model.

`at_start` runs `reconcile` as a start-up step, and first closes the fleet rollouts cut short
(`geadmin.ops.models.rollout_recovery.close_rollouts`), whatever the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin import audit, db
from geadmin.audit import Actor, AuditEntry, Result, facts
from geadmin.diagnose import interrupted as flags
from geadmin.diagnose.interrupted import (
    APPLY_ACTIONS,
    CREATE_ACTION,
    NEW,
    ON_DISK,
    PATH,
    PREVIOUS,
    REPOSITORY,
    REVISION,
    STARTED_ROW,
    Interrupted,
)
from geadmin.errors import ConfigLockedError, GeAdminError
from geadmin.ops.models.leftovers import remove_staging, remove_temp_files
from geadmin.ops.models.rollout_recovery import close_rollouts
from geadmin.repository import locks, revisions
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_bytes
from geadmin.repository.validate import Severity, validate_text

OUTCOMES_LINKED = "outcomes linked"  # a start whose own outcome rows name it (rows of older versions do not)


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
    lines = [headline, f"{REPOSITORY}: {_key(repository)}", f"{PATH}: {path}", f"{OUTCOMES_LINKED}: yes"]
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
    temp = remove_temp_files(repository, home=home)
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
    or is a refusal: another process refused while this apply or create held the lock (a locked
    config, a declined confirmation, a name being created) is not its outcome (its own refusals
    after the start are linked)."""
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
    if row.result != Result.REFUSED.value:
        return True
    # A refusal names the start it ends; an unlinked one is another process's. Before links, a
    # create's own refusals were unlinked: they close its start (an apply's never did).
    return entry.action not in APPLY_ACTIONS and OUTCOMES_LINKED not in facts(entry.message)


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
