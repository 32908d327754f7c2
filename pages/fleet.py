"""Fleet: every server of a fleet as one — the model x server matrix, skew, servers down,
outliers, with "Compare configs" the config each server serves (config skew), grouped by
node and Ascend type, refreshed in place with the time it was read — the
NPU faults of its nodes, grouped by node (pages.ui.fault_card) — and
rollouts in waves that stop and put every changed server back at the first failed health gate,
asked for, shown (servers, waves, the change) and confirmed before they start, watched live,
paused and aborted here. A rollout cut short (the dashboard killed mid-wave, an error) is shown
with what changed where, and Restore / Resume buttons. The same functions as `geadmin fleet`
(geadmin.fleet)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError
from geadmin.fleet import runs, unresolved
from geadmin.fleet.discovery import Discovery, discover, fleet_named, fleets
from geadmin.fleet.members import ASCEND, NODE
from geadmin.fleet.polling import poll
from geadmin.fleet.status import FleetStatus
from pages.ui import access, interrupted_view, keys
from pages.ui.errors import failure_of, show_failure
from pages.ui.fault_card import fleet_faults
from pages.ui.fleet_history_view import fleet_triage
from pages.ui.fleet_rollout_view import rollout_form
from pages.ui.outside_text import defused, text

REFRESH_S = 2  # the rollout watcher
STATUS_REFRESH_S = 5  # the headline, matrix and trust table

Shown = tuple[Discovery, FleetStatus, datetime]
_EMPHASIS = re.compile(r"([*_~#])")  # what defused() leaves: emphasis, strike-through, a heading


def render() -> None:
    st.title("Fleet")
    st.caption("Every Triton server of a fleet as one. Fleets are [[fleet]] tables in the servers file "
               "(GEADMIN_SERVERS_FILE) or GEADMIN_FLEET; sources: the configured servers, dns:HOST:PORT, "
               "prometheus:URL?job=JOB, kubernetes:NAMESPACE?selector=LABELS.")
    try:
        names = sorted(fleets())
    except GeAdminError as exc:  # the servers file broke: the fleets read last stay, marked below
        names = sorted(st.session_state.get(keys.FLEET_LAST_GOOD, {}))
        if not names:
            show_failure(failure_of(exc), title="Cannot read the fleet")
            return
    name = st.selectbox("Fleet", names, key=keys.FLEET_NAME)
    configs = st.toggle("Compare configs", key=keys.FLEET_CONFIGS,
                        help="Also read the config each server serves of every model READY on two or more "
                        "and compare them: one request per model and server at every refresh, so off by "
                        "default (the same as `geadmin fleet status --configs`).")
    st.fragment(live_status, run_every=STATUS_REFRESH_S)(name, configs)
    shown, fresh = _last_shown(name)
    if shown is None:
        return
    found, status, _ = shown
    interrupted_view.fleet_rollouts(found)  # cut short: what changed where, Restore, Resume
    fleet_faults(found)  # NPU faults grouped by node, with the models they hit
    fleet_triage()  # with GEADMIN_PROMETHEUS_URL: the fleet's bottlenecks
    rollout_form(found, status.models, fresh)
    watch(found.fleet.name)


def read(name: str, configs: bool = False) -> Shown:
    """The fleet `name` now: discovered, every member polled (geadmin.fleet.polling.poll), with
    `configs` each member's served configs compared."""
    found = discover(fleet_named(name))
    return found, poll(found, configs=configs), datetime.now(timezone.utc)


def _last_shown(name: str) -> tuple[Shown | None, bool]:
    last_good: dict[str, Shown] = st.session_state.get(keys.FLEET_LAST_GOOD, {})
    shape = st.session_state.get(keys.FLEET_SHAPE)
    return last_good.get(name), bool(shape and shape[0] == name and shape[1])


def live_status(name: str, configs: bool = False) -> None:
    """The headline, matrix and trust table, read again every STATUS_REFRESH_S. When discovery
    fails the last fleet read stays, marked; when the models or servers change (or reading
    fails or recovers), the whole page reruns so the rollout below matches what is shown."""
    last_good: dict[str, Shown] = st.session_state.setdefault(keys.FLEET_LAST_GOOD, {})
    try:
        last_good[name] = read(name, configs)
        fresh = True
    except GeAdminError as exc:
        fresh = False
        show_failure(failure_of(exc), title="Cannot read the fleet")
    shown = last_good.get(name)
    shape = (name, fresh, tuple(shown[1].models) if shown else (),
             tuple((m.name, m.trust.trusted, str(m.repository)) for m in shown[0].members) if shown else ())
    previous = st.session_state.get(keys.FLEET_SHAPE)
    st.session_state[keys.FLEET_SHAPE] = shape
    if previous is not None and previous != shape:  # the next run sees the same shape: no loop
        st.rerun(scope="app")
    if shown is None:
        st.caption(f"No fleet read yet; retrying every {STATUS_REFRESH_S}s.")
        return
    status, at = shown[1], shown[2]
    when = at.strftime("%H:%M:%S UTC")
    if fresh:
        st.caption(f"As of {when}; read again every {STATUS_REFRESH_S}s.")
    else:
        st.warning(f"Showing the fleet as of {when}, the last time it could be read; rollouts are disabled "
                   "until it answers again. This page recovers by itself.", icon=":material/history:")
    show_status(status)


def show_status(status: FleetStatus) -> None:
    # geadmin's sentence around names and errors discovery chose: no outside word becomes a link
    reasons = unresolved.fleet_reasons(status.discovery.fleet.name, [m.url for m in status.discovery.members])
    headline = _one_line(unresolved.fleet_headline(status.headline(), reasons))
    if headline.startswith("FLEET OK:"):
        st.success(headline, icon=":material/check_circle:")
    elif headline.startswith("FLEET OK"):
        st.warning(headline, icon=":material/warning:")
    else:
        st.error(headline, icon=":material/error:")
    for title, lines in (("Sources", status.discovery.problems), ("Down", status.down()),
                         ("Failed", status.failed()), ("Not ready", status.unready()),
                         ("Skew", status.skew()), ("Config skew", status.config_skew()),
                         ("Config not compared", status.configs_not_compared()),
                         ("Outliers", status.outliers())):
        if not lines:
            continue
        if title.startswith("Config"):  # field values a member chose, whole: shown as text, never markdown
            st.markdown(f"**{title}**\n" + "\n".join(f"- {text(line)}" for line in lines))
        else:  # geadmin's sentences around names and errors that discovery and members chose
            st.markdown(f"**{title}**\n" + "\n".join(f"- {defused(line)}" for line in lines))
    if status.models:
        matrix = pd.DataFrame({s.name: [status.cell_text(s, m) for m in status.models]
                               for s in status.servers}, index=status.models)
        st.dataframe(matrix, width="stretch")
    # Trusted (keyed) or read-only, and why (geadmin.fleet.membership).
    st.dataframe(pd.DataFrame([{"server": s.name, "trust": s.member.trust.word, "why": s.member.trust.why}
                               for s in status.servers]), hide_index=True, width="stretch")
    for title, label in (("node", NODE), ("Ascend type", ASCEND)):
        grouped = status.groups(label)
        if set(grouped) != {"-"}:  # some source knows it
            shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in grouped.items())
            st.caption(f"By {title}: " + defused(shown))


def _one_line(headline: str) -> str:
    """The headline as markdown: one line (a value's newline would start a heading or a list),
    nothing in it a link, an image, HTML, emphasis or a heading; geadmin's code spans kept."""
    return _EMPHASIS.sub(r"\\\1", defused(" ".join(headline.splitlines())))


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
        permitted, why_not = access.allowed(GuardedAction.RELOAD)  # an operator's, like the rollout
        command = None
        if pause_col.button("Resume" if paused else "Pause", key=keys.FLEET_PAUSE, disabled=not permitted,
                            help=why_not or None):
            command = "resume" if paused else "pause"
        if abort_col.button("Abort", key=keys.FLEET_ABORT, type="primary", disabled=not permitted,
                            help=why_not or None):
            command = "abort"
        if command is not None:
            try:  # audited, as the signed-in user
                runs.steer(run, command, access.auth_for(GuardedAction.RELOAD, server=fleet))
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
