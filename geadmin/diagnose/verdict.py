"""The verdict's rules, on values (no I/O): OK, DEGRADED or DOWN, and the reasons why.

`diagnose.evidence.assess` gathers what they read (Triton, its log, the repository, the
workspace, /metrics) and applies them; `geadmin status`, the Overview's banner, the sidebar and
the diagnostics bundle all show the Verdict it returns, so no two views can disagree:

- DOWN: Triton does not answer, answers but is not live, or a model named with
  `--expect` is not READY.
- DEGRADED: Triton serves, but a model failed to load; a model lost READY without an
  operator's unload (not READY, and the audit log's latest action on it is no operator
  unload: an ensemble dropped when a member changed, a model unloaded behind geadmin's
  back); a model is stuck LOADING / UNLOADING (`diagnose.stuck`); a model serves a config that differs from
  its file on disk (`diagnose.drift`); a config apply was cut short and nobody has applied
  or rolled back that model since, or a fleet rollout that touched this server was cut short
  (or failed leaving servers changed) and nobody restored or resumed it
  (`diagnose.interrupted`, `diagnose.rollouts`); a READY model's latest synthetic
  probe (`geadmin.ops.probe`, fresh: taken in the last `watch.FRESH_S`) got no answer; an npu_ge
  instance can never execute again (`diagnose.npu_ge_instances`, from Triton's /metrics when its
  URL is known: Triton 2.51 keeps such a model READY); an NPU fault recorded in the workspace
  history needs action (`diagnose.fault_rule`: the chip, code, level, the models and share of
  instances it took, the next step; a model left with no healthy instance is named DOWN, and an
  `--expect`ed one makes the server DOWN); or Triton says it is not ready
  and none of the above explains why. Triton's own readiness is not enough: in explicit model-control mode
  a failed load does not make it "not ready".
- OK: none of the above. A model an operator unloaded, or never loaded, is not a failure;
  nor is a version its version policy retired while another version of it is READY.
  geadmin's own tuning trials are never judged, only listed (`diagnose.own_work`). When no
  recent probe checked that the READY models answer (`diagnose.probe_check`), the OK headline
  says so: a note, not a reason.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from geadmin.diagnose import interrupted
from geadmin.diagnose.drift import Drift
from geadmin.diagnose.health import ServerSnapshot, Triage, is_idle
from geadmin.diagnose.npu_ge_instances import BrokenInstances
from geadmin.diagnose.probe_check import ProbeCheck
from geadmin.diagnose.stuck import STUCK_AFTER_S, stuck_fix
from geadmin.diagnose.unloads import DROPPED_MARK
from geadmin.domain import ModelEntry, ModelState, format_duration
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import HELD, ProbeRecord


class Level(str, enum.Enum):
    OK = "OK"
    DEGRADED = "DEGRADED"
    DOWN = "DOWN"


class VerdictRule(str, enum.Enum):
    """Which rule put the server where it is (in the JSON, so a script knows what it paged on)."""

    UNREACHABLE = "unreachable"
    NOT_LIVE = "not-live"
    EXPECTED_NOT_READY = "expected-not-ready"
    MODEL_FAILED = "model-failed"
    MODEL_DROPPED = "model-dropped"
    MODEL_STUCK = "model-stuck"
    DRIFT = "drift"
    INDEX_UNREADABLE = "index-unreadable"
    SERVER_NOT_READY = "server-not-ready"
    INTERRUPTED_CHANGE = "interrupted-change"
    NOT_ANSWERING = "model-not-answering"
    INSTANCE_BROKEN = "instance-broken"
    NPU_FAULT = "npu-fault"
    NPU_FAULT_EXPECTED = "npu-fault-expected"  # an --expect'ed model left with no healthy instance


LEVEL_OF = {VerdictRule.UNREACHABLE: Level.DOWN, VerdictRule.NOT_LIVE: Level.DOWN,
            VerdictRule.EXPECTED_NOT_READY: Level.DOWN, VerdictRule.NPU_FAULT_EXPECTED: Level.DOWN}


@dataclass(frozen=True)
class Reason:
    rule: VerdictRule
    text: str  # one line: what is wrong, with the cause
    model: str = ""
    fix: str = ""

    @property
    def level(self) -> Level:
        return LEVEL_OF.get(self.rule, Level.DEGRADED)

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule.value, "level": self.level.value, "model": self.model,
                "text": self.text, "fix": self.fix}


@dataclass(frozen=True)
class Verdict:
    snapshot: ServerSnapshot
    found: Triage  # dropped models are among `found.failed`, with their reason
    reasons: tuple[Reason, ...] = ()
    drift: tuple[Drift, ...] = ()
    expected: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    drift_checked: bool = True  # False: no repository (or no client) to compare with
    probes: Mapping[str, ProbeRecord] = field(default_factory=dict)  # model -> its fresh probe
    unloaded: Mapping[str, str] = field(default_factory=dict)  # model -> "unloaded by NAME at TIME"
    notes: tuple[str, ...] = ()  # true and worth knowing, but no reason to page
    trials: tuple[ModelEntry, ...] = ()  # geadmin's tuning trials: listed, never judged
    probe_check: ProbeCheck | None = None  # did a recent probe check the READY models answer; None: no
    # READY model, or not asked

    @property
    def unprobed(self) -> str:
        """What an OK verdict says it did not check: whether the READY models answer ("" when a
        recent probe did; the unreadable workspace's own note says it for that case)."""
        check = self.probe_check
        return check.said if check is not None and not check.unreadable else ""

    @property
    def level(self) -> Level:
        levels = {reason.level for reason in self.reasons}
        return Level.DOWN if Level.DOWN in levels else (Level.DEGRADED if levels else Level.OK)

    @property
    def ok(self) -> bool:
        return self.level is Level.OK

    @property
    def rules(self) -> list[VerdictRule]:
        return list(dict.fromkeys(reason.rule for reason in self.reasons))

    @property
    def missing(self) -> list[str]:
        """Expected models that are not READY."""
        ready = {m.name for m in self.found.ready}
        return [name for name in self.expected if name not in ready]

    @property
    def headline(self) -> str:
        """The first line everywhere: the level, and what put it there."""
        if not self.reasons:
            ready = len({m.name for m in self.found.ready})  # a row per version, counted per model
            scope = f"every expected model READY ({', '.join(self.expected)}); " if self.expected else ""
            drift = "none drifted from its file" if self.drift_checked else \
                "drift not checked (the model repository is not known here)"
            notes = "".join(f"; note: {note}" for note in self.notes)
            unprobed = f"; {self.unprobed}" if self.unprobed else ""
            return f"OK: Triton serves; {scope}{ready} model(s) READY, none failed, {drift}{unprobed}{notes}"
        worst = [r for r in self.reasons if r.level is self.level]
        more = len(self.reasons) - 1
        return f"{self.level.value}: {worst[0].text}" + (f" (and {more} more)" if more else "")

    def to_json(self) -> dict[str, object]:
        snap = self.snapshot
        failures = self.found.failed_reasons
        failed_rows = {(m.name, m.version) for m, _ in self.found.failed}  # a READY version is no failure
        return {
            "url": snap.url,
            "verdict": self.level.value,
            "ok": self.ok,
            "rules": [rule.value for rule in self.rules],
            "reasons": [reason.to_json() for reason in self.reasons],
            "headline": self.headline,
            "live": snap.live,
            "ready": snap.ready,
            "version": snap.info.version if snap.info else "",
            "error": snap.error,
            "models": [{"name": m.name, "version": m.version, "state": m.state.value, "reason": m.reason,
                        "failure": failures.get(m.name, "") if (m.name, m.version) in failed_rows else "",
                        "unloaded_by_operator": self.unloaded.get(m.name, ""),
                        "probe": self.probes[m.name].to_json() if m.name in self.probes else None}
                       for m in snap.models],
            "expected_not_ready": self.missing,
            "failed": sorted(failures),
            "drift": [d.to_json() for d in self.drift],
            "drift_checked": self.drift_checked,
            "notes": list(self.notes),
            "trials": [{"name": m.name, "state": m.state.value} for m in self.trials],
            "probe_check": self.probe_check.to_json() if self.probe_check is not None else None,
        }


# -- the rules, on values (no I/O) -------------------------------------------------------
def judge(snapshot: ServerSnapshot, found: Triage, *, drift: Sequence[Drift] = (),
          stuck: Mapping[str, float] | None = None, expected: Sequence[str] = (),
          cut_short: Sequence[interrupted.Interrupted] = (),
          probes: Mapping[str, ProbeRecord] | None = None,
          unloaded: Mapping[str, str] | None = None) -> Verdict:
    """Apply the rules to what was found. `stuck`: model -> seconds it has been moving;
    `found.failed` already holds the dropped models and `unloaded` the operator's unloads (see
    `with_dropped`)."""
    unloaded = dict(unloaded or {})
    if not snapshot.reachable:
        down = Reason(VerdictRule.UNREACHABLE, snapshot.error or f"Triton at {snapshot.url} does not answer")
        return Verdict(snapshot, found, (down,), expected=tuple(expected))
    missing = expected_reasons(snapshot, found, expected)
    reasons = [*server_reasons(snapshot), *missing,
               *model_reasons(found, stuck or {}, {r.model for r in missing})]
    reasons += [Reason(VerdictRule.DRIFT, item.reason, item.model, item.fix) for item in drift]
    reasons += interrupted_reasons(cut_short)
    ready = {m.name for m in found.ready}
    silent = watch.causes_first([p for name, p in (probes or {}).items() if name in ready and not p.ok])
    reasons += [Reason(VerdictRule.NOT_ANSWERING, f"model {p.model!r} is READY but does not answer: "
                       f"{one_line(p.error)}", p.model, silent_fix(p)) for p in silent]
    notes: list[str] = []
    if not reasons and snapshot.live and not snapshot.ready:
        # Such a model keeps its failure as its index reason; a plain unload says "unloaded".
        held = [m.name for m in found.idle
                if m.state is ModelState.UNAVAILABLE and m.name in unloaded and not is_idle(m)]
        if held and not found.changing:
            notes.append(held_readiness_note(held))  # an operator's choice is not a failure
        else:
            reasons.append(not_ready_reason(found))
    return Verdict(snapshot, found, tuple(reasons), tuple(drift), tuple(expected), tuple(sorted(stuck or {})),
                   probes=dict(probes or {}), unloaded=unloaded, notes=tuple(notes))


def held_readiness_note(names: Sequence[str]) -> str:
    """Triton's strict readiness keeps counting a model that failed and was then unloaded by an
    operator (FACTS.md): not a failure of the server, but a load balancer probing it sees one."""
    return (f"Triton's /v2/health/ready still says not ready because its strict readiness counts "
            f"{', '.join(names)}, unloaded by an operator after a failed load; a load balancer probing "
            "readiness keeps this server out until that model loads again or Triton restarts")


def interrupted_reasons(cut_short: Sequence[interrupted.Interrupted]) -> list[Reason]:
    """The interrupted-change rule: one DEGRADED reason per change cut short and not put right
    (a config apply, a fleet rollout), with the command that puts it back. The fleet view
    (`geadmin fleet status`, the Fleet page) calls it too."""
    return [Reason(VerdictRule.INTERRUPTED_CHANGE, one_line(item.reason()), item.model, item.fix)
            for item in cut_short]


def not_ready_reason(found: Triage) -> Reason:
    """Triton's strict readiness also counts models that failed once and were unloaded since:
    probes of /v2/health/ready fail (a load balancer takes the server out) while it serves."""
    serving = {m.name for m in found.ready}  # a version retired beside a READY one is not counted
    unavailable = list(dict.fromkeys(m.name for m in found.idle
                                     if m.state is ModelState.UNAVAILABLE and m.name not in serving))
    moving = [f"{m.name} is {m.state.value}" for m in found.changing]
    if moving:  # e.g. geadmin up loading every model again after an automatic restart
        return Reason(VerdictRule.SERVER_NOT_READY,
                      f"Triton says it is not ready while {', '.join(moving)} — "
                      "probes of /v2/health/ready fail until they end",
                      fix="wait: Triton answers ready once they end (a model still LOADING or UNLOADING "
                          f"after {format_duration(STUCK_AFTER_S)} is stuck)")
    if unavailable:
        why = f"; its strict readiness counts {', '.join(unavailable)}, which is not READY"
    else:
        why = ", and no model explains why (read its log)"
    return Reason(VerdictRule.SERVER_NOT_READY,
                  f"Triton says it is not ready{why} — probes of /v2/health/ready "
                  "fail while it serves", fix="load the model once its cause is fixed, or restart Triton")


def broken_reason(found: BrokenInstances) -> Reason:
    fix = ("reset the NPU (npu-smi's reset, an operator's step) or move the model to a healthy "
           f"one, then `geadmin models reload {found.model}`" if found.none_left else
           f"`geadmin models reload {found.model}` rebuilds its instances once the device is healthy")
    return Reason(VerdictRule.INSTANCE_BROKEN, found.text, found.model, fix)


# Triton 2.51 says "failed to open directory DIR" when its repository is gone (seen here). Any
# other failure to list (a timeout, a key, an answer that is not Triton's) carries its own fix.
REPOSITORY_GONE_SAYS = "failed to open directory"
REPOSITORY_GONE_FIX = ("put back the model repository Triton was started with (moved, deleted, or an "
                       "unmounted volume?) and make it readable: the models loaded now serve until Triton "
                       "restarts, which then loads none of them")


def server_reasons(snapshot: ServerSnapshot) -> list[Reason]:
    reasons = []
    if not snapshot.live:
        reasons.append(Reason(VerdictRule.NOT_LIVE, "Triton answers but is not live"))
    if snapshot.error:
        gone = REPOSITORY_GONE_SAYS in snapshot.error.lower()
        reasons.append(Reason(VerdictRule.INDEX_UNREADABLE, f"cannot list the models: {snapshot.error}",
                              fix=REPOSITORY_GONE_FIX if gone else ""))
    return reasons


def expected_reasons(snapshot: ServerSnapshot, found: Triage, expected: Sequence[str]) -> list[Reason]:
    failed, ready = found.failed_reasons, {m.name for m in found.ready}
    states = {m.name: m.state.value for m in snapshot.models}
    reasons = []
    for name in (n for n in expected if n not in ready):
        state = states.get(name, "not in the repository")
        cause = f": {one_line(failed[name])}" if name in failed else ""
        reasons.append(Reason(VerdictRule.EXPECTED_NOT_READY, f"expected model {name!r} is {state}{cause}",
                              name))
    return reasons


def model_reasons(found: Triage, stuck: Mapping[str, float], down: Collection[str] = ()) -> list[Reason]:
    """`down`: the models already DOWN (an --expect'ed one not READY); a failed version of an
    expected model that serves from another version is still a failure."""
    reasons: list[Reason] = []
    said = set()
    for model, full in found.failed:
        if model.name in down or model.name in said:
            continue  # already DOWN for it; one reason per model, however many versions failed
        said.add(model.name)
        why = one_line(full)
        if model.reason == DROPPED_MARK:
            reasons.append(Reason(VerdictRule.MODEL_DROPPED, f"model {model.name!r} lost READY: {why}",
                                  model.name, "load it again once the cause is fixed (Models page or "
                                  f"`geadmin models load {model.name}`)"))
        else:
            reasons.append(Reason(VerdictRule.MODEL_FAILED, f"model {model.name!r} failed: {why}", model.name,
                                  "fix the cause, then load it again"))
    for model in {m.name: m for m in found.changing if m.name in stuck}.values():  # per model
        reasons.append(Reason(VerdictRule.MODEL_STUCK,
                              f"model {model.name!r} has been {model.state.value} for "
                              f"{format_duration(stuck[model.name])}", model.name, stuck_fix(model.state)))
    return reasons


def silent_fix(probe: ProbeRecord) -> str:
    if probe.input == HELD:  # its probe still waits in Triton: a request would wait behind it
        return (f"reload it (geadmin models reload {probe.model}): a new instance serves beside the hung "
                "one; if it hangs again, fix what its execute waits on; the hung request ends only with "
                "Triton (geadmin stack restart triton)")
    return (f"send it a request from the Playground to see the whole error; reload it (geadmin models "
            f"reload {probe.model}) or roll back its last config change")


def one_line(text: str) -> str:
    """A reason as one line (a Python traceback's "At: ..." stays in the model's own row)."""
    return text.strip().split("\n")[0].strip()
