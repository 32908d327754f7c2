"""The verdict's npu-fault rule: NPU faults recorded in the workspace history, joined with the
models on the chips (geadmin.diagnose.fault_report). READS ONLY.

Evidence: the fault records of this host (node "") still present and seen in the last
`FRESH_S` (`geadmin npu faults`, the sampler or the exporter record them; an older record says
nothing about now), the fault table, and the model <-> NPU map from Triton's /metrics (npu_ge's
placements) and the loaded configs' device_ids. Without a present record nothing else is read.

What it finds (geadmin.diagnose.evidence turns each into a Reason):

- one finding per fault that needs action: "NPU 3: 0x80E18402 (RestartNPU, HBM ECC error) hits
  resnet (1 of 2 instances) — drain and reset", with the plan's first step as the fix;
- one per model left with no healthy instance: that model is DOWN whatever Triton says (the
  server is DEGRADED, or DOWN when the model is one named with `--expect`);
- a fault that needs no action (NotHandleFault, subhealth) is a note: shown, not alarmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.diagnose.fault_report import FaultSources, fault_report
from geadmin.diagnose.fault_text import impact_line
from geadmin.diagnose.npu_faults import ChipImpact, FaultReport
from geadmin.errors import GeAdminError
from geadmin.telemetry.history.faults import fault_records
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.triton.client import TritonClient

FRESH_S = 900.0  # a fault record not seen for this long says nothing about now
READ_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class FaultFinding:
    text: str
    model: str = ""
    fix: str = ""
    down: bool = False  # the model has no healthy instance left


def read_report(*, home: Path | None, metrics_url: str | None, client: TritonClient | None,
                now_s: float) -> tuple[FaultReport | None, str]:
    """The report of this host's present faults, or None when none is recorded; a history or
    table that cannot be read gives (None, why) — no evidence either way."""
    try:
        records = fault_records(home=home, since_s=now_s - FRESH_S, node="", present_only=True)
        if not records:
            return None, ""
        sources = FaultSources(npu=NpuSources(triton_metrics_url=metrics_url, npu_smi="",
                                              timeout_s=READ_TIMEOUT_S), client=client, home=home)
        return fault_report(sources, records), ""
    except GeAdminError as exc:
        return None, f"NPU faults not judged: {exc}"


def findings(report: FaultReport) -> tuple[list[FaultFinding], list[str]]:
    """(what makes the verdict DEGRADED or DOWN, notes)."""
    found = [FaultFinding(impact_line(i), _first_model(i), _fix(i)) for i in report.impacts
             if i.counts and i.record.present]
    for model in report.models_down:
        chips = [i for i in report.impacts if i.counts and i.record.present and any(h.model == model
                                                                                    for h in i.hits)]
        found.append(FaultFinding(f"model {model!r} is DOWN whatever Triton says: no healthy instance left "
                                  f"({'; '.join(impact_line(i) for i in chips)})", model,
                                  _fix(chips[0]) if chips else "", down=True))
    notes = [f"{impact_line(i)} (shown, no action)" for i in report.impacts
             if i.record.present and not i.counts]
    return found, notes


def _first_model(impact: ChipImpact) -> str:
    return impact.hits[0].model if len(impact.hits) == 1 else ""


def _fix(impact: ChipImpact) -> str:
    steps = [s.text + (f" (`{s.command}`)" if s.command else "") for s in impact.plan]
    return "; ".join(steps) + " — `geadmin npu faults --plan` prints the plan"


