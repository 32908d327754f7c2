"""Fleet rollouts as their journal in the audit log tells them (reads only).

A rollout (`geadmin.fleet.rollout`) journals itself in audit rows of action `fleet <change>`
(`fleet apply`, `fleet reload`, ...), model = the model:

1. `started`, before the first server is touched (server = the fleet): the plan — the fleet,
   the change, the model, each server with its URL, wave and repository, and for an apply the
   config each repository held before (a kept revision, by number and sha256, so a restore is
   byte-identical) and the new config (so the rollout can be resumed);
2. `step`, one or two per server (server = the member): `changing` before it is touched, then
   `changed` or `failed`, and `restored` / `not restored` when it is put back;
3. the end (server = the fleet): `ok`; `rolled_back` (stopped, every server it touched put
   back); `failed` (an error, or a server it could not put back: `left changed` names them);
   or `interrupted`, written by the next start (`geadmin.ops.models.rollout_recovery.close_rollouts`) when
   the journal was left open and no process holds its lock — what changed where.

Every row after the first names its journal (`journal: <id of the started row>`). A journal
ended `interrupted`, or `failed` with servers left changed, is *unresolved* until a restore
(`geadmin fleet restore ID`) ends it again or a resumed rollout names it (`resume of: ID`).

A version rollout (`geadmin.fleet.versions`) is two journals: its first step's plan holds the
step after it (`retire`: the versions to retire and the config that does it), and the retire
step's plan names the first (`follows`). A first step ended `ok` whose retire step never ran
(or did not end done) is *between its steps*: open like a journal without an end row (both
versions serve), closed `interrupted` by the next start once no process holds the fleet's lock,
then unresolved until restored or resumed (a resume runs the retire step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from geadmin import audit
from geadmin.audit import AuditEntry, Result, facts
from geadmin.diagnose.rollout_plan import PREFIX, RolloutPlan
from geadmin.errors import GeAdminError, RolloutJournalError

# "key: value" lines after a row's headline
JOURNAL, PLAN, OUTCOME, WAVE, LEFT = "journal", "plan", "outcome", "wave", "left changed"
CHANGING, CHANGED, FAILED = "changing", "changed", "failed"
RESTORED, NOT_RESTORED = "restored", "not restored"
SCAN_LIMIT = 200  # started rows looked at, newest first


@dataclass(frozen=True)
class Journal:
    """One rollout, read back: its started row, its plan, its steps and its end rows, oldest first."""

    started: AuditEntry
    plan: RolloutPlan
    steps: tuple[AuditEntry, ...] = ()
    ends: tuple[AuditEntry, ...] = ()  # ok / rolled_back / failed / interrupted rows
    resumed_by: int = 0  # the resume that settles this one: running, or done

    @property
    def id(self) -> int:
        return self.started.id

    @property
    def end(self) -> AuditEntry | None:
        return self.ends[-1] if self.ends else None

    @property
    def open(self) -> bool:
        """No end row yet, or between a version rollout's steps: running, or its process died and
        no start has closed it."""
        return (self.end is None or self.between_steps) and not self.resumed_by

    @property
    def between_steps(self) -> bool:
        """A version rollout's first step ended `ok`, and no retire step runs or ended done:
        both versions serve (its process moves on to the retire step, or died before it)."""
        end = self.end
        return self.plan.retire is not None and end is not None and end.result == Result.OK.value \
            and not self.resumed_by

    @property
    def step_done(self) -> bool:
        """This rollout ran to its end (`ok`), whatever was written after."""
        return any(e.result == Result.OK.value for e in self.ends)

    @property
    def left_changed(self) -> list[str]:
        end = self.end
        if end is None:
            return []
        if end.result == Result.INTERRUPTED.value:
            return self.touched
        return [name for name in facts(end.message).get(LEFT, "").split(", ") if name]

    @property
    def unresolved(self) -> bool:
        """Ended by a crash or an error that left servers changed, and neither restored nor resumed."""
        end = self.end
        if end is None or self.resumed_by:
            return False
        return end.result == Result.INTERRUPTED.value or bool(self.left_changed)

    @property
    def touched(self) -> list[str]:
        """The servers a `changing` row names, in the order they were touched."""
        names = [row.server for row in self.steps if facts(row.message).get(OUTCOME) == CHANGING]
        return list(dict.fromkeys(names))

    def outcome(self, server: str) -> str:
        """The server's latest step: changing (cut short in it), changed, failed, restored, ...;
        "not reached" without a step."""
        latest = [facts(r.message).get(OUTCOME, "") for r in self.steps if r.server == server]
        return latest[-1] if latest else "not reached"

    def where(self) -> str:
        """What changed where, one line: "a changed (wave 1); b cut short while being changed
        (wave 2); c not reached"."""
        parts = []
        for server in self.plan.servers:
            state = self.outcome(server.name)
            shown = "cut short while being changed" if state == CHANGING else state
            wave = f" (wave {server.wave})" if state != "not reached" else ""
            parts.append(f"{server.name} {shown}{wave}")
        return "; ".join(parts)

    @property
    def what(self) -> str:
        return f"fleet {self.plan.change} of {self.plan.model!r} on fleet {self.plan.fleet!r}"

    @property
    def restore_command(self) -> str:
        return f"geadmin fleet restore {self.id}"

    def reason(self) -> str:
        """One line for a verdict and `geadmin fleet status`."""
        cut = self.end is None or self.end.result == Result.INTERRUPTED.value or self.between_steps
        when = f"(rollout #{self.id}, started {self.started.at:%Y-%m-%d %H:%M:%S} UTC by {self.started.who})"
        retire = self.plan.retire
        if retire is not None and self.step_done:
            how = "was cut short" if cut else "stopped"
            why = "" if cut or self.end is None else f" ({self.end.headline})"
            servers = names(self.left_changed or self.touched)
            return (f"an unfinished version rollout of {self.plan.model!r} on fleet {self.plan.fleet!r} "
                    f"{when} {how} between its two steps: {retire.both} on {servers}, and nothing retires "
                    f"{retire.old_text}{why}: `geadmin fleet resume {self.id}` retires {retire.old_text}, "
                    f"`{self.restore_command}` puts back the config before it")
        how = "was cut short" if cut else "failed and left servers changed"
        return f"an interrupted {self.what} {when} {how}: {self.where()}"

    def touches(self, url: str | None = None, repository: Path | None = None) -> bool:
        if url is None and repository is None:
            return True
        urls = {s.url.rstrip("/") for s in self.plan.servers}
        repos = {s.repository for s in self.plan.servers if s.repository}
        wanted = str(Path(repository).expanduser().resolve()) if repository is not None else None
        return (url is not None and url.rstrip("/") in urls) or (wanted is not None and wanted in repos)


def journals(*, home: Path | None = None, fleet: str | None = None, limit: int = SCAN_LIMIT) -> list[Journal]:
    """The rollouts the audit log holds (of `fleet`, when given), newest first. Rows that are no
    journal (a `fleet ...` started row without a readable plan) are skipped."""
    starts = [row for row in audit.query(result=Result.STARTED, limit=limit, home=home)
              if row.action.startswith(PREFIX)]
    found: list[Journal] = []
    later: dict[tuple[str, str], list[AuditEntry]] = {}  # (model, action) -> its rows, oldest first
    for row in starts:
        plan = _plan_of(row)
        if plan is None or (fleet is not None and plan.fleet != fleet):
            continue
        key = (row.model, row.action)
        if key not in later:  # one query per model and change, however many rollouts
            later[key] = list(reversed(audit.query(model=row.model, action=row.action, home=home)))
        found.append(_read(row, plan, later[key]))
    resumes: dict[int, Journal] = {}
    for journal in found:  # newest first: the newest resume (or retire step) of each
        settles = journal.plan.resume_of or journal.plan.follows
        if settles:
            resumes.setdefault(settles, journal)

    def settled_by(journal: Journal) -> int:
        """The resume (or a version rollout's retire step) that settles `journal`: running, or
        ended done (itself or through its own resume); 0 when none does (a resume cut short,
        stopped or put back leaves the servers it never reached changed by `journal`: still
        unresolved)."""
        resume = resumes.get(journal.id)
        if resume is None or resume.id <= journal.id:  # a corrupt plan naming itself or a later one
            return 0
        if resume.end is None or resume.end.result == Result.OK.value or settled_by(resume):
            return resume.id
        return 0

    return [Journal(j.started, j.plan, j.steps, j.ends, settled_by(j)) for j in found]


def read(journal_id: int, *, home: Path | None = None) -> Journal:
    """RolloutJournalError when no rollout has that number."""
    for journal in journals(home=home, limit=10_000):
        if journal.id == journal_id:
            return journal
    raise RolloutJournalError(f"no fleet rollout #{journal_id} in the audit log: `geadmin fleet status` "
                              f"lists the "
                      "interrupted ones with their number")


def unresolved(*, home: Path | None = None, fleet: str | None = None, url: str | None = None,
               repository: Path | None = None) -> list[Journal]:
    """Unresolved rollouts (of `fleet`; that touched `url` or `repository`, when given), newest
    first. Never raises: an unreadable audit log lists nothing."""
    try:
        return [j for j in journals(home=home, fleet=fleet) if j.unresolved and j.touches(url, repository)]
    except GeAdminError:
        return []


def unresolved_over(fleet: str, urls: Sequence[str], *, home: Path | None = None) -> list[Journal]:
    """Unresolved rollouts of `fleet` by its name, or by any other name (an ad-hoc `--source`, an
    overlapping [[fleet]]) that touched one of its servers' `urls`: a server changed and left so
    is the fleet's concern whatever the rollout was called. Newest first; never raises."""
    try:
        return [j for j in journals(home=home) if j.unresolved
                and (j.plan.fleet == fleet or any(j.touches(url) for url in urls))]
    except GeAdminError:
        return []


def open_journals(*, home: Path | None = None) -> list[Journal]:
    return [j for j in journals(home=home) if j.open]


def _plan_of(row: AuditEntry) -> RolloutPlan | None:
    text = facts(row.message).get(PLAN)
    if not text:
        return None
    try:
        return RolloutPlan.from_json(text)
    except RolloutJournalError:
        return None


def _read(started: AuditEntry, plan: RolloutPlan, rows_of_action: list[AuditEntry]) -> Journal:
    mine = str(started.id)
    rows = [r for r in rows_of_action if r.id > started.id and facts(r.message).get(JOURNAL) == mine]
    steps = tuple(r for r in rows if r.result == Result.STEP.value)
    ends = tuple(r for r in rows if r.result not in (Result.STEP.value, Result.STARTED.value))
    return Journal(started, plan, steps, ends)


def names(servers: Sequence[str]) -> str:
    return ", ".join(servers) or "none"
