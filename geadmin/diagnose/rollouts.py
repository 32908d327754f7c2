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
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin import audit
from geadmin.audit import AuditEntry, Result, facts
from geadmin.errors import GeAdminError, RolloutJournalError

PREFIX = "fleet "  # the action of every journal row: "fleet " + the change
CHANGES = ("load", "unload", "reload", "apply")
# "key: value" lines after a row's headline
JOURNAL, PLAN, OUTCOME, WAVE, LEFT = "journal", "plan", "outcome", "wave", "left changed"
CHANGING, CHANGED, FAILED = "changing", "changed", "failed"
RESTORED, NOT_RESTORED = "restored", "not restored"
SCAN_LIMIT = 200  # started rows looked at, newest first


@dataclass(frozen=True)
class PlannedServer:
    name: str
    url: str
    wave: int
    repository: str = ""  # resolved; "" unless the change writes a config
    # The model READY there before the change: what putting it back returns to (None: not read,
    # a plan journaled before geadmin kept it)
    ready: bool | None = None


@dataclass(frozen=True)
class Previous:
    """The config a repository held before an apply: a kept revision (geadmin.repository.revisions)."""

    repository: str
    sha256: str
    revision: int


@dataclass(frozen=True)
class RolloutPlan:
    fleet: str
    change: str  # load, unload, reload, apply
    model: str
    servers: tuple[PlannedServer, ...]
    waves: int
    wave_size: int = 1
    previous: tuple[Previous, ...] = ()
    new_config: str = ""  # apply: the text applied
    new_sha256: str = ""
    resume_of: int = 0  # the journal this rollout resumes (0: none)

    @property
    def action(self) -> str:
        return PREFIX + self.change

    def previous_of(self, repository: str) -> Previous | None:
        return next((p for p in self.previous if p.repository == repository), None)

    def server(self, name: str) -> PlannedServer | None:
        return next((s for s in self.servers if s.name == name), None)

    def to_json(self) -> str:
        return json.dumps({
            "fleet": self.fleet, "change": self.change, "model": self.model, "waves": self.waves,
            "wave_size": self.wave_size, "new_sha256": self.new_sha256, "new_config": self.new_config,
            "resume_of": self.resume_of,
            "servers": [{"name": s.name, "url": s.url, "wave": s.wave, "repository": s.repository,
                         "ready": s.ready} for s in self.servers],
            "previous": [{"repository": p.repository, "sha256": p.sha256, "revision": p.revision}
                         for p in self.previous]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RolloutPlan:
        """RolloutJournalError when `text` is no plan (a row written by hand, or cut)."""
        try:
            raw: dict[str, Any] = json.loads(text)
            plan = cls(str(raw["fleet"]), str(raw["change"]), str(raw["model"]),
                       tuple(PlannedServer(str(s["name"]), str(s["url"]), int(s["wave"]),
                                           str(s["repository"]), _flag(s.get("ready")))
                             for s in raw["servers"]),
                       int(raw["waves"]), int(raw.get("wave_size", 1)),
                       tuple(Previous(str(p["repository"]), str(p["sha256"]), int(p["revision"]))
                             for p in raw.get("previous", [])),
                       str(raw.get("new_config", "")), str(raw.get("new_sha256", "")),
                       int(raw.get("resume_of", 0)))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise RolloutJournalError(f"the rollout plan in the audit log cannot be read: {exc}") from exc
        if plan.change not in CHANGES:
            raise RolloutJournalError(f"the rollout plan names an unknown change {plan.change!r}")
        return plan


def _flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"'ready' is {value!r}, not true, false or null")


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
        """No end row yet: running, or its process died and no start has closed it."""
        return self.end is None and not self.resumed_by

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
        how = "was cut short" if self.end is None or self.end.result == Result.INTERRUPTED.value else \
            "failed and left servers changed"
        return (f"an interrupted {self.what} (rollout #{self.id}, started "
                f"{self.started.at:%Y-%m-%d %H:%M:%S} UTC by {self.started.who}) {how}: {self.where()}")

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
    for journal in found:  # newest first: the newest resume of each
        if journal.plan.resume_of:
            resumes.setdefault(journal.plan.resume_of, journal)

    def settled_by(journal: Journal) -> int:
        """The resume that settles `journal`: running, or ended done (itself or through its own
        resume); 0 when none does (a resume cut short, stopped or put back leaves the servers
        it never reached changed by `journal`: still unresolved)."""
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
