"""Change a model on every server of a fleet, a wave at a time, and stop at the first wave
that fails its health gate, putting back every server already changed.

    load | unload | reload MODEL      Triton's repository API, per server (geadmin.ops.models.actions)
    apply MODEL FILE                  the config editor's safe apply (geadmin.ops.models.apply): validated,
                                      written atomically, reloaded, rolled back on its own failure

Each wave's servers are changed in turn (geadmin.fleet.wave: an apply's file written once per
repository, the operator's pause, abort and revoked right checked before each server). After
each wave, the gate (geadmin.fleet.gate): the model READY on every server of the wave,
`gate.requests` smoke requests answered, and their slowest not worse than the same requests
before the rollout by more than `gate.latency_margin` (+ `gate.latency_slack_ms`). An unload's
gate: the model gone, and no other model lost READY with it (an ensemble that ran it).

On a failed gate: every changed server is put back (the previous file restored byte-identical
and reloaded; a load unloaded; an unload loaded), and the reason is the first line of the
result. The audit end row says `rolled_back`; a server step that raised (a config that
vanished, a bug) ends it `failed`, everything put back all the same.

Journaled (geadmin.fleet.journal, the rows in geadmin.diagnose.rollouts): the fleet's rollout
lock is taken, the plan written as a `started` row before the first server is touched (for an
apply each repository's config kept as a revision first), a `step` row before and after each
server, the end row last; each changed server whose own workspace is known (`Member.home`) gets
its change and an apply's revisions there too (geadmin.fleet.server_audit). ANY exception — not
only geadmin's: a Streamlit rerun, a bug, Ctrl-C — puts back the servers touched so far
(geadmin.fleet.restore) and ends the journal `failed` before it propagates; a SIGKILL leaves
the journal open, and the next start reports it (geadmin.ops.models.rollout_recovery). A new
rollout of a fleet with an unresolved one is refused until it is restored or resumed
(geadmin.fleet.unresolved); a resume writes only over the config before the rollout or its
new one (an edit since is refused, never overwritten). A pause longer than
GEADMIN_ROLLOUT_PAUSE_MAX_S, or the starter losing the right (`Control.revoked`), stops the
rollout and puts back what changed. Its fault points: docs/development.md, "Test hooks".
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin import settings, test_hooks
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Result
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollout_plan import RetireStep, RolloutPlan
from geadmin.diagnose.rollouts import FAILED, NOT_RESTORED, RESTORED
from geadmin.errors import (
    ConfigError,
    GeAdminError,
    InvalidArgumentError,
    RolloutBusyError,
    RolloutRefusedError,
)
from geadmin.fleet import journal, restore, unresolved
from geadmin.fleet.gate import Gate, GateSettings
from geadmin.fleet.index_once import IndexOnceClient
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.fleet.preview import waves as cut_waves
from geadmin.fleet.server_audit import ServerAudit
from geadmin.fleet.wave import Control, Row, WaveChanger
from geadmin.ops.models.rollout_recovery import rollout_lock
from geadmin.repository import revisions
from geadmin.repository.validate import refuse_invalid
from geadmin.triton.client import TritonClient


class Change(str, enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"
    APPLY = "apply"


@dataclass(frozen=True)
class RolloutResult:
    change: Change
    model: str
    ok: bool
    headline: str  # the reason first when it stopped
    rows: tuple[Row, ...]
    waves: int
    audit_id: int | None = None  # the end row
    journal_id: int | None = None  # the started row: `geadmin fleet restore ID` names it

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change.value, "model": self.model, "ok": self.ok, "headline": self.headline,
                "waves": self.waves, "audit_id": self.audit_id, "journal_id": self.journal_id,
                "servers": [{"server": r.server, "wave": r.wave, "outcome": r.outcome, "message": r.message}
                            for r in self.rows]}


Progress = Callable[[str], None]
_held = threading.local()  # the fleets whose rollout lock this thread holds: (fleet, workspace)


@contextlib.contextmanager
def fleet_lock(fleet: str, home: Path | None = None) -> Iterator[None]:
    """The fleet's rollout lock (geadmin.ops.models.rollout_recovery.rollout_lock), taken once per
    thread: a version rollout holds it across both its steps (so no start closes its first step
    as cut short while it moves on to the second), and each step's `rollout` runs inside it."""
    key = (fleet, str(home or settings.home()))
    held: set[tuple[str, str]] = getattr(_held, "fleets", set())
    _held.fleets = held
    if key in held:
        yield
        return
    with rollout_lock(fleet, home=home):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def rollout(members: Sequence[Member], change: Change, model: str, *, new_config: bytes | None = None,
            wave_size: int = 1, gate: GateSettings | None = None, auth: Authorization | None = None,
            fleet: str = "", home: Path | None = None, progress: Progress | None = None,
            control: Control | None = None, timeout_s: float = 60.0, validate: bool = True,
            resume_of: int = 0, retire: RetireStep | None = None, follows: int = 0) -> RolloutResult:
    """See the module docstring. Refusals raise before anything changes: RolloutRefusedError
    (no servers), InvalidArgumentError (a wave size below 1), ConfigError (an apply without a
    repository for a server), RepositoryError
    (a repository without the model's config; ConfigLockedError: a rollout of the fleet runs in
    another process), RolloutBusyError (an unresolved rollout of the fleet), and for an apply
    the validator's ConfigInvalidError / ConfigParseError (`validate=False` skips it).
    `resume_of`: the number of an unresolved rollout this one resumes (its previous configs
    are kept as the ones to put back). A version rollout (geadmin.fleet.versions): `retire`, its
    first step's next step; `follows`, the first step a retire step follows (between its steps,
    or left so: RolloutBusyError otherwise)."""
    actor = require(auth, GuardedAction(change.value))
    refuse_unproven(members, f"fleet {change.value} {model}")  # a discovered member nobody vouched for
    if not members:
        raise RolloutRefusedError("the fleet has no server to change")
    if wave_size < 1:
        raise InvalidArgumentError(f"--wave-size must be at least 1, got {wave_size}")
    if change is Change.APPLY:
        if new_config is None:
            raise InvalidArgumentError("an apply needs the new config's text")
        missing = [m.name for m in members if m.repository is None]
        if missing:
            raise ConfigError(f"no model repository known for {', '.join(missing)}: give --repository "
                              "(a volume every server reads) or repository = ... in each [[server]]")
        if validate:
            first = journal.real(members[0].repository)
            refuse_invalid(model, new_config.decode("utf-8", errors="replace"), first / model)
    name = fleet or "fleet"
    control = control or Control()
    if control.max_pause_s is None:
        control.max_pause_s = settings.ROLLOUT_PAUSE_MAX_S.get()
    with fleet_lock(name, home):
        resumed = None
        if resume_of:
            resumed = rollouts.read(resume_of, home=home)
            if not resumed.unresolved:
                raise RolloutBusyError(f"rollout #{resume_of} is not waiting to be resumed")
        else:
            if follows:
                prior = rollouts.read(follows, home=home)
                if prior.plan.retire is None or not prior.step_done or not (prior.open or prior.unresolved):
                    raise RolloutBusyError(f"rollout #{follows} has no retire step waiting")
            unresolved.refuse_unresolved(name, home, [m.url for m in members], besides=follows)
        plan = journal.make_plan(members, change.value, model, new_config, wave_size, name, who=actor.name,
                                 home=home, resume=resumed, retire=retire, follows=follows)
        job = _Rollout(list(members), plan, gate or GateSettings(), auth, journal.Recorder(plan, actor, home),
                       progress or (lambda _: None), control, timeout_s, validate)
        return job.run()


class _Rollout:
    def __init__(self, members: list[Member], plan: RolloutPlan, gate: GateSettings,
                 auth: Authorization | None, recorder: journal.Recorder, say: Progress, control: Control,
                 timeout_s: float, validate: bool) -> None:
        self.members, self.plan, self.change, self.model = members, plan, Change(plan.change), plan.model
        self.gate_settings, self.auth, self.recorder, self.say = gate, auth, recorder, say
        self.home = recorder.home
        self.timeout_s = timeout_s
        # Each server's index read once per change (geadmin.fleet.index_once): the gate's read
        # before, the apply's and the action's questions answered from it, one read after.
        self.clients: dict[str, TritonClient] = {
            m.name: IndexOnceClient(m.url, admin_key=m.spec.admin_key, timeout_s=timeout_s,
                                    load_timeout_s=timeout_s, tls_ca=_ca(m)) for m in members}
        # the servers changed in turn (geadmin.fleet.wave), and what it did to each
        self.changer = WaveChanger(members, self.clients, auth, recorder, say, control, timeout_s, validate,
                                   smoke=gate.requests > 0)
        self.gate: Gate | None = None
        self.by_name = {m.name: m for m in members}

    def run(self) -> RolloutResult:
        waves = cut_waves(self.members, self.plan.wave_size)  # as the Fleet page previewed them
        try:
            unload = self.change is Change.UNLOAD
            gate = self.gate = Gate(self.clients, self.model, unload, self.gate_settings, self.home)
            self.say(f"measuring {self.model} on {len(self.members)} server(s) before the change")
            gate.measure_before()
            # journaled with the plan: a put back (here, or `fleet restore` after a crash) returns
            # each server to it
            self.plan = self.recorder.plan = journal.with_readiness(self.plan, gate.ready_before)
            changer = self.changer
            changer.diff = self._diff()
            journal_id = self.recorder.start(changer.diff)
            changer.on_server = ServerAudit(self.plan, self.recorder.actor, self.home, journal_id)
            self.say(f"journaled as rollout #{journal_id}")
            test_hooks.fault_point("rollout.started")
            for number, wave in enumerate(waves, start=1):
                reason = changer.change(number, wave) or self._gate(gate, number, wave)
                if reason:
                    return self._stop(number, len(waves), reason)
            test_hooks.fault_point("rollout.ending")
            done = (f"{self.change.value} {self.model} on {len(self.members)} server(s) "
                    f"in {len(waves)} wave(s)")
            return self._end(Result.OK, f"ROLLOUT DONE: {done}, every gate passed", len(waves))
        except BaseException as exc:
            if self.recorder.id and not self.recorder.ended:
                self._crashed(exc, len(waves))
            raise
        finally:
            for client in self.clients.values():
                client.close()

    def _diff(self) -> str:
        if self.change is not Change.APPLY or not self.plan.previous:
            return ""
        first = self.plan.previous[0]
        before = revisions.read_revision(Path(first.repository), self.model, first.revision, home=self.home)
        return revisions.config_diff(before.data, self.plan.new_config.encode(), self.model)

    def _gate(self, gate: Gate, number: int, wave: list[Member]) -> str:
        self.say(f"wave {number}: health gate on {', '.join(m.name for m in wave)}")
        for member in wave:
            problem = gate.check(member.name)
            if problem:
                self.changer.rows[member.name] = Row(member.name, number, FAILED, problem)
                self.recorder.step(member.name, number, FAILED, f"health gate: {problem}")
                return f"{member.name}: {problem}"
        return ""

    def _restore(self) -> list[str]:
        """Every touched server put back; the names of those that could not be."""
        changer = self.changer
        touched = [name for name in changer.touched if name not in changer.refused]
        lost = {n: self.gate.lost(n) for n in touched} \
            if self.gate is not None and self.change is Change.UNLOAD else {}
        problems = restore.put_back(self.plan, touched, self.clients, auth=self.auth, home=self.home,
                                    timeout_s=self.timeout_s, lost=lost,
                                    note=f"fleet rollout #{self.recorder.id} stopped: put back")
        for name in reversed(touched):
            row, problem = changer.rows[name], problems.get(name, "")
            note = f"{row.message}; " if row.message else ""
            member = self.by_name[name]
            unrecorded = changer.on_server.put_back(name, member.url, member.home, problem,
                                                    f"fleet rollout #{self.recorder.id} stopped: put back") \
                if changer.on_server is not None else ""
            changer.rows[name] = Row(name, row.wave, NOT_RESTORED if problem else RESTORED,
                                     note + (problem or "put back")
                                     + (f"; {unrecorded}" if unrecorded and unrecorded not in note else ""))
            with contextlib.suppress(GeAdminError):  # the end row says it too
                self.recorder.step(name, row.wave, NOT_RESTORED if problem else RESTORED, problem)
        return [name for name in touched if problems.get(name)]

    def _stop(self, number: int, waves: int, reason: str) -> RolloutResult:
        self.say(f"wave {number} failed: {reason}; putting back {len(self.changer.touched)} server(s)")
        left = self._restore()
        word = "FAILED" if self.changer.errored else "STOPPED"
        headline = f"ROLLOUT {word} at wave {number} of {waves}: {reason}; {self._restored_text(left)}"
        result = Result.FAILED if self.changer.errored or left else Result.ROLLED_BACK
        return self._end(result, headline, waves, left)

    def _crashed(self, exc: BaseException, waves: int) -> None:
        """Cut short in this process by an exception: put back, end the journal `failed`."""
        with contextlib.suppress(Exception):
            self.say(f"cut short by {type(exc).__name__}: putting back {len(self.changer.touched)} server(s)")
        left = self._restore()
        text = str(exc).splitlines()[0] if str(exc) else ""
        headline = (f"ROLLOUT FAILED: cut short by {type(exc).__name__}{': ' + text if text else ''}; "
                    f"{self._restored_text(left)}")
        with contextlib.suppress(GeAdminError):  # else the next start finds it open and reports it
            self._end(Result.FAILED, headline, waves, left)

    def _restored_text(self, left: list[str]) -> str:
        if left:
            return f"NOT put back on {', '.join(left)}: see each server's row (`geadmin fleet restore " \
                   f"{self.recorder.id}` retries)"
        changed = [name for name in self.changer.touched if name not in self.changer.refused]
        return f"{len(changed)} changed server(s) put back" if changed else "nothing had changed"

    def _end(self, result: Result, headline: str, waves: int, left: Sequence[str] = ()) -> RolloutResult:
        rows = "\n".join(f"  {r.server}: wave {r.wave or '-'}, {r.outcome}"
                         + (f": {r.message}" if r.message else "") for r in self.changer.rows.values())
        entry = self.recorder.end(result, f"{headline}\n{rows}", left)
        return RolloutResult(self.change, self.model, result is Result.OK, headline,
                             tuple(self.changer.rows.values()), waves, entry.id, self.recorder.id)


def _ca(member: Member) -> str | None:
    """The CA a member reached over grpcs:// was proven with (geadmin.fleet.membership), pinned."""
    return str(member.tls_ca) if member.tls_ca is not None else None

