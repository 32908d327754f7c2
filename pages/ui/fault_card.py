"""A fault card per faulted chip (the NPUs page), and the faults of a fleet grouped by node (the
Fleet page): the chip, the code, its level and meaning, the models and the share of instances
each lost, the ensembles above them, and the plan with "Dry run" and "Apply".

Views only over `geadmin.diagnose.npu_faults.FaultReport` (read through
`geadmin.ops.npu.wiring`) and `geadmin.ops.npu.remedy.apply_plan`: "Dry run" changes nothing;
"Apply" needs the roles of every changing step (access.allowed), a ticked confirmation after
the card's own dry run, and runs under the signed-in user's authorization (audited with the
fault named). A card is never green: a model with no healthy instance left makes it red
whatever Triton says; a fault that needs action, orange; a NotHandleFault, grey.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from geadmin import settings
from geadmin.diagnose.fault_text import for_models, next_text
from geadmin.diagnose.npu_faults import ChipImpact, FaultReport
from geadmin.errors import GeAdminError
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.npu_faults import fleet_faults_now
from geadmin.ops.npu.remedy import NEEDS, RemedyOutcome, RemedyState, apply_plan
from geadmin.telemetry.sources.fault_table import FaultLevel
from geadmin.triton.client import TritonClient
from pages.ui import access, keys, outside_text
from pages.ui.errors import failure_of, show_failure
from pages.ui.outside_text import defused

FLEET_READ_TIMEOUT_S = 5.0  # per member: a silent member is a note, not a stalled page

STATE_ICONS = {RemedyState.SAID: ":material/campaign:", RemedyState.WOULD: ":material/visibility:",
               RemedyState.DONE: ":material/check:", RemedyState.FAILED: ":material/error:",
               RemedyState.REFUSED: ":material/block:"}


def card_id(impact: ChipImpact) -> str:
    fault = impact.record.fault
    return f"{fault.node}|{fault.chip}|{fault.code_hex}"


def headline(impact: ChipImpact) -> str:
    """`NPU 3 · node-a · 0x80E01801 · RestartNPU`: what the card and the alert both lead with."""
    fault = impact.record.fault
    where = f"NPU {fault.chip}" + (f" · {outside_text.text(fault.node, 100)}" if fault.node else "")
    code = f"`{fault.code_hex}`" if fault.code is not None else "no code"
    unhealthy = " · chip unhealthy" if fault.healthy is False else ""
    return f"{where} · {code} · {impact.cls.level.value}{unhealthy}"


def ordered(impacts: Sequence[ChipImpact], npu: int | None, node: str, model: str) -> list[ChipImpact]:
    """Present faults first (a link's chip, or the cards hitting its model, at the top), then cleared ones."""
    def key(i: ChipImpact) -> tuple[int, int, str, int]:
        fault = i.record.fault
        linked = (npu is not None and fault.chip == npu and fault.node == node) or \
            bool(model and any(h.model == model for h in i.hits))
        return (0 if i.record.present else 1, 0 if linked else 1, fault.node, fault.chip)
    return sorted(impacts, key=key)


def fault_cards(report: FaultReport, *, client: TritonClient | None, repository: Path | None,
                metrics_url: str | None, npu: int | None = None, node: str = "", model: str = "") -> None:
    """One card per fault of `report` (nothing when there is none), `npu`/`node`/`model` from a link."""
    for note in report.notes:
        st.caption(f":material/info: {outside_text.text(note)}")
    if npu is not None and not any(i.record.fault.chip == npu and i.record.fault.node == node
                                   for i in report.impacts):
        where = f"NPU {npu}" + (f" of node {outside_text.quoted(node)}" if node else "")
        st.info(f"The link names {where}: no fault is recorded there now (it may have cleared).",
                icon=":material/link_off:")
    for impact in ordered(report.impacts, npu, node, model):
        card(impact, client=client, repository=repository, metrics_url=metrics_url)


def card(impact: ChipImpact, *, client: TritonClient | None, repository: Path | None,
         metrics_url: str | None) -> None:
    with st.container(border=True):
        down = [h.model for h in impact.hits if h.down]
        cleared = "" if impact.record.present else " · cleared"
        st.markdown(f"**{headline(impact)}**{cleared}")
        meaning = f"{outside_text.text(impact.cls.meaning)} — {outside_text.text(for_models(impact))}"
        if not impact.record.present:
            st.caption(f"No longer reported by {impact.record.fault.source}: {meaning}.")
        elif down:
            st.error(f"{meaning}. No healthy instance left: {', '.join(down)} — DOWN whatever Triton says.",
                     icon=":material/dangerous:")
        elif impact.counts:
            st.warning(f"{meaning}. Next: {outside_text.text(next_text(impact))}", icon=":material/warning:")
        else:
            st.info(f"{meaning}. {outside_text.text(impact.cls.action)}", icon=":material/info:")
        if impact.hits:
            st.dataframe(hits_frame(impact), hide_index=True, width="stretch",
                         column_config={"share lost": st.column_config.ProgressColumn(
                             "share lost", format="%.0f%%", min_value=0, max_value=100)})
        elif impact.cls.level is not FaultLevel.NOT_HANDLE:
            st.caption("No model instance is known to run on this chip.")
        if impact.record.present:
            plan_view(impact, client=client, repository=repository, metrics_url=metrics_url)


def hits_frame(impact: ChipImpact) -> pd.DataFrame:
    return pd.DataFrame([{"model": h.model, "instances lost": f"{h.instances_lost} of {h.instances_total}",
                          "share lost": _share(h.instances_lost, h.instances_total),
                          "left": h.left, "ensembles": ", ".join(h.ensembles) or "-",
                          "status": "DOWN" if h.down else ("degraded" if h.instances_lost else "serving")}
                         for h in impact.hits])


def _share(lost: int, total: int) -> float:
    return 100.0 * lost / total if total else 0.0


def plan_view(impact: ChipImpact, *, client: TritonClient | None, repository: Path | None,
              metrics_url: str | None) -> None:
    if not impact.plan:
        st.caption("No action: the table says this fault has no impact on inference.")
        return
    st.markdown("**Plan**")
    for number, step in enumerate(impact.plan, 1):
        line = f"{number}. {outside_text.text(step.text)}"
        command = step.command.replace("`", "'")
        st.markdown(line + (f"  \n`{command}` (for you to run: geadmin never resets hardware)"
                            if step.command else ""))
    cid = card_id(impact)
    outcomes_key = keys.NPU_FAULT_OUTCOMES_PREFIX + cid
    changing = sorted({NEEDS[s.kind] for s in impact.plan if s.kind in NEEDS}, key=lambda a: a.value)
    checks = [access.allowed(action) for action in changing]
    permitted = all(ok for ok, _ in checks)
    why_not = next((why for ok, why in checks if not ok), "")
    dry_col, confirm_col, apply_col = st.columns([2, 5, 2], vertical_alignment="center")
    run = dict(client=client, repository=repository, metrics_url=metrics_url)
    if dry_col.button("Dry run", key=keys.NPU_FAULT_DRY_PREFIX + cid, help="what each step would do; "
                      "changes nothing"):
        _run(impact, outcomes_key, None, dry_run=True, **run)
    last = st.session_state.get(outcomes_key)
    dry_done = last is not None and not last[0]  # an Apply asks for a new dry run before the next
    confirmed = confirm_col.checkbox("I read the dry run: apply this plan",
                                     key=keys.NPU_FAULT_CONFIRM_PREFIX + cid,
                                     disabled=not changing or not permitted or not dry_done,
                                     help=why_not or ("run the dry run first" if not dry_done else ""))
    if apply_col.button("Apply", key=keys.NPU_FAULT_APPLY_PREFIX + cid, type="primary",
                        disabled=not changing or not permitted or not confirmed,
                        help=why_not or "the changing steps, guarded and audited with the fault named"):
        try:
            auth = access.auth_for(changing[0], model=impact.hits[0].model if impact.hits else "")
        except GeAdminError as exc:
            show_failure(failure_of(exc), title="Not allowed")
        else:
            _run(impact, outcomes_key, auth, dry_run=False, **run)
            st.session_state.pop(keys.NPU_FAULT_CONFIRM_PREFIX + cid, None)
    shown = st.session_state.get(outcomes_key)
    if shown is not None:
        outcomes_view(*shown)


def _run(impact: ChipImpact, outcomes_key: str, auth: object, *, dry_run: bool, client: TritonClient | None,
         repository: Path | None, metrics_url: str | None) -> None:
    try:
        with st.spinner("dry run…" if dry_run else "applying the plan…"):
            outcomes = apply_plan(impact, auth, dry_run=dry_run, client=client,  # type: ignore[arg-type]
                                  repository=repository, metrics_url=metrics_url)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="The plan was not applied")
        return
    st.session_state[outcomes_key] = (not dry_run, tuple(outcomes))


def outcomes_view(applied: bool, outcomes: Sequence[RemedyOutcome]) -> None:
    st.caption("Applied:" if applied else "Dry run: nothing was changed.")
    for outcome in outcomes:
        text = f"**{outcome.step.kind.value}** — {outside_text.text(outcome.message)}"
        if outcome.state in (RemedyState.FAILED, RemedyState.REFUSED):
            st.error(text, icon=STATE_ICONS[outcome.state])
        else:
            st.markdown(f"{STATE_ICONS[outcome.state]} {text}")


def _hits_text(impact: ChipImpact) -> str:
    return ", ".join(f"{h.model} ({h.instances_lost}/{h.instances_total})" for h in impact.hits) or "-"


def fleet_faults(found: Discovery) -> None:
    """The Fleet page's section: the fleet's faults grouped by node (one core call)."""
    try:
        report = fleet_fault_report(found)
    except GeAdminError as exc:
        st.caption(f"NPU faults of the fleet not read: {defused(str(exc))}")
        return
    st.subheader("NPU faults by node")
    faults_by_node(report)


def fleet_fault_report(found: Discovery) -> FaultReport:
    """Every member's faults read, recorded and joined with its node's models (one core call)."""
    return fleet_faults_now(found.members, home=settings.home(), timeout_s=FLEET_READ_TIMEOUT_S,
                            not_found=found.problems)


def faults_by_node(report: FaultReport) -> None:
    """Each node with its faulted chips and the models they hit."""
    nodes = sorted({i.record.fault.node for i in report.impacts if i.record.present})
    for part in report.unjudged:
        st.warning(f"NPU faults not read, so a fault there is not ruled out: {outside_text.text(part)}",
                   icon=":material/help:")
    for note in report.notes:
        st.caption(f":material/info: {outside_text.text(note)}")
    if not nodes and report.unjudged:
        st.caption("No NPU fault present on the nodes that were read.")
        return
    if not nodes:
        st.caption("No NPU fault present on the fleet's nodes.")
        return
    for node in nodes:
        here = [i for i in report.impacts if i.record.present and i.record.fault.node == node]
        down = sorted({h.model for i in here for h in i.hits if h.down})
        label = outside_text.text(node or "this host", 100)
        st.markdown(f"**{label}** · {len(here)} fault{'s' if len(here) != 1 else ''}"
                    + (f" · DOWN: {', '.join(down)}" if down else ""))
        st.dataframe(pd.DataFrame([{"NPU": i.record.fault.chip, "code": i.record.fault.code_hex,
                                    "level": i.cls.level.value, "needs action": "yes" if i.counts else "no",
                                    "models hit": _hits_text(i),
                                    "card": "/npu?" + urlencode({"npu": i.record.fault.chip, "node": node})}
                                   for i in here]),
                     hide_index=True, width="stretch")
