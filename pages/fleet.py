"""Fleet: every server of a fleet as one — the model x server matrix, skew, servers down,
outliers, grouped by node and Ascend type — and rollouts in waves that stop and put every
changed server back at the first failed health gate, watched live, paused and aborted here.
A rollout cut short (the dashboard killed mid-wave, an error) is shown with what changed where,
and Restore / Resume buttons. The same functions as `geadmin fleet` (geadmin.fleet)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from geadmin.access.roles import Action
from geadmin.errors import GeAdminError
from geadmin.fleet import journal, runs
from geadmin.fleet.discovery import Discovery, discover, fleet_named, fleets
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.members import ASCEND, NODE
from geadmin.fleet.rollout import Change, Control, RolloutResult, rollout
from geadmin.fleet.status import FleetStatus, poll
from geadmin.fleet.versions import roll_version
from pages.ui import access, interrupted_view, keys
from pages.ui.errors import failure_of, show_failure
from pages.ui.fleet_history_view import fleet_triage

REFRESH_S = 2
NEW_VERSION = "new version"  # an apply of version_policy in two gated rollouts (geadmin.fleet.versions)


def render() -> None:
    st.title("Fleet")
    st.caption("Every Triton server of a fleet as one. Fleets are [[fleet]] tables in the servers file "
               "(GEADMIN_SERVERS_FILE) or GEADMIN_FLEET; sources: the configured servers, dns:HOST:PORT, "
               "prometheus:URL?job=JOB, kubernetes:NAMESPACE?selector=LABELS.")
    try:
        names = sorted(fleets())
        name = st.selectbox("Fleet", names, key=keys.FLEET_NAME)
        found = discover(fleet_named(name))
        status = poll(found)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Cannot read the fleet")
        return
    show_status(status)
    interrupted_view.fleet_rollouts(found)  # cut short: what changed where, Restore, Resume
    fleet_triage()  # with GEADMIN_PROMETHEUS_URL: the fleet's bottlenecks
    rollout_form(found, status)
    watch(found.fleet.name)


def show_status(status: FleetStatus) -> None:
    headline = journal.fleet_headline(status.headline(), journal.fleet_reasons(status.discovery.fleet.name))
    if headline.startswith("FLEET OK:"):
        st.success(headline, icon=":material/check_circle:")
    elif headline.startswith("FLEET OK"):
        st.warning(headline, icon=":material/warning:")
    else:
        st.error(headline, icon=":material/error:")
    for title, lines in (("Sources", status.discovery.problems), ("Down", status.down()),
                         ("Failed", status.failed()), ("Skew", status.skew()),
                         ("Outliers", status.outliers())):
        if lines:
            st.markdown(f"**{title}**\n" + "\n".join(f"- {line}" for line in lines))
    if status.models:
        matrix = pd.DataFrame({s.name: [_cell(s.cell(m)) if not s.problem else "?" for m in status.models]
                               for s in status.servers}, index=status.models)
        st.dataframe(matrix, width="stretch")
    # Trusted (keyed) or read-only, and why (geadmin.fleet.membership).
    st.dataframe(pd.DataFrame([{"server": s.name, "trust": s.member.trust.word, "why": s.member.trust.why}
                               for s in status.servers]), hide_index=True, width="stretch")
    for title, label in (("node", NODE), ("Ascend type", ASCEND)):
        grouped = status.groups(label)
        if set(grouped) != {"-"}:  # some source knows it
            st.caption(f"By {title}: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in grouped.items()))


def _cell(cell: tuple[str, str] | None) -> str:
    if cell is None:
        return "-"
    return f"{cell[0]} v{cell[1]}" if cell[1] else cell[0]


def rollout_form(found: Discovery, status: FleetStatus) -> None:
    if not status.models:
        return
    st.subheader("Roll out a change")
    with st.form(keys.FLEET_FORM):
        action_col, model_col, wave_col, gate_col, slack_col = st.columns([1, 2, 1, 1, 1])
        chosen = action_col.selectbox("Change", [*(c.value for c in Change), NEW_VERSION],
                                      key=keys.FLEET_CHANGE)
        change = Change.APPLY if chosen == NEW_VERSION else Change(chosen)
        model = model_col.selectbox("Model", status.models, key=keys.FLEET_MODEL)
        wave = wave_col.number_input("Wave size", min_value=1, max_value=max(1, len(found.members)), value=1)
        requests = gate_col.number_input("Gate requests", min_value=0, max_value=100, value=3,
                                         help="smoke requests per server before and after its wave")
        slack = slack_col.number_input("Latency slack (ms)", min_value=0, max_value=600_000, value=200,
                                       help="the gate requests' median may take twice its time before + this")
        repository = st.text_input("Shared repository (apply)", key=keys.FLEET_REPOSITORY,
                                   help="the model repository every server reads, as mounted here; empty: "
                                   "each server's own (repository = ... in its [[server]])")
        text = st.text_area("New config.pbtxt (apply)", key=keys.FLEET_CONFIG, height=200)
        version = st.number_input("Version (new version)", min_value=1, value=2, key=keys.FLEET_VERSION,
                                  help="its directory must be in every repository; it is loaded beside the "
                                  "served version, warmed by the gate, then the old one is retired")
        permitted, why_not = access.allowed(Action(change.value))
        start = st.form_submit_button("Start rollout", type="primary", disabled=not permitted,
                                      help=why_not or None)
    if not start:
        return
    members = found.members
    if repository.strip():
        members = tuple(replace(m, repository=Path(repository.strip()).expanduser()) for m in members)
    try:
        auth = access.auth_for(Action(change.value), model=model, server=found.fleet.name)

        gate = GateSettings(requests=int(requests), latency_slack_ms=float(slack))

        def work(control: Control, say: Callable[[str], None]) -> RolloutResult:
            common = {"wave_size": int(wave), "gate": gate, "auth": auth, "fleet": found.fleet.name,
                      "progress": say, "control": control}
            if chosen == NEW_VERSION:
                return roll_version(members, model, int(version), **common)
            new = text.encode() if change is Change.APPLY else None
            return rollout(members, change, model, new_config=new, **common)

        subject = f"version {int(version)} of {model}" if chosen == NEW_VERSION else f"{change.value} {model}"
        what = f"{subject} on {len(members)} server(s)"
        runs.start(found.fleet.name, what, auth.who.name, work)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Rollout not started")


@st.fragment(run_every=REFRESH_S)
def watch(fleet: str) -> None:
    """The latest rollout of `fleet`, live: its progress, Pause / Resume / Abort while it runs."""
    run = runs.latest(fleet)
    if run is None:
        return
    st.subheader(f"Rollout: {run.what} ({run.state})")
    if run.running:
        pause_col, abort_col = st.columns(2)
        paused = run.control.paused.is_set()
        permitted, why_not = access.allowed(Action.RELOAD)  # an operator's, like the rollout
        command = None
        if pause_col.button("Resume" if paused else "Pause", key=keys.FLEET_PAUSE, disabled=not permitted,
                            help=why_not or None):
            command = "resume" if paused else "pause"
        if abort_col.button("Abort", key=keys.FLEET_ABORT, type="primary", disabled=not permitted,
                            help=why_not or None):
            command = "abort"
        if command is not None:
            try:  # audited, as the signed-in user
                runs.steer(run, command, access.auth_for(Action.RELOAD, server=fleet))
            except GeAdminError as exc:
                show_failure(failure_of(exc), title=f"{command.capitalize()} refused")
    if run.error:
        st.error(f"Refused: {run.error}", icon=":material/error:")
    if run.result is not None:
        (st.success if run.result.ok else st.error)(run.result.headline)
        st.dataframe(pd.DataFrame([{"server": r.server, "wave": r.wave or None, "outcome": r.outcome,
                                    "detail": r.message} for r in run.result.rows]),
                     hide_index=True, width="stretch")
    with st.expander("Progress", expanded=run.running):
        st.code("\n".join(run.lines[-200:]) or "starting…", language=None)
