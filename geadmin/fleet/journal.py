"""A rollout's journal, written as it goes: the plan before the first server is touched, then a
row per step, the end row last.

The rows and what they mean: `geadmin.diagnose.rollouts`. Here: the plan, made before the
first server is touched (for an apply, each repository's config is kept as a revision first,
so putting it back is byte-identical; for a version rollout's first step, also pinned to the
versions that served, when the file would serve the new one: geadmin.fleet.pinning), with each
server's state of the model before the change once the gate has read it; and the `Recorder`
that writes the started, step and end rows.
What an unresolved rollout means for its fleet: `geadmin.fleet.unresolved`; the way back from
one: `geadmin.fleet.restore`; the way forward: `geadmin.fleet.resume`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from geadmin import audit
from geadmin.audit import Actor, AuditEntry, Result
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RetireStep, RolloutPlan
from geadmin.diagnose.rollouts import JOURNAL, LEFT, OUTCOME, PLAN, WAVE, Journal
from geadmin.fleet.members import Member
from geadmin.fleet.pinning import pinned_config
from geadmin.repository import revisions, store


def real(path: Path | None) -> Path:
    assert path is not None
    return Path(path).expanduser().resolve()


def make_plan(members: Sequence[Member], change: str, model: str, new_config: bytes | None, wave_size: int,
              fleet: str, *, who: str, home: Path | None, resume: Journal | None = None,
              retire: RetireStep | None = None, follows: int = 0) -> RolloutPlan:
    """The plan; for an apply, each repository's config kept as a revision (that of the
    rollout `resume` resumes, when given). `retire`: a version rollout's step after this one
    (a resume keeps the resumed one's); `follows`: the first step a retire step follows. Raises
    before anything changes: RepositoryError when a repository lacks the model's config or
    cannot be read."""
    # a resumed rollout keeps the state before the first one: what a put back returns to
    was_ready = {s.name: s.ready for s in resume.plan.servers} if resume is not None else {}
    servers = tuple(PlannedServer(m.name, m.url, i // wave_size + 1,
                                  str(real(m.repository)) if change == "apply" else "", was_ready.get(m.name))
                    for i, m in enumerate(members))
    waves = (len(members) + wave_size - 1) // wave_size
    previous: list[Previous] = []
    if change == "apply":
        for repository in dict.fromkeys(s.repository for s in servers):
            kept = resume.plan.previous_of(repository) if resume is not None else None
            if kept is None:
                current = store.read_config(Path(repository), model)  # RepositoryError: missing, unreadable
                revision = revisions.record_revision(Path(repository), model, current.data, who=who,
                                                     note="before a fleet apply", home=home)
                kept = Previous(repository, revision.sha256, revision.number)
                if retire is not None:
                    kept = _pinned(kept, current.data, model, retire, who, home)
            previous.append(kept)
    data = new_config or b""
    return RolloutPlan(fleet, change, model, servers, waves, wave_size, tuple(previous),
                       data.decode("utf-8", errors="replace"), revisions.sha256_of(data) if data else "",
                       resume.id if resume is not None else 0,
                       resume.plan.retire if resume is not None else retire, follows)


def _pinned(kept: Previous, data: bytes, model: str, retire: RetireStep, who: str,
            home: Path | None) -> Previous:
    """`kept` with the config a version rollout's way back writes, when it is not `data` itself
    (geadmin.fleet.pinning), kept as a revision too."""
    text = pinned_config(data.decode("utf-8", errors="replace"), Path(kept.repository) / model, retire)
    if text is None:
        return kept
    pins = ", ".join(f"v{v}" for v in retire.old)
    revision = revisions.record_revision(
        Path(kept.repository), model, text.encode(), who=who, home=home,
        note=f"before a fleet version rollout, pinned to {pins} ({model}/{retire.version}/ is present)")
    return replace(kept, pinned=retire.old, pinned_sha256=revision.sha256, pinned_revision=revision.number)


class Recorder:
    """Writes one rollout's journal rows. Every write raises when the row cannot be kept
    (WorkspaceDatabaseError): a rollout never touches a server it has not journaled."""

    def __init__(self, plan: RolloutPlan, actor: Actor, home: Path | None) -> None:
        self.plan, self.actor, self.home = plan, actor, home
        self.id = 0
        self.ended = False

    def start(self, diff: str = "") -> int:
        plan = self.plan
        resumed = f", resuming rollout #{plan.resume_of}" if plan.resume_of else ""
        if plan.retire is not None:
            resumed += f", step 1 of 2 of a version rollout (then: retire {plan.retire.old_text})"
        elif plan.follows:
            resumed += f", step 2 of 2 of version rollout #{plan.follows}"
        headline = (f"{plan.action} of {plan.model!r} on {len(plan.servers)} server(s) in {plan.waves} "
                    f"wave(s){resumed}: started")
        where = [f"  {s.name}: wave {s.wave}, {s.url}" + (f", {s.repository}" if s.repository else "")
                 for s in plan.servers]
        lines = [headline, *where, f"{PLAN}: {plan.to_json()}"]
        entry = audit.record(plan.action, plan.model, Result.STARTED, actor=self.actor, server=plan.fleet,
                             message="\n".join(lines), diff=diff, home=self.home)
        self.id = entry.id
        return entry.id

    def step(self, server: str, wave: int, outcome: str, message: str = "") -> None:
        headline = f"wave {wave or '-'}: {server} {outcome}" + (f": {message}" if message else "")
        lines = [headline.splitlines()[0], f"{JOURNAL}: {self.id}", f"{OUTCOME}: {outcome}",
                 f"{WAVE}: {wave}"]
        audit.record(self.plan.action, self.plan.model, Result.STEP, actor=self.actor, server=server,
                     message="\n".join(lines), home=self.home)

    def end(self, result: Result, text: str, left: Sequence[str] = ()) -> AuditEntry:
        lines = [text, f"{JOURNAL}: {self.id}", f"{LEFT}: {', '.join(left)}"]
        entry = audit.record(self.plan.action, self.plan.model, result, actor=self.actor,
                             server=self.plan.fleet, message="\n".join(lines), home=self.home)
        self.ended = True
        return entry


def with_readiness(plan: RolloutPlan, ready_before: Mapping[str, set[str]]) -> RolloutPlan:
    """`plan` with each server's state of the model before the change (the gate's read), where
    the plan does not hold one yet (a resumed rollout's come from the one it resumes)."""
    return replace(plan, servers=tuple(
        replace(s, ready=plan.model in ready_before[s.name]) if s.ready is None and s.name in ready_before
        else s for s in plan.servers))
