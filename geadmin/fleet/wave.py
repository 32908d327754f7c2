"""A rollout's waves applied: each server changed in turn, journaled before and after, recorded
in its own workspace, with the operator's controls checked before each.

`geadmin.fleet.rollout` runs the waves in order and judges each one (the health gate,
geadmin.fleet.gate, then the put back when it fails); here each server of a wave gets the
change: Triton's repository API for a load, unload or reload (geadmin.ops.models.actions), the
config editor's safe apply for an apply (geadmin.ops.models.apply).

Servers that read one repository (a shared volume) get the file written once, in the first
wave, and are reloaded wave by wave; servers with their own repository get their file
written in their wave. A resume writes only over the config before the rollout or its new one
(an edit since is refused, never overwritten). A `step` row is journaled before and after each
server (geadmin.fleet.journal); each changed server whose own workspace is known
(`Member.home`) gets its change and an apply's revisions there too (geadmin.fleet.server_audit).

Before each server: a pause longer than GEADMIN_ROLLOUT_PAUSE_MAX_S, an abort, or the starter
losing the right (`Control.revoked`) stops the wave, and the rollout puts back what changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import settings, test_hooks
from geadmin.access.guard import Authorization
from geadmin.audit import Result
from geadmin.diagnose.rollout_plan import RolloutPlan
from geadmin.diagnose.rollouts import CHANGED, CHANGING, FAILED
from geadmin.domain import format_duration
from geadmin.errors import GeAdminError, RepositoryError
from geadmin.fleet import journal, restore
from geadmin.fleet.members import Member
from geadmin.fleet.server_audit import Config, ServerAudit
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import AUDIT_RESULTS, ApplyOutcome
from geadmin.triton.client import TritonClient


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


class WaveChanger:
    """Changes one rollout's servers, a wave at a time, and keeps what it did: each server's row,
    the servers touched (journaled `changing`, in order), those whose apply was refused (nothing
    written) and whether a step raised. Its plan is the recorder's (with the state before, once read)."""

    def __init__(self, members: list[Member], clients: dict[str, TritonClient], auth: Authorization | None,
                 recorder: journal.Recorder, say: Callable[[str], None], control: Control, timeout_s: float,
                 validate: bool, smoke: bool) -> None:
        self.clients, self.auth, self.recorder, self.say = clients, auth, recorder, say
        self.home = recorder.home
        self.control, self.timeout_s, self.validate, self.smoke = control, timeout_s, validate, smoke
        self.rows: dict[str, Row] = {m.name: Row(m.name, 0, "not reached") for m in members}
        self.touched: list[str] = []  # journaled `changing`, in order
        self.written: set[str] = set()  # repositories this rollout wrote
        self.errored = False  # a step raised (not a rejected config, not a gate)
        self.refused: set[str] = set()  # servers whose apply was refused: apply_config wrote nothing
        self.diff = ""  # an apply's, once journaled
        self.on_server: ServerAudit | None = None  # each changed server's own workspace, once journaled
        self.done: dict[str, tuple[Result, str, list[Config]]] = {}  # server -> its own audit row

    @property
    def plan(self) -> RolloutPlan:
        return self.recorder.plan

    def change(self, number: int, wave: list[Member]) -> str:
        """Each server of wave `number` changed in turn: "" when every one was, else why it stopped."""
        change, model = self.plan.change, self.plan.model
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
            self.say(f"wave {number}: {change} {model} on {member.name}")
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

    def _record_on_server(self, member: Member, problem: str) -> str:
        """The change in the server's own workspace (geadmin.fleet.server_audit): "" or why not."""
        refused = Result.REFUSED if member.name in self.refused else Result.FAILED
        result, message, configs = self.done.pop(member.name, (refused if problem else Result.OK,
                                                               problem or "done", []))
        if self.on_server is None:
            return ""
        return self.on_server.record(member.name, member.url, member.home, self.plan.change, result, message,
                                     diff=self.diff, configs=configs)

    def _change_one(self, member: Member) -> str:
        client = self.clients[member.name]
        try:
            if self.plan.change == "apply":
                return self._apply_one(member, client)
            result = run_action(client, ModelAction(self.plan.change), [self.plan.model], auth=self.auth,
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
        plan = self.plan
        previous = plan.previous_of(repository)
        expected = previous.sha256 if previous is not None else None
        if plan.resume_of:  # the file is the previous one, or the new one the first run wrote
            expected, edited = restore.changed_since(plan, Path(repository), previous)
            if edited:
                self.refused.add(member.name)  # nothing written
                raise RepositoryError(f"{edited}: not overwritten by the resume — restore the rollout, "
                                      "or look at the file and roll out again")
        try:
            applied = apply_config(client, Path(repository), plan.model, plan.new_config.encode(),
                                   expected_sha256=expected, auth=self.auth, home=self.home,
                                   smoke=self.smoke, validate=self.validate,
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
        problem, loaded = restore.reload_if_loaded(client, self.plan.model, self.auth, self.timeout_s)
        said = f"the new config is on disk in {repository} ({why})"
        configs = self.on_server.applied(repository, wrote=True) if self.on_server else []
        # not loaded there: only written, nothing that serves changed (as a written apply's row says)
        result = Result.FAILED if problem else Result.OK if loaded else Result.WRITTEN
        done = problem or ("reloaded" if loaded else "not loaded there: not reloaded")
        self.done[member.name] = (result, f"{said}; {done}", configs)
        return problem
