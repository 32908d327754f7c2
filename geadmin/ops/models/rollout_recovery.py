"""Fleet rollouts cut short: the lock a running one holds, the row that ends one whose process died.

Fleet rollouts are journaled like applies (`geadmin.diagnose.rollouts`): a running rollout
holds its fleet's lock (`rollout_lock`); `close_rollouts` ends every open journal whose lock
nobody holds with an `interrupted` row that says what changed where and, for an apply, which
config each repository holds now. It runs at every start `geadmin.ops.models.reconcile.at_start`
runs, and at the start of `geadmin fleet` commands and of the Fleet page; the rollout then stays
flagged (DEGRADED, rule interrupted-change) until `geadmin fleet restore ID` or a resume.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from geadmin import audit, settings
from geadmin.audit import Actor, AuditEntry, Result
from geadmin.diagnose import rollout_plan, rollouts
from geadmin.diagnose.interrupted import ON_DISK
from geadmin.errors import ConfigLockedError, GeAdminError
from geadmin.repository import locks, revisions
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_bytes


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
                  cause: str = "") -> AuditEntry:
    """The `interrupted` row of `journal`: what changed where, and what each repository holds."""
    retire = journal.plan.retire
    if not cause:
        cause = (f"its process ended between the two steps of a version rollout, {retire.both}, before it "
                 f"retired {retire.old_text}" if retire is not None and journal.between_steps
                 else "its process ended before it wrote the end row")
    lines = [f"{journal.what} cut short ({cause}; started at {journal.started.at.isoformat()} by "
             f"{journal.started.who}): {journal.where()}", f"{rollouts.JOURNAL}: {journal.id}",
             f"{rollouts.LEFT}: {rollouts.names(journal.touched)}"]
    lines += [f"{ON_DISK} {previous.repository}: {_rollout_disk(journal, previous)}"
              for previous in journal.plan.previous]
    return audit.record(journal.plan.action, journal.plan.model, Result.INTERRUPTED, actor=actor,
                        server=journal.plan.fleet, message="\n".join(lines), home=home)


def _rollout_disk(journal: rollouts.Journal, previous: rollout_plan.Previous) -> str:
    path = Path(previous.repository) / journal.plan.model / CONFIG_FILE
    try:
        sha = revisions.sha256_of(read_config_bytes(path))
    except (OSError, GeAdminError) as exc:
        return f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if sha == previous.sha256:
        return "the previous config"
    return "the new config" if sha == journal.plan.new_sha256 else f"another config (sha256 {sha[:12]})"
