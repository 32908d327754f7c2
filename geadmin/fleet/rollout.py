"""Change a model on every server of a fleet, a wave at a time, and stop at the first wave
that fails its health gate, putting back every server already changed.

    load | unload | reload MODEL      Triton's repository API, per server (geadmin.ops.actions)
    apply MODEL FILE                  the config editor's safe apply (geadmin.ops.apply): validated,
                                      written atomically, reloaded, rolled back on its own failure

Servers that read one repository (a shared volume) get the file written once, in the first
wave, and are reloaded wave by wave; servers with their own repository get their file
written in their wave. After each wave, the gate: the model READY on every server of the wave,
`gate.requests` smoke requests answered, and their slowest not worse than the same requests
before the rollout by more than `gate.latency_margin` (+ `gate.latency_slack_ms`). An unload's
gate: the model gone, and no other model lost READY with it (an ensemble that ran it).

On a failed gate: every changed server is put back (the previous file restored byte-identical
and reloaded; a load unloaded; an unload loaded), and the reason is the first line of the
result. The whole rollout is one audit entry with a row per server.
"""

from __future__ import annotations

import enum
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import Action as Guarded
from geadmin.audit import Result
from geadmin.errors import ConfigError, GeAdminError, TritonError
from geadmin.fleet.gate import Gate, GateSettings
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.ops.actions import Action, run_action
from geadmin.ops.apply import apply_config
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.repository.validate import refuse_invalid
from geadmin.triton.client import TritonClient


class Change(str, enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"
    APPLY = "apply"


UNDO = {Change.LOAD: Action.UNLOAD, Change.UNLOAD: Action.LOAD, Change.RELOAD: Action.RELOAD}


@dataclass
class Control:
    """Set from another thread (the Fleet page's buttons): checked between two servers."""

    paused: threading.Event = field(default_factory=threading.Event)
    aborted: threading.Event = field(default_factory=threading.Event)

    def wait_while_paused(self) -> None:
        while self.paused.is_set() and not self.aborted.is_set():
            self.aborted.wait(0.2)


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
    audit_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change.value, "model": self.model, "ok": self.ok, "headline": self.headline,
                "waves": self.waves, "audit_id": self.audit_id,
                "servers": [{"server": r.server, "wave": r.wave, "outcome": r.outcome, "message": r.message}
                            for r in self.rows]}


Progress = Callable[[str], None]


def rollout(members: Sequence[Member], change: Change, model: str, *, new_config: bytes | None = None,
            wave_size: int = 1, gate: GateSettings | None = None, auth: Authorization | None = None,
            fleet: str = "", home: Path | None = None, progress: Progress | None = None,
            control: Control | None = None, timeout_s: float = 60.0, validate: bool = True) -> RolloutResult:
    """See the module docstring. Refusals raise before anything changes: ConfigError (no
    servers, a wave size below 1, an apply without a repository for a server), and for an
    apply the validator's ConfigInvalidError / ConfigParseError (`validate=False` skips it)."""
    actor = require(auth, Guarded(change.value))
    refuse_unproven(members, f"fleet {change.value} {model}")  # a discovered member nobody vouched for
    if not members:
        raise ConfigError("the fleet has no server to change")
    if wave_size < 1:
        raise ConfigError(f"--wave-size must be at least 1, got {wave_size}")
    if change is Change.APPLY:
        if new_config is None:
            raise ConfigError("an apply needs the new config's text")
        missing = [m.name for m in members if m.repository is None]
        if missing:
            raise ConfigError(f"no model repository known for {', '.join(missing)}: give --repository "
                              "(a volume every server reads) or repository = ... in each [[server]]")
        if validate:
            first = _real(members[0].repository)
            refuse_invalid(model, new_config.decode("utf-8", errors="replace"), first / model)
    job = _Rollout(list(members), change, model, new_config, gate or GateSettings(), auth,
                   home, progress or (lambda _: None), control or Control(), timeout_s, validate)
    result = job.run(wave_size)
    rows = "\n".join(f"  {r.server}: wave {r.wave or '-'}, {r.outcome}"
                     + (f": {r.message}" if r.message else "") for r in result.rows)
    entry = audit.record(f"fleet {change.value}", model, Result.OK if result.ok else Result.ROLLED_BACK,
                         actor=actor, server=fleet or "fleet", message=f"{result.headline}\n{rows}",
                         home=home)
    return replace(result, audit_id=entry.id)


class _Rollout:
    def __init__(self, members: list[Member], change: Change, model: str, new: bytes | None,
                 gate: GateSettings, auth: Authorization | None, home: Path | None, say: Progress,
                 control: Control, timeout_s: float, validate: bool) -> None:
        self.members, self.change, self.model, self.new = members, change, model, new
        self.gate_settings, self.auth, self.home, self.say = gate, auth, home, say
        self.control, self.timeout_s, self.validate = control, timeout_s, validate
        self.clients = {m.name: TritonClient(m.url, admin_key=m.spec.admin_key, timeout_s=timeout_s,
                                             load_timeout_s=timeout_s, tls_ca=_ca(m)) for m in members}
        self.rows: dict[str, Row] = {m.name: Row(m.name, 0, "not reached") for m in members}
        self.changed: list[Member] = []
        self.previous: dict[Path, bytes] = {}  # repository -> the config file before the rollout
        self.gate: Gate | None = None

    def run(self, wave_size: int) -> RolloutResult:
        try:
            unload = self.change is Change.UNLOAD
            gate = self.gate = Gate(self.clients, self.model, unload, self.gate_settings, self.home)
            self.say(f"measuring {self.model} on {len(self.members)} server(s) before the change")
            gate.measure_before()
            waves = [self.members[i:i + wave_size] for i in range(0, len(self.members), wave_size)]
            for number, wave in enumerate(waves, start=1):
                reason = self._wave(number, wave) or self._gate(gate, number, wave)
                if reason:
                    self.say(f"wave {number} failed: {reason}; putting back {len(self.changed)} server(s)")
                    self._restore()
                    return self._result(False, f"ROLLOUT STOPPED at wave {number} of {len(waves)}: {reason}; "
                                        f"{self._restored_text()}", len(waves))
            done = (f"{self.change.value} {self.model} on {len(self.members)} server(s) "
                    f"in {len(waves)} wave(s)")
            return self._result(True, f"ROLLOUT DONE: {done}, every gate passed", len(waves))
        finally:
            for client in self.clients.values():
                client.close()

    def _wave(self, number: int, wave: list[Member]) -> str:
        for member in wave:
            self.control.wait_while_paused()
            if self.control.aborted.is_set():
                return "aborted by the operator"
            self.say(f"wave {number}: {self.change.value} {self.model} on {member.name}")
            problem = self._change_one(member)
            self.changed.append(member)
            self.rows[member.name] = Row(member.name, number, "failed" if problem else "changed", problem)
            if problem:
                return f"{member.name}: {problem}"
        return ""

    def _gate(self, gate: Gate, number: int, wave: list[Member]) -> str:
        self.say(f"wave {number}: health gate on {', '.join(m.name for m in wave)}")
        for member in wave:
            problem = gate.check(member.name)
            if problem:
                self.rows[member.name] = Row(member.name, number, "failed", problem)
                return f"{member.name}: {problem}"
        return ""

    def _change_one(self, member: Member) -> str:
        client = self.clients[member.name]
        try:
            if self.change is Change.APPLY:
                return self._apply_one(member, client)
            result = run_action(client, Action(self.change.value), [self.model], auth=self.auth,
                                settle_timeout_s=self.timeout_s)[0]
            return "" if result.ok else result.message.splitlines()[0]
        except GeAdminError as exc:
            return str(exc).splitlines()[0]

    def _apply_one(self, member: Member, client: TritonClient) -> str:
        repository = _real(member.repository)
        if repository in self.previous:  # a shared repository already written: reload only
            if not _loaded(client, self.model):
                return ""
            result = run_action(client, Action.RELOAD, [self.model], auth=self.auth,
                                settle_timeout_s=self.timeout_s)[0]
            return "" if result.ok else result.message.splitlines()[0]
        self.previous[repository] = (repository / self.model / CONFIG_FILE).read_bytes()
        assert self.new is not None
        applied = apply_config(client, repository, self.model, self.new, auth=self.auth, home=self.home,
                               smoke=self.gate_settings.requests > 0, validate=self.validate,
                               note=f"fleet apply on {member.name}")
        return "" if applied.ok else applied.message.splitlines()[0]

    def _restore(self) -> None:
        written: set[Path] = set()
        for member in reversed(self.changed):
            row = self.rows[member.name]
            try:
                problem = self._restore_one(member, written)
            except GeAdminError as exc:
                problem = str(exc).splitlines()[0]
            outcome = "not restored" if problem else "restored"
            note = f"{row.message}; " if row.message else ""
            self.rows[member.name] = Row(member.name, row.wave, outcome, note + (problem or "put back"))

    def _restore_one(self, member: Member, written: set[Path]) -> str:
        client = self.clients[member.name]
        if self.change is not Change.APPLY:
            # An unload that took an ensemble down with it: the ensemble is loaded back too.
            lost = self.gate.lost(member.name) if self.gate and self.change is Change.UNLOAD else []
            results = run_action(client, UNDO[self.change], [self.model, *lost], auth=self.auth,
                                 settle_timeout_s=self.timeout_s)
            return "; ".join(r.message.splitlines()[0] for r in results if not r.ok)
        repository = _real(member.repository)
        old = self.previous.get(repository)
        if old is None:
            return ""
        path = repository / self.model / CONFIG_FILE
        if repository not in written:
            written.add(repository)
            if path.read_bytes() != old:
                apply_config(client, repository, self.model, old, auth=self.auth, home=self.home,
                             action="rollback", validate=False, note="fleet rollout stopped: put back")
            if path.read_bytes() != old:
                return f"{path} is not the file it was (sha256 {_sha(path.read_bytes())}, was {_sha(old)})"
        if _loaded(client, self.model):
            result = run_action(client, Action.RELOAD, [self.model], auth=self.auth,
                                settle_timeout_s=self.timeout_s)[0]
            return "" if result.ok else result.message.splitlines()[0]
        return ""

    def _restored_text(self) -> str:
        bad = [r.server for r in self.rows.values() if r.outcome == "not restored"]
        if bad:
            return f"NOT put back on {', '.join(bad)}: see each server's row"
        return f"{len(self.changed)} changed server(s) put back" if self.changed else "nothing had changed"

    def _result(self, ok: bool, headline: str, waves: int) -> RolloutResult:
        return RolloutResult(self.change, self.model, ok, headline, tuple(self.rows.values()), waves)


def _ca(member: Member) -> str | None:
    """The CA a member reached over grpcs:// was proven with (geadmin.fleet.membership), pinned."""
    return str(member.tls_ca) if member.tls_ca is not None else None


def _real(path: Path | None) -> Path:
    assert path is not None
    return Path(path).resolve()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _loaded(client: TritonClient, model: str) -> bool:
    try:
        index = client.repository_index()
    except TritonError:
        return False
    return any(m.name == model and m.state.value in ("READY", "LOADING") for m in index)
