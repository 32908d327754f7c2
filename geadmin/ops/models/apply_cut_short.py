"""An apply cut short, from both ends (`geadmin.ops.models.apply` runs both):

- in this process: Ctrl-C or SIGTERM (`geadmin.interrupts` turns SIGTERM into the same
  KeyboardInterrupt) once the started row is written. The previous file is put back
  (`ConfigReload.cut_short`); `cause` is the line that says what stopped it and where.
- by a process that died (SIGKILL, OOM, power cut) after writing the new file: the next start
  closes its started row as `interrupted` (`geadmin.ops.models.reconcile`), and the model stays
  flagged (`geadmin.diagnose.interrupted`). Applying that same file again finds it here
  (`unfinished`): the apply reloads and checks the file on disk as the cut-short one would have,
  with the revision it replaced as the way back, and its outcome row closes that start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin import audit
from geadmin.audit import Result, facts
from geadmin.diagnose import interrupted as flags
from geadmin.diagnose.interrupted import APPLY_ACTIONS, STARTED_ROW
from geadmin.errors import GeAdminError
from geadmin.ops.models import reconcile
from geadmin.repository import revisions
from geadmin.repository.revisions import Revision


def cause(model: str, *, loading: bool) -> str:
    """What cut this process's apply short, and when: the first words of its one line."""
    when = ("while Triton loaded the new config" if loading
            else "before Triton was asked to load the new config")
    return f"cut short by Ctrl-C or SIGTERM {when} of {model!r}"


@dataclass(frozen=True)
class Unfinished:
    """An apply a dead process cut short after writing its new file, still flagged: the file on
    disk is its new one, and `previous` the revision it replaced (kept before its write)."""

    start: reconcile.Started
    previous: Revision

    def note(self) -> str:
        """The line an apply that finished it adds to its outcome."""
        entry = self.start.entry
        return (f"  this is the file the {entry.action} by {entry.who} at {entry.at:%Y-%m-%d %H:%M} UTC "
                "wrote before it was cut short: that change is now finished and closed")


def unfinished(repository: Path, model: str, on_disk_sha256: str, *, home: Path | None = None
               ) -> Unfinished | None:
    """The flagged apply of `model` whose new file is the one on disk (`on_disk_sha256`), with the
    revision it replaced; None when there is none (or the audit log or the revision cannot be read:
    the apply is then only "unchanged", and the flag stays with its rollback)."""
    for item in flags.unresolved(repository, home=home):
        if (item.model != model or item.action not in APPLY_ACTIONS or item.restore_command
                or item.previous_revision is None):
            continue
        start_id = facts(item.message).get(STARTED_ROW, "")
        try:
            starts = audit.query(model=model, action=item.action, result=Result.STARTED, home=home)
            start = next((reconcile.parse_started(e) for e in starts if str(e.id) == start_id), None)
            if start is None or start.new_sha256 != on_disk_sha256:
                continue
            previous = revisions.read_revision(repository, model, item.previous_revision, home=home)
            if previous.sha256 == start.previous_sha256:
                return Unfinished(start, previous)
        except GeAdminError:
            continue
    return None
