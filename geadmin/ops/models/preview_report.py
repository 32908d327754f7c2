"""What a preview of a config change found, and its go / no-go (`geadmin.ops.models.preview`).

The verdict is NO-GO, with the rule that said so, when any of these holds (in this order):

1. it takes down a loaded ensemble that runs the model (`geadmin.diagnose.impact`);
2. the validator finds an error in the new config (the apply would refuse it);
3. Triton refuses to load it (the trial copy's load failed: the apply would roll back);
4. the trial could not be measured at the replayed rate (perf_analyzer failed on it);
5. the trial's p99 is over the model's p99 objective;
6. the trial's requests that failed would burn the error budget faster than it lasts
   (projected burn rate above 1);
7. with no p99 objective, the trial's p99 is more than P99_GROWTH_LIMIT times the live one's,
   and more than P99_GROWTH_FLOOR_MS above it — judged only when each side counted at least
   P99_GROWTH_MIN_REQUESTS requests: the p99 of fewer is their slowest one, and one stall of a
   busy host doubled it. Below that the GO says the p99 change was not judged, and how to.

Otherwise GO. Every figure says where it came from: measured now on the live model or the
trial, recorded (the replayed rate), the validator, the stored objective.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from geadmin.diagnose.impact import Impact
from geadmin.ops.models.change_plan import CheckedChange
from geadmin.repository.validate import Finding
from geadmin.telemetry.alerting.objectives import Objective

P99_GROWTH_LIMIT = 2.0  # without a p99 objective: a change that more than doubles p99 is a no-go,
P99_GROWTH_FLOOR_MS = 10.0  # when it also adds this much (a 2 ms p99 doubles on a busy host's noise)
P99_GROWTH_MIN_REQUESTS = 100  # ... and when each side counted this many (a p99 of fewer is their slowest)
MIB = 1 << 20


class PreviewVerdict(str, enum.Enum):
    GO = "GO"
    NO_GO = "NO-GO"


@dataclass(frozen=True)
class PreviewSide:
    """One side measured at the replayed rate: the live model or the trial copy."""

    name: str  # the model Triton served it as
    ok: bool
    throughput_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    requests: int = 0  # what Triton counted for it during the measurement (its statistics)
    failed: int = 0
    memory_bytes: int | None = None  # what it holds (Triton's memory_usage or NPU HBM), None: not known
    memory_source: str = ""
    error: str = ""  # why it was not measured
    sent_late: str = ""  # perf_analyzer's own lateness at the replayed rate (results.describe_sent_late)

    @property
    def failed_fraction(self) -> float | None:
        total = self.requests + self.failed
        return self.failed / total if total else None

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "throughput_per_s": self.throughput_per_s,
                "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "requests": self.requests,
                "failed": self.failed, "memory_bytes": self.memory_bytes,
                "memory_source": self.memory_source, "error": self.error, "sent_late": self.sent_late}


@dataclass(frozen=True)
class ImpactPreview(CheckedChange):
    """A config change previewed on a trial copy; nothing was applied."""

    model: str
    server: str
    trial: str  # the trial copy's name (removed by the time this exists)
    rate_rps: float | None  # the replayed request rate
    rate_source: str  # where the rate came from: "recorded ..." or "given with --rate"
    window_ms: int
    findings: tuple[Finding, ...] = ()
    impact: Impact | None = None
    refused: str = ""  # Triton's reason for refusing the trial's load
    live: PreviewSide | None = None
    candidate: PreviewSide | None = None
    objective: Objective | None = None
    removed: str = ""  # what became of the trial ("removed", or why not)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def p99_change(self) -> float | None:
        """trial p99 / live p99 (both measured now), None when either is missing."""
        live, trial = self.live, self.candidate
        if live is None or trial is None or not live.p99_ms or trial.p99_ms is None:
            return None
        return trial.p99_ms / live.p99_ms

    @property
    def projected_burn(self) -> float | None:
        """The trial's failed fraction divided by the error budget (1 spends it exactly)."""
        budget = self.objective.error_budget if self.objective else None
        fraction = self.candidate.failed_fraction if self.candidate else None
        return fraction / budget if budget and fraction is not None else None

    def reasons(self) -> list[str]:
        """Why NO-GO, in the module docstring's order; [] for GO."""
        found = [f"it takes down {c.model}: {c.reason}" for c in
                 (self.impact.consequences if self.impact is not None else ()) if c.effect.takes_down]
        found += [f"the validator refuses it: {f.message}" for f in self.errors]
        if self.refused:
            found.append(f"Triton refused to load it: {self.refused}")
        trial, objective = self.candidate, self.objective
        if trial is not None and not trial.ok:
            found.append(f"the trial could not be measured: {trial.error}")
        if trial is not None and trial.p99_ms is not None and objective and objective.p99_ms is not None \
                and trial.p99_ms > objective.p99_ms:
            found.append(f"p99 {trial.p99_ms:.1f} ms is over the objective of {objective.p99_ms:g} ms")
        burn = self.projected_burn
        if burn is not None and burn > 1:
            found.append(f"its failed requests would burn the error budget {burn:.1f}x as fast as it lasts")
        change = self.p99_change
        judged = objective is not None and objective.p99_ms is not None
        grown_ms = (trial.p99_ms or 0.0) - (self.live.p99_ms or 0.0) if trial and self.live else 0.0
        if not judged and self._growth_judged() and change is not None and change > P99_GROWTH_LIMIT \
                and grown_ms > P99_GROWTH_FLOOR_MS:
            found.append(f"p99 grows {change:.1f}x (more than {P99_GROWTH_LIMIT:g}x, and no p99 objective "
                         "to judge it by)")
        return found

    @property
    def verdict(self) -> PreviewVerdict:
        return PreviewVerdict.NO_GO if self.reasons() else PreviewVerdict.GO

    def headline(self) -> str:
        reasons = self.reasons()
        if reasons:
            return f"NO-GO: {self.model}: {reasons[0]}" + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1
                                                           else "")
        return f"GO: {self.model}: the new config loads, breaks no ensemble and {self._holds()}"

    def _growth_judged(self) -> bool:
        """Rule 7 has enough requests on both sides to go by."""
        return self.live is not None and self.candidate is not None \
            and min(self.live.requests, self.candidate.requests) >= P99_GROWTH_MIN_REQUESTS

    def _holds(self) -> str:
        objective = self.objective
        if objective is not None and objective.p99_ms is not None:
            return f"holds the p99 objective of {objective.p99_ms:g} ms at the replayed rate"
        if self.live is not None and self.candidate is not None and not self._growth_judged():
            return (f"its p99 change was not judged: {self.live.requests} and {self.candidate.requests} "
                    f"requests measured, and a p99 of fewer than {P99_GROWTH_MIN_REQUESTS} is their slowest "
                    f"one (no p99 objective set: `geadmin objectives set {self.model} --p99-ms N`, or "
                    "preview with longer windows)")
        return "keeps p99 within the limit at the replayed rate (no p99 objective set)"

    def evidence(self) -> list[str]:
        """The lines after the headline: each figure with where it came from."""
        lines = [f"load: {self._rate_text()}, {self.window_ms} ms windows, the live model and the trial "
                 f"copy {self.trial} one after the other"]
        lines += [f"  NO-GO because {reason}" for reason in self.reasons()[1:]]
        lines += self._measured_lines()
        lines.append(f"objective: {self.objective.describe() if self.objective else 'none set'}"
                     f" (geadmin objectives {self.model})")
        burn = self.projected_burn
        if burn is not None:
            lines.append(f"error budget: projected burn rate {burn:.2f} (failed requests measured now on the "
                         "trial / the budget; 1 spends it exactly)")
        elif self.objective is not None and self.objective.error_budget is not None:
            lines.append("error budget: projected burn not known (the trial was not measured)")
        if self.impact is not None and self.impact.consequences:
            lines.append(f"ensembles (validator and Triton's live configs): {self.impact.headline()}")
            lines += [f"  {line}" for line in self.impact.lines()]
        else:
            lines.append("ensembles: none loaded runs it, or the new config is the file on disk")
        lines += [f"validator: {f}" for f in self.findings]
        lines += [f"note: {note}" for note in self.notes]
        lines.append(f"trial: {self.removed}; nothing was applied")
        return lines

    def _rate_text(self) -> str:
        if self.rate_rps is None:
            return "no traffic replayed"
        return f"{self.rate_rps:g} requests/s ({self.rate_source})"

    def _measured_lines(self) -> list[str]:
        live, trial = self.live, self.candidate
        if live is None or trial is None:
            return ["measured: nothing (the trial was not loaded)"]
        lines = [f"measured now, live : {_side_text(live)}", f"measured now, trial: {_side_text(trial)}"]
        change = self.p99_change
        if change is not None:
            lines.append(f"p99 change: {live.p99_ms:.1f} -> {trial.p99_ms:.1f} ms ({_percent(change)})")
        if live.throughput_per_s and trial.throughput_per_s is not None:
            lines.append(f"throughput change: {live.throughput_per_s:.1f} -> {trial.throughput_per_s:.1f} "
                         f"inferences/s ({_percent(trial.throughput_per_s / live.throughput_per_s)})")
        lines.append(f"memory change: {_memory_change(live, trial)}")
        return lines

    def record(self) -> dict[str, Any]:
        """For `--json`."""
        return {"model": self.model, "server": self.server, "verdict": self.verdict.value,
                "go": self.verdict is PreviewVerdict.GO, "headline": self.headline(),
                "reasons": self.reasons(), "trial": self.trial, "rate_rps": self.rate_rps,
                "rate_source": self.rate_source, "window_ms": self.window_ms,
                "live": self.live.record() if self.live else None,
                "candidate": self.candidate.record() if self.candidate else None,
                "p99_change": self.p99_change, "projected_burn": self.projected_burn,
                "objective": None if self.objective is None else
                {"p99_ms": self.objective.p99_ms, "error_budget": self.objective.error_budget},
                "taken_down": self.taken_down, "impact": self.impact.record() if self.impact else None,
                "findings": [f.to_dict() for f in self.findings], "refused": self.refused,
                "removed": self.removed, "notes": list(self.notes), "applied": False}


def _side_text(side: PreviewSide) -> str:
    if not side.ok:
        return f"not measured ({side.error})"
    return (f"p99 {side.p99_ms:.1f} ms, p50 {side.p50_ms:.1f} ms, {side.throughput_per_s:.1f} inferences/s, "
            f"{side.failed} of {side.requests + side.failed} requests failed"
            + (f"; {side.sent_late}" if side.sent_late else ""))


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f} %"


def _memory_change(live: PreviewSide, trial: PreviewSide) -> str:
    if live.memory_bytes is not None and trial.memory_bytes is not None:
        delta = trial.memory_bytes - live.memory_bytes
        return (f"{live.memory_bytes / MIB:.0f} -> {trial.memory_bytes / MIB:.0f} MiB "
                f"({delta / MIB:+.0f} MiB; "
                f"{trial.memory_source or live.memory_source})")
    if trial.memory_bytes is not None:
        return (f"the trial holds {trial.memory_bytes / MIB:.0f} MiB ({trial.memory_source}); the live "
                "model's share is not known here")
    return "not known here (no npu_ge device metrics and no memory_usage in Triton's statistics)"
