"""Change a model on every server of a fleet, a wave at a time, and stop at the first wave
that fails its health gate, putting back every server already changed.

    load | unload | reload MODEL      Triton's repository API, per server (geadmin.ops.models.actions)
    apply MODEL FILE                  the config editor's safe apply (geadmin.ops.models.apply): validated,
                                      written atomically, reloaded, rolled back on its own failure

Servers that read one repository (a shared volume) get the file written once, in the first
wave, and are reloaded wave by wave; servers with their own repository get their file
written in their wave. After each wave, the gate: the model READY on every server of the wave,
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
only geadmin's: a Streamlit rerun, a bug, Ctrl-C — puts back the servers touched so far and
ends the journal `failed` before it propagates; a SIGKILL leaves the journal open, and the next
start reports it (geadmin.ops.models.reconcile). A new rollout of a fleet with an unresolved one is
refused until it is restored or resumed; a resume writes only over the config before the
rollout or its new one (an edit since is refused, never overwritten). A pause longer than
GEADMIN_ROLLOUT_PAUSE_MAX_S, or the starter losing the right (`Control.revoked`), stops the
rollout and puts back what changed. Its fault points: docs/development.md, "Test hooks".
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geadmin import settings, test_hooks
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Result
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollouts import CHANGED, CHANGING, FAILED, NOT_RESTORED, RESTORED
from geadmin.domain import format_duration
from geadmin.errors import (
    ConfigError,
    GeAdminError,
    InvalidArgumentError,
    RepositoryError,
    RolloutBusyError,
    RolloutRefusedError,
)
from geadmin.fleet import journal
from geadmin.fleet.gate import Gate, GateSettings
from geadmin.fleet.index_once import IndexOnceClient
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.fleet.preview import waves as cut_waves
from geadmin.fleet.server_audit import Config, ServerAudit
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import AUDIT_RESULTS, ApplyOutcome
from geadmin.ops.models.reconcile import rollout_lock
from geadmin.repository import revisions
from geadmin.repository.validate import refuse_invalid
from geadmin.triton.client import TritonClient


class Change(str, enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"
    APPLY = "apply"


@dataclass
class Control:
    """Set from another thread (the Fleet page's buttons): checked between two servers."""

    paused: threading.Event = field(default_factory=threading.Event)
    aborted: threading.Event = field(default_factory=threading.Event)
    max_pause_s: float | None = None  # None: GEADMIN_ROLLOUT_PAUSE_MAX_S, read when the rollout starts
    # "" while whoever started it may still make the change, else why not (removed or demoted
    # since: geadmin.access.users.still_allowed); asked before each server, like `aborted`
    revoked: Callable[[], str] = lambda: ""

    def wait_while_paused(self) -> str:
        """"" once resumed (or aborted); why not, once paused longer than `max_pause_s`."""
        since = time.monotonic()
        while self.paused.is_set() and not self.aborted.is_set():
            if self.max_pause_s is not None and time.monotonic() - since >= self.max_pause_s:
                return (f"paused for longer than {format_duration(self.max_pause_s)} "
                        f"({settings.ROLLOUT_PAUSE_MAX_S.env_name}): the pause expired")
            self.aborted.wait(0.2)
        return ""


@dataclass(frozen=True)
class Row:
    server: str
    wave: int  # 1-based; 0: never reached
    outcome: str  # changed, restored, not restored, failed, not reached
    message: str = ""


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


def rollout(members: Sequence[Member], change: Change, model: str, *, new_config: bytes | None = None,
            wave_size: int = 1, gate: GateSettings | None = None, auth: Authorization | None = None,
            fleet: str = "", home: Path | None = None, progress: Progress | None = None,
            control: Control | None = None, timeout_s: float = 60.0, validate: bool = True,
            resume_of: int = 0) -> RolloutResult:
    """See the module docstring. Refusals raise before anything changes: RolloutRefusedError
    (no servers), InvalidArgumentError (a wave size below 1), ConfigError (an apply without a
    repository for a server), RepositoryError
    (a repository without the model's config; ConfigLockedError: a rollout of the fleet runs in
    another process), RolloutBusyError (an unresolved rollout of the fleet), and for an apply
    the validator's ConfigInvalidError / ConfigParseError (`validate=False` skips it).
    `resume_of`: the number of an unresolved rollout this one resumes (its previous configs
    are kept as the ones to put back)."""
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
    with rollout_lock(name, home=home):
        resumed = None
        if resume_of:
            resumed = rollouts.read(resume_of, home=home)
            if not resumed.unresolved:
                raise RolloutBusyError(f"rollout #{resume_of} is not waiting to be resumed")
        else:
            journal.refuse_unresolved(name, home, [m.url for m in members])
        plan = journal.make_plan(members, change.value, model, new_config, wave_size, name, who=actor.name,
                                 home=home, resume=resumed)
        job = _Rollout(list(members), plan, gate or GateSettings(), auth, journal.Recorder(plan, actor, home),
                       progress or (lambda _: None), control, timeout_s, validate)
        return job.run()


class _Rollout:
    def __init__(self, members: list[Member], plan: rollouts.RolloutPlan, gate: GateSettings,
                 auth: Authorization | None, recorder: journal.Recorder, say: Progress, control: Control,
                 timeout_s: float, validate: bool) -> None:
        self.members, self.plan, self.change, self.model = members, plan, Change(plan.change), plan.model
        self.gate_settings, self.auth, self.recorder, self.say = gate, auth, recorder, say
        self.home = recorder.home
        self.control, self.timeout_s, self.validate = control, timeout_s, validate
        # Each server's index read once per change (geadmin.fleet.index_once): the gate's read
        # before, the apply's and the action's questions answered from it, one read after.
        self.clients: dict[str, TritonClient] = {
            m.name: IndexOnceClient(m.url, admin_key=m.spec.admin_key, timeout_s=timeout_s,
                                    load_timeout_s=timeout_s, tls_ca=_ca(m)) for m in members}
        self.rows: dict[str, Row] = {m.name: Row(m.name, 0, "not reached") for m in members}
        self.touched: list[str] = []  # journaled `changing`, in order
        self.written: set[str] = set()  # repositories this rollout wrote
        self.errored = False  # a step raised (not a rejected config, not a gate)
        self.refused: set[str] = set()  # servers whose apply was refused: apply_config wrote nothing
        self.gate: Gate | None = None
        self.by_name = {m.name: m for m in members}
        self.diff = ""
        self.on_server: ServerAudit | None = None  # each changed server's own workspace, once journaled
        self.done: dict[str, tuple[Result, str, list[Config]]] = {}  # server -> its own audit row

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
            self.diff = self._diff()
            journal_id = self.recorder.start(self.diff)
            self.on_server = ServerAudit(self.plan, self.recorder.actor, self.home, journal_id)
            self.say(f"journaled as rollout #{journal_id}")
            test_hooks.fault_point("rollout.started")
            for number, wave in enumerate(waves, start=1):
                reason = self._wave(number, wave) or self._gate(gate, number, wave)
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

    def _wave(self, number: int, wave: list[Member]) -> str:
        for member in wave:
            expired = self.control.wait_while_paused()
            if expired:
                self.say(expired)
                return expired
            if self.control.aborted.is_set():
                return "aborted by the operator"
            revoked = self.control.revoked()
            if revoked:
                self.say(f"stopping: {revoked}")
                return f"stopped: {revoked}"
            self.say(f"wave {number}: {self.change.value} {self.model} on {member.name}")
            self.recorder.step(member.name, number, CHANGING)
            self.touched.append(member.name)
            test_hooks.fault_point(f"rollout.changing.{len(self.touched)}")
            problem = self._change_one(member)
            message = "; ".join(filter(None, (problem, self._record_on_server(member, problem))))
            self.rows[member.name] = Row(member.name, number, FAILED if problem else CHANGED, message)
            self.recorder.step(member.name, number, FAILED if problem else CHANGED, message)
            test_hooks.fault_point(f"rollout.changed.{len(self.touched)}")
            if problem:
                return f"{member.name}: {problem}"
        return ""

    def _gate(self, gate: Gate, number: int, wave: list[Member]) -> str:
        self.say(f"wave {number}: health gate on {', '.join(m.name for m in wave)}")
        for member in wave:
            problem = gate.check(member.name)
            if problem:
                self.rows[member.name] = Row(member.name, number, FAILED, problem)
                self.recorder.step(member.name, number, FAILED, f"health gate: {problem}")
                return f"{member.name}: {problem}"
        return ""

    def _record_on_server(self, member: Member, problem: str) -> str:
        """The change in the server's own workspace (geadmin.fleet.server_audit): "" or why not."""
        refused = Result.REFUSED if member.name in self.refused else Result.FAILED
        result, message, configs = self.done.pop(member.name, (refused if problem else Result.OK,
                                                               problem or "done", []))
        if self.on_server is None:
            return ""
        return self.on_server.record(member.name, member.url, member.home, self.change.value, result, message,
                                     diff=self.diff, configs=configs)

    def _change_one(self, member: Member) -> str:
        client = self.clients[member.name]
        try:
            if self.change is Change.APPLY:
                return self._apply_one(member, client)
            result = run_action(client, ModelAction(self.change.value), [self.model], auth=self.auth,
                                settle_timeout_s=self.timeout_s)[0]
            self.done[member.name] = (Result.OK if result.ok else Result.FAILED, result.message, [])
            return "" if result.ok else result.message.splitlines()[0]
        except Exception as exc:  # any error stops the rollout and puts back (a failure)
            self.errored = True
            text = str(exc).splitlines()[0] if str(exc) else ""
            return text if isinstance(exc, GeAdminError) else f"{type(exc).__name__}: {text}"

    def _apply_one(self, member: Member, client: TritonClient) -> str:
        repository = str(journal.real(member.repository))
        if repository in self.written:  # a shared repository already written: reload only
            return self._reloaded(member, repository, client, "written once for the servers that read it")
        self.written.add(repository)
        previous = self.plan.previous_of(repository)
        expected = previous.sha256 if previous is not None else None
        if self.plan.resume_of:  # the file is the previous one, or the new one the first run wrote
            expected, edited = journal.changed_since(self.plan, Path(repository), previous)
            if edited:
                self.refused.add(member.name)  # nothing written
                raise RepositoryError(f"{edited}: not overwritten by the resume — restore the rollout, "
                                      "or look at the file and roll out again")
        try:
            applied = apply_config(client, Path(repository), self.model, self.plan.new_config.encode(),
                                   expected_sha256=expected, auth=self.auth, home=self.home,
                                   smoke=self.gate_settings.requests > 0, validate=self.validate,
                                   note=f"fleet apply on {member.name} (rollout #{self.recorder.id})")
        except GeAdminError:
            self.refused.add(member.name)  # a refusal comes before apply_config writes anything
            raise
        if applied.outcome is ApplyOutcome.UNCHANGED:  # written by the rollout this one resumes: load it
            return self._reloaded(member, repository, client, "written by the rollout this one resumes")
        configs = self.on_server.applied(repository, wrote=applied.ok) if self.on_server else []
        self.done[member.name] = (AUDIT_RESULTS[applied.outcome], applied.message, configs)
        return "" if applied.ok else applied.message.splitlines()[0]

    def _reloaded(self, member: Member, repository: str, client: TritonClient, why: str) -> str:
        """The new config already on disk in `repository`: reloaded where loaded."""
        problem = journal.reload_if_loaded(client, self.model, self.auth, self.timeout_s)
        said = f"the new config is on disk in {repository} ({why})"
        configs = self.on_server.applied(repository, wrote=True) if self.on_server else []
        self.done[member.name] = (Result.FAILED if problem else Result.OK,
                                  f"{said}; {problem or 'reloaded where loaded'}", configs)
        return problem

    def _restore(self) -> list[str]:
        """Every touched server put back; the names of those that could not be."""
        touched = [name for name in self.touched if name not in self.refused]
        lost = {n: self.gate.lost(n) for n in touched} \
            if self.gate is not None and self.change is Change.UNLOAD else {}
        problems = journal.put_back(self.plan, touched, self.clients, auth=self.auth, home=self.home,
                                    timeout_s=self.timeout_s, lost=lost,
                                    note=f"fleet rollout #{self.recorder.id} stopped: put back")
        for name in reversed(touched):
            row, problem = self.rows[name], problems.get(name, "")
            note = f"{row.message}; " if row.message else ""
            member = self.by_name[name]
            unrecorded = self.on_server.put_back(name, member.url, member.home, problem,
                                                 f"fleet rollout #{self.recorder.id} stopped: put back") \
                if self.on_server is not None else ""
            self.rows[name] = Row(name, row.wave, NOT_RESTORED if problem else RESTORED,
                                  note + (problem or "put back")
                                  + (f"; {unrecorded}" if unrecorded and unrecorded not in note else ""))
            with contextlib.suppress(GeAdminError):  # the end row says it too
                self.recorder.step(name, row.wave, NOT_RESTORED if problem else RESTORED, problem)
        return [name for name in touched if problems.get(name)]

    def _stop(self, number: int, waves: int, reason: str) -> RolloutResult:
        self.say(f"wave {number} failed: {reason}; putting back {len(self.touched)} server(s)")
        left = self._restore()
        word = "FAILED" if self.errored else "STOPPED"
        headline = f"ROLLOUT {word} at wave {number} of {waves}: {reason}; {self._restored_text(left)}"
        result = Result.FAILED if self.errored or left else Result.ROLLED_BACK
        return self._end(result, headline, waves, left)

    def _crashed(self, exc: BaseException, waves: int) -> None:
        """Cut short in this process by an exception: put back, end the journal `failed`."""
        with contextlib.suppress(Exception):
            self.say(f"cut short by {type(exc).__name__}: putting back {len(self.touched)} server(s)")
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
        changed = [name for name in self.touched if name not in self.refused]
        return f"{len(changed)} changed server(s) put back" if changed else "nothing had changed"

    def _end(self, result: Result, headline: str, waves: int, left: Sequence[str] = ()) -> RolloutResult:
        rows = "\n".join(f"  {r.server}: wave {r.wave or '-'}, {r.outcome}"
                         + (f": {r.message}" if r.message else "") for r in self.rows.values())
        entry = self.recorder.end(result, f"{headline}\n{rows}", left)
        return RolloutResult(self.change, self.model, result is Result.OK, headline,
                             tuple(self.rows.values()), waves, entry.id, self.recorder.id)


def _ca(member: Member) -> str | None:
    """The CA a member reached over grpcs:// was proven with (geadmin.fleet.membership), pinned."""
    return str(member.tls_ca) if member.tls_ca is not None else None

