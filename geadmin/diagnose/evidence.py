"""What the verdict reads about a server, gathered, and `assess`: the verdict every view shows.

`geadmin status`, the Overview's banner, the sidebar and the diagnostics bundle all call
`assess` and show what it returns, so no two views can disagree. It reads, besides the
snapshot: Triton's log (stuck models, drops), the model repository (drift, geadmin's own
trials: listed, never judged, `diagnose.own_work`), the workspace (the audit log's unloads and
changes cut short, fresh probes, recorded NPU faults) and Triton's /metrics (npu_ge instances
that can never execute again), then applies the rules of `diagnose.verdict` to what it found.
It also says whether a recent probe checked that the READY models answer
(`diagnose.probe_check`: no probe, or a stale one, is a note in the OK headline, never a reason).

Without the workspace database the rules that read it are not judged, and a note says so
(`BLIND_RULES`): a failure Triton reports is still a failure, and a model Triton merely calls
"unloaded" is listed as not loaded, named in a note (an operator's unload or a drop: nobody
can tell without the audit log).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from geadmin import db
from geadmin.diagnose import fault_rule, interrupted, own_work
from geadmin.diagnose.drift import Drift, find_drift
from geadmin.diagnose.health import ServerSnapshot, triage
from geadmin.diagnose.npu_ge_instances import read_broken
from geadmin.diagnose.probe_check import check_probes, setting_interval_s
from geadmin.diagnose.stuck import stuck_models
from geadmin.diagnose.unloads import Unloads, with_dropped
from geadmin.diagnose.verdict import Reason, Verdict, VerdictRule, broken_reason, judge
from geadmin.telemetry.history import watch
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource


@dataclass(frozen=True)
class EvidenceSources:
    """Where the evidence comes from, besides the snapshot."""

    client: TritonClient | None = None  # for drift (GET config); None: no drift check
    log: LogSource | None = None
    repository: Path | None = None
    home: Path | None = None  # the workspace (audit log)
    metrics_url: str | None = None  # Triton's /metrics: npu_ge instances that cannot execute
    probe_interval_s: float | None = None  # how often the sampler probes; None: GEADMIN_PROBE_INTERVAL_S
    also: tuple[str, ...] = ()  # the server's other known endpoints: its probes may be recorded there
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def assess(snapshot: ServerSnapshot, sources: EvidenceSources | None = None, *,
           expected: Sequence[str] = ()) -> Verdict:
    """The verdict every view shows. Never raises for Triton trouble (it is in the verdict)."""
    src = sources or EvidenceSources()
    listed = [m.name for m in snapshot.models]  # geadmin's trials too: loaded, and listed
    snapshot, trials = own_work.split_trials(snapshot, src.repository)
    found, unloads = with_dropped(triage(snapshot, src.log, src.repository), src.log, src.home, snapshot.url)
    drift: list[Drift] = []
    checked = src.client is not None and src.repository is not None
    if src.client is not None and snapshot.reachable and not snapshot.error:
        drift = find_drift(src.client, src.repository, [m.name for m in found.ready],
                           listed=listed, home=src.home)
    stuck = stuck_models(found, src.log, src.now)
    cut_short = interrupted.unresolved(src.repository, home=src.home, url=snapshot.url)
    probes = watch.fresh_probes(snapshot.url, also=src.also, now_s=src.now.timestamp(), home=src.home) \
        if snapshot.reachable else {}
    interval_s = src.probe_interval_s if src.probe_interval_s is not None else setting_interval_s()
    probe_check = check_probes(snapshot.url, {m.name for m in found.ready}, also=src.also,
                               now_s=src.now.timestamp(), interval_s=interval_s,
                               home=src.home) if snapshot.reachable else None
    verdict = judge(snapshot, found, drift=drift, stuck=stuck, expected=expected, cut_short=cut_short,
                    probes=probes, unloaded=unloads.by_operator)
    broken, unjudged = read_broken(src.metrics_url) if src.metrics_url and snapshot.reachable else ([], "")
    reasons = tuple(r for r in verdict.reasons if r.rule is not VerdictRule.SERVER_NOT_READY
                    or not own_work.explain_not_ready(trials)) + tuple(map(broken_reason, broken))
    faults, fault_notes = npu_fault_reasons(src, snapshot.reachable, expected)
    blind = db.unreadable(src.home)
    if blind:  # every rule above that reads the audit or the history saw nothing: say so once
        fault_notes = (f"{BLIND_RULES} are not judged: {blind}",)
    return replace(verdict, reasons=reasons + faults, drift_checked=checked, trials=trials,
                   probe_check=probe_check, notes=unknown_unloads_notes(unloads) + verdict.notes + fault_notes
                   + ((unjudged,) if unjudged else ()))


# What the verdict reads from the workspace database (the audit log, the sampler's history).
BLIND_RULES = ("interrupted changes, operators' unloads (a failed load is still judged from Triton's "
               "reason), probes and NPU faults")


def unknown_unloads_notes(unloads: Unloads) -> tuple[str, ...]:
    """Models Triton says were unloaded while the audit log cannot be read: named, not judged
    (calling every operator's unload a failure would page for a disk fault; calling a drop an
    operator's choice without saying so would hide it)."""
    if not unloads.unknown:
        return ()
    names = ", ".join(repr(name) for name in unloads.unknown)
    return (f"cannot tell whether an operator unloaded {names} or Triton dropped it behind geadmin's back "
            "(model-dropped): the audit log that says which cannot be read; listed as not loaded until the "
            "workspace database is readable again",)


def npu_fault_reasons(src: EvidenceSources, reachable: bool,
                      expected: Sequence[str]) -> tuple[tuple[Reason, ...], tuple[str, ...]]:
    """The npu-fault rule (geadmin.diagnose.fault_rule): its reasons and its notes."""
    if not reachable:  # DOWN already; the faults wait for a server to judge
        return (), ()
    report, why = fault_rule.read_report(home=src.home, metrics_url=src.metrics_url, client=src.client,
                                         now_s=src.now.timestamp())
    if report is None:
        return (), (why,) if why else ()
    found, notes = fault_rule.findings(report)
    rules = [VerdictRule.NPU_FAULT_EXPECTED if f.down and f.model in expected else VerdictRule.NPU_FAULT
             for f in found]
    return tuple(Reason(rule, f.text, f.model, f.fix) for rule, f in zip(rules, found, strict=True)), \
        tuple(notes) + tuple(report.notes)
