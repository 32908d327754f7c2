"""Changes that were cut short and still wait for an operator, read from the audit log.

`geadmin.ops.models.reconcile` (at the next start) closes every apply or create whose process died
after its `started` row with an `interrupted` row that states what is on disk ("key: value"
lines after the headline: `on disk`, `previous revision`, `repository`). An interrupted apply
that left a config other than the previous one stays *unresolved* until someone applies or
rolls back that model: the verdict (`geadmin status`, the Overview) and the Models page show
each with the command that puts the previous revision back, and, when the new file is on disk,
the command that applies it again (which finishes that apply and closes the flag).

Fleet rollouts cut short (or failed with servers left changed) are listed the same way, from
their journal (`geadmin.diagnose.rollouts`), with `geadmin fleet restore ID` as the fix.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from geadmin import audit
from geadmin.audit import AuditEntry, Result, facts
from geadmin.diagnose import rollouts
from geadmin.errors import GeAdminError
from geadmin.repository.modelconfig import CONFIG_FILE

APPLY_ACTIONS = ("apply", "rollback")  # actions whose `started` row an apply writes
CREATE_ACTION = "create"
# The tail lines of `started` and `interrupted` rows (after the headline), one "key: value" each.
REPOSITORY, PATH, PREVIOUS, NEW = "repository", "path", "previous sha256", "new sha256"
STARTED_ROW = "started row"  # the fact that links an outcome row to the id of its `started` row
ON_DISK, REVISION = "on disk", "previous revision"
_NOT_AN_OUTCOME = (Result.STARTED.value, Result.INTERRUPTED.value, Result.REFUSED.value)


@dataclass(frozen=True)
class Interrupted:
    """A change cut short, as its `interrupted` audit row states it."""

    model: str
    action: str
    at: str  # when the row was written (ISO 8601, UTC); the message says when it started, by whom
    server: str
    on_disk: str  # "previous", "new", "other", "missing" (apply); "created", "absent" (create)
    message: str  # what is on disk, whether it is valid, what to do
    repository: str = ""
    previous_revision: int | None = None  # the revision to roll back to (apply)
    audit_id: int = 0
    restore_command: str = ""  # a fleet rollout: the command that puts its servers back

    @property
    def fix(self) -> str:
        """The command that puts things back: a config rollback, or a fleet restore."""
        return self.rollback_command or self.restore_command

    @property
    def headline(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    @property
    def rollback_command(self) -> str:
        if self.previous_revision is None:
            return ""
        return f"geadmin config rollback {shlex.quote(self.model)} {self.previous_revision}"

    @property
    def apply_again_command(self) -> str:
        """An apply that left its new file on disk: applying that file again finishes it (reloaded,
        checked, closed: `geadmin.ops.models.apply_cut_short`, which needs the revision it replaced).
        Names quoted: a model or a repository path with a space or a `;` is one word in a shell."""
        if self.action not in APPLY_ACTIONS or self.on_disk != "new" or not self.repository \
                or self.previous_revision is None:
            return ""
        path = Path(self.repository) / self.model / CONFIG_FILE
        return f"geadmin config apply {shlex.quote(self.model)} {shlex.quote(str(path))}"

    def reason(self) -> str:
        """One line for a verdict, a notice or `geadmin status`: both ways out of an apply whose new
        file is on disk (keep it: apply it again; undo it: roll back)."""
        if self.restore_command:
            return f"{self.headline}; restore: `{self.restore_command}` (or on the Fleet page)"
        step = f"; roll back: `{self.rollback_command}`" if self.rollback_command else ""
        if self.apply_again_command:
            step = f"; to keep it, apply it again: `{self.apply_again_command}`" + (
                f"; to undo it, roll back: `{self.rollback_command}`" if self.rollback_command else "")
        return f"an interrupted {self.action} of {self.model!r}: {self.headline}{step}"


def from_row(row: AuditEntry) -> Interrupted:
    known = facts(row.message)
    revision = known.get(REVISION, "")
    return Interrupted(row.model, row.action, row.at.isoformat(timespec="seconds"), row.server,
                       known.get(ON_DISK, ""), row.message, known.get(REPOSITORY, ""),
                       int(revision) if revision.isdigit() else None, row.id)


def from_journal(journal: rollouts.Journal) -> Interrupted:
    end = journal.end
    return Interrupted(journal.plan.model, journal.plan.action,
                       (end or journal.started).at.isoformat(timespec="seconds"), journal.plan.fleet,
                       "", journal.reason(), audit_id=journal.id, restore_command=journal.restore_command)


def unresolved(repository: Path | None = None, *, home: Path | None = None,
               limit: int = 200, url: str | None = None) -> list[Interrupted]:
    """Interrupted applies (of `repository`, when given) that left a config nobody applied or
    rolled back since, newest first; then the unresolved fleet rollouts (that touched `url` or
    `repository`, when either is given). Never raises: an unreadable audit log lists nothing."""
    fleet = [from_journal(j) for j in rollouts.unresolved(home=home, url=url, repository=repository)]
    return [*_applies(repository, home, limit), *fleet]


def _applies(repository: Path | None, home: Path | None, limit: int) -> list[Interrupted]:
    wanted = str(Path(repository).expanduser().resolve()) if repository is not None else None
    try:
        found = []
        for row in audit.query(result=Result.INTERRUPTED, limit=limit, home=home):
            item = from_row(row)
            if row.action not in APPLY_ACTIONS or item.on_disk == "previous":
                continue
            if wanted is not None and item.repository and item.repository != wanted:
                continue
            later = [r for r in audit.query(model=row.model, home=home)
                     if r.id > row.id and r.action in APPLY_ACTIONS and r.result not in _NOT_AN_OUTCOME]
            if not later:
                found.append(item)
        return found
    except GeAdminError:
        return []


def reasons(repository: Path | None = None, *, home: Path | None = None) -> list[str]:
    """One line per unresolved interrupted apply: for the verdict and `geadmin status`."""
    return [item.reason() for item in unresolved(repository, home=home)]
