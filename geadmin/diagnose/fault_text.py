"""An NPU fault report in words and as JSON: what `geadmin npu faults`, the verdict's npu-fault
rule and the pages say, so they say it alike. The first words are what on-call needs: the
chip, the code, its level, the models and the share of their instances lost, the next step."""

from __future__ import annotations

from datetime import datetime, timezone

from geadmin.diagnose.npu_faults import ChipImpact, FaultReport, ModelHit, PlanStep, StepKind
from geadmin.telemetry.sources.fault_table import FaultLevel

MEANING_CHARS = 72
HEADLINE_FAULTS = 3  # the faults that need action whose next step the headline names
NEXT_WORDS = {StepKind.NONE: "no action", StepKind.WATCH: "watch the chip", StepKind.RELOAD: "reload",
              StepKind.DRAIN: "drain and reset", StepKind.RESET: "reset",
              StepKind.MOVE: "move the instances off", StepKind.SEPARATE: "keep it out of service"}
NO_MODEL = "no model on it"


def chip_name(impact: ChipImpact) -> str:
    fault = impact.record.fault
    return f"NPU {fault.chip}" + (f" on node {fault.node}" if fault.node else "")


def hit_text(hit: ModelHit) -> str:
    """"resnet (1 of 2 instances)", with DOWN and the ensembles above it."""
    plural = "s" if hit.instances_total != 1 else ""
    text = f"{hit.model} ({hit.instances_lost} of {hit.instances_total} instance{plural}"
    text += ", none left: DOWN)" if hit.down else ")"
    if hit.ensembles:
        text += f" and the ensemble(s) {', '.join(hit.ensembles)}"
    return text


def next_words(impact: ChipImpact) -> str:
    """The plan in a few words: "drain and reset", "reload resnet"; a drain that would leave a
    model with no instance says to give it another device first."""
    kinds = [s.kind for s in impact.plan]
    if not impact.record.present:
        return "cleared, nothing to do"
    if not kinds:
        return NEXT_WORDS[StepKind.NONE]
    words = NEXT_WORDS[kinds[0]]
    models = [s.model for s in impact.plan if s.model]
    if kinds[0] is StepKind.RELOAD and models:
        return f"{words} {', '.join(models)}"
    stranded = [s.model for s in impact.plan if s.kind is StepKind.DRAIN and s.model and not s.device_ids]
    if stranded:
        return f"give {', '.join(stranded)} another device first, then {words}"
    return words


def chip_next(impact: ChipImpact) -> str:
    """"NPU 3: drain and reset", "NPU 1: watch the chip (no model on it)": a fault's next step as
    the headline names it."""
    words = next_words(impact)
    return f"{chip_name(impact)}: {words}" + ("" if impact.hits else f" ({NO_MODEL})")


def next_text(impact: ChipImpact) -> str:
    """The next safe step in a sentence (the card's "Next:"): the level's action when models run
    on the chip, else the plan's first step, which says what to do with a chip no model is on
    (and with an unknown code, whose table action only says what to do in either health)."""
    if (impact.hits and impact.cls.level is not FaultLevel.UNKNOWN) or not impact.plan:
        return impact.cls.action
    return impact.plan[0].text


def impact_line(impact: ChipImpact) -> str:
    """One line: "NPU 3: 0x80E18402 (RestartNPU, HBM ECC) hits resnet (1 of 2 instances) — drain
    and reset"."""
    fault, cls = impact.record.fault, impact.cls
    level = cls.level.value
    # a fault without a code: what the source saw (a lost device, the Health column) is its meaning
    meaning = short(fault.detail or cls.meaning if fault.code is None else cls.meaning, level=level)
    meaning = meaning.replace(f" ({fault.code_hex})", "")  # the line names the code already
    what = f"{level}, {meaning}" if meaning else level
    if fault.healthy is False:
        what += ", chip unhealthy"
    if not impact.record.present:
        what += ", cleared"
    hits = "; ".join(hit_text(h) for h in impact.hits) if impact.hits else "no model"
    code = fault.code_hex if fault.code is not None else "no code"
    verb = "hits" if impact.record.present else "hit"
    return f"{chip_name(impact)}: {code} ({what}) {verb} {hits} — {next_words(impact)}"


def short(meaning: str, limit: int = MEANING_CHARS, *, level: str = "") -> str:
    """A table's meaning as the first lines show it: its first clause without the level the line
    already names ("(NotHandleFault)"), cut at a word boundary with an ellipsis when too long."""
    first = meaning.split(": ", 1)[0].split("; ", 1)[0].strip()
    if level:
        first = first.removesuffix(f"({level})").rstrip()
    if len(first) <= limit:
        return first
    cut = first[:limit - 1]
    if first[limit - 1] != " " and " " in cut:  # the limit falls inside a word: end at the word before it
        cut = cut[:cut.rfind(" ")]
    return cut.rstrip(" ,;:-(") + "…"


def headline(report: FaultReport) -> str:
    counted = [i for i in report.impacts if i.counts and i.record.present]
    if report.models_down:
        return (f"DOWN: no healthy instance left of {', '.join(report.models_down)} "
                f"({len(counted)} NPU fault(s) need action)")
    if counted:
        steps = list(dict.fromkeys(chip_next(i) for i in counted))  # a chip with two faults: named once
        named = "; ".join(steps[:HEADLINE_FAULTS])
        more = f"; {len(steps) - HEADLINE_FAULTS} more below" if len(steps) > HEADLINE_FAULTS else ""
        return f"ACTION: {len(counted)} NPU fault(s) need action — {named}{more}"
    if report.unjudged:
        return (f"DEGRADED: NPU faults not read on {len(report.unjudged)} part(s) of the fleet, so a fault "
                f"there is not ruled out — {report.unjudged[0]}"
                + (f"; {len(report.unjudged) - 1} more below" if len(report.unjudged) > 1 else ""))
    if report.impacts:
        cleared = sum(not i.record.present for i in report.impacts)
        return f"OK: no NPU fault needs action ({len(report.impacts)} shown" + \
            (f", {cleared} cleared)" if cleared else ")")
    if report.unread:
        return "UNKNOWN: no NPU fault source answered, so no fault can be ruled out (why: the notes below)"
    return "OK: no NPU fault reported"


def for_models(impact: ChipImpact) -> str:
    """What the fault means for the models on the chip, as the second line says it: a cleared
    fault says so first; an unknown code on an unhealthy chip says why it counts and where to
    look the code up."""
    fault, record = impact.record.fault, impact.record
    said = impact.cls.for_inference or "-"
    if impact.cls.level is FaultLevel.UNKNOWN and fault.healthy is False:
        said = "the chip is reported unhealthy without a fault code: its instances may fail or hang"
        if fault.code is not None:
            said = ("the chip is reported unhealthy, so this counts as a fault whatever its code: look "
                    f"{fault.code_hex} up in the driver's fault list")
    if not record.present:
        return f"cleared: not reported since {_when(record.last_seen_s)}; while present: {said}"
    return said


def step_lines(step: PlanStep) -> list[str]:
    lines = [f"[{step.kind.value}] {step.text}" + (" (changes: guarded, audited)" if step.changes else "")]
    if step.command:
        lines.append(f"  $ {step.command}   # for you to run; geadmin never runs it")
    return lines


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def report_lines(report: FaultReport, *, plan: bool = False) -> list[str]:
    """The headline, one block per fault (counting ones first), then the notes."""
    lines = [headline(report)]
    for impact in report.impacts:
        record = impact.record
        lines.append(impact_line(impact))
        lines.append(f"  {for_models(impact)}")
        lines.append(f"  source {record.fault.source}, first seen {_when(record.first_seen_s)}, "
                     f"last seen {_when(record.last_seen_s)}" + ("" if record.present else " (cleared)")
                     + (f"; {record.fault.detail}" if record.fault.detail else ""))
        steps = impact.plan if plan else impact.plan[:1]
        for step in steps:
            lines += [f"  {'' if plan else 'next: '}{line}" for line in step_lines(step)]
        if len(steps) < len(impact.plan):
            more = len(impact.plan) - len(steps)
            lines.append(f"  then {more} more step{'s' if more != 1 else ''}: "
                         + ", ".join(s.kind.value for s in impact.plan[len(steps):])
                         + " (--plan prints every step)")
    lines += [f"not read: {part}" for part in report.unjudged]
    lines += [f"note: {note}" for note in report.notes]
    return lines


def report_json(report: FaultReport) -> dict[str, object]:
    return {
        "headline": headline(report),
        "needs_action": report.needs_action,
        "models_down": list(report.models_down),
        "sources_read": None if report.sources_read is None else list(report.sources_read),
        "unjudged": list(report.unjudged),
        "notes": list(report.notes),
        "faults": [{
            "node": i.record.fault.node, "npu": i.record.fault.chip, "code": i.record.fault.code,
            "code_hex": i.record.fault.code_hex, "source": i.record.fault.source,
            "healthy": i.record.fault.healthy, "detail": i.record.fault.detail,
            "first_seen_s": i.record.first_seen_s, "last_seen_s": i.record.last_seen_s,
            "present": i.record.present, "level": i.cls.level.value, "meaning": i.cls.meaning,
            "for_inference": i.cls.for_inference, "action": i.cls.action, "table": i.cls.source,
            "counts": i.counts, "line": impact_line(i),
            "hits": [{"model": h.model, "instances_total": h.instances_total,
                      "instances_lost": h.instances_lost, "left": h.left, "down": h.down,
                      "ensembles": list(h.ensembles)} for h in i.hits],
            "plan": [{"kind": s.kind.value, "text": s.text, "model": s.model, "command": s.command,
                      "changes": s.changes, "device_ids": list(s.device_ids)} for s in i.plan],
        } for i in report.impacts],
    }
