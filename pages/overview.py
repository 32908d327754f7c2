"""Overview: is each server up, which models are not READY, and why."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from geadmin import settings
from geadmin.access.roles import GuardedAction
from geadmin.diagnose.failure_text import from_explanation, from_message
from geadmin.diagnose.health import ServerSnapshot, Triage, is_idle, take_snapshots, triage
from geadmin.diagnose.verdict import Reason, Verdict, VerdictRule
from geadmin.errors import GeAdminError
from geadmin.ops.bundle import build_bundle, default_bundle_name
from geadmin.ops.models import actions
from geadmin.stack.compose_logs import compose_for
from geadmin.stack.target import Target
from geadmin.stack.workspace import Workspace
from pages.ui import access, keys
from pages.ui.alerts_view import active_alerts_panel
from pages.ui.context import client_for, log_for, selected_client, selected_target, targets
from pages.ui.errors import show_failure
from pages.ui.impact_view import show_side_effects
from pages.ui.outside_text import defused
from pages.ui.triage_card import triage_card
from pages.ui.verdict_view import banner, drift_panel, history_panel, verdict_for

REFRESH_S = 5
REASON_COLUMN = st.column_config.TextColumn("reason", width="large")


def render() -> None:
    st.title("Overview")
    live_overview()
    with st.expander("Diagnostics bundle"):
        bundle_download()


@st.fragment(run_every=REFRESH_S)
def live_overview() -> None:
    try:
        known = targets()
    except GeAdminError as exc:  # the servers file changed under us
        st.error(f"geadmin is misconfigured: {defused(str(exc))}")
        return
    snapshots = take_snapshots([(t.spec.name, client_for(t)) for t in known])
    if len(snapshots) > 1:
        servers_table(snapshots)
    target = selected_target()
    current = next(s for s in snapshots if s.name == target.spec.name)
    server_detail(target, current, remember(current))
    active_alerts_panel()
    triage_card()


def remember(snapshot: ServerSnapshot) -> ServerSnapshot | None:
    """Keep the last snapshot that had data, so an outage does not blank the page."""
    last_good: dict[str, ServerSnapshot] = st.session_state.setdefault(keys.OVERVIEW_LAST_GOOD, {})
    if snapshot.reachable and not snapshot.error:
        last_good[snapshot.name] = snapshot
    return last_good.get(snapshot.name)


def servers_table(snapshots: list[ServerSnapshot]) -> None:
    rows = [{"server": s.name, "url": s.url, "status": s.status,
             "version": s.info.version if s.info else "", "models": len(s.models),
             "ready models": sum(m.state.value == "READY" for m in s.models)} for s in snapshots]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def server_detail(target: Target, current: ServerSnapshot, last_good: ServerSnapshot | None) -> None:
    found_verdict = verdict_for(target, current)
    verdict = found_verdict.verdict
    banner(found_verdict, target)
    history_panel(found_verdict)
    shown = current
    if not current.reachable or current.error:
        if last_good is None:
            st.caption("No data yet; retrying every few seconds.")
            return
        shown = last_good
        st.warning(f"The models below are the last data received, from {last_good.taken_at:%H:%M:%S} "
                   "UTC. This page recovers by itself when Triton answers again.")
    found = verdict.found if shown is current else triage(shown, log_for(target), target.repository)
    silent = [r for r in verdict.reasons if r.rule is VerdictRule.NOT_ANSWERING] if shown is current else []
    identity(current, shown, found, len(silent))
    not_answering(silent)
    not_ready_models(found, verdict.unloaded if shown is current else {}, can_act=shown is current)
    drift_panel(verdict, target, can_act=shown is current)
    model_table(shown, found.failed_reasons, verdict if shown is current else None)
    st.caption(f"Refreshed {current.taken_at:%H:%M:%S} UTC · every {REFRESH_S}s")


def identity(current: ServerSnapshot, shown: ServerSnapshot, found: Triage, silent: int = 0) -> None:
    """Server status from the *current* poll (never stale); model counts from what is shown. A
    READY model whose probe fails is counted as "not answering", not as ready."""
    left, middle, right = st.columns(3)
    left.metric("Server", current.status)
    info = current.info or shown.info
    middle.metric("Triton version", info.version if info else "?")
    right.metric("Transport", current.transport.upper())
    st.caption(f"`{current.url}` · live: {current.live} · ready: {current.ready}")
    counts = found.counts
    if silent:
        counts = {"ready": counts["ready"] - silent, "not answering": silent,
                  **{k: v for k, v in counts.items() if k != "ready"}}
    for column, (group, count) in zip(st.columns(len(counts)), counts.items(), strict=True):
        column.metric(group, count)
    if info and info.extensions:
        with st.expander("Extensions"):
            st.text(", ".join(info.extensions))  # as Triton said them: text, never markdown


def not_answering(reasons: list[Reason]) -> None:
    """READY models whose latest probe got an error: each with the error and the fix."""
    if reasons:
        st.subheader(f"READY but not answering ({len(reasons)})")
    for reason in reasons:
        st.error(f"**{defused(reason.model)}** — {defused(reason.text.split(': ', 1)[-1])}\n\n"
                 f"**Next step:** {defused(reason.fix)}.")  # the probe's error: the model's own words


def not_ready_models(found: Triage, unloaded: Mapping[str, str], can_act: bool) -> None:
    show_retry_result()
    if found.failed:
        st.subheader(f"Failed ({len(found.failed)})")
    for model, reason in found.failed:
        state = "not loaded" if is_idle(model) else model.state.value
        version = f" v{model.version}" if model.version else ""
        text_col, button_col = st.columns([6, 1], vertical_alignment="center")
        # the name and the reason: the repository's and the model's own words
        text_col.error(f"**{defused(model.name)}**{version} — {state}: {defused(reason)}")
        permitted, why_not = access.allowed(GuardedAction.LOAD)
        if button_col.button("Retry load", key=f"{keys.OVERVIEW_RETRY_PREFIX}{model.name}.{model.version}",
                             disabled=not can_act or not permitted,
                             help=why_not or "load it again, e.g. after fixing the cause"):
            retry_load(model.name)
    for model in found.changing:
        st.info(f"**{defused(model.name)}** is {model.state.value.lower()}…")
    if found.idle:
        shown = [m.name + (f" ({unloaded[m.name]})" if unloaded.get(m.name) else "") for m in found.idle]
        st.caption("Not loaded: " + defused(", ".join(shown)))


def retry_load(name: str) -> None:
    target = selected_target()
    status = st.status(f"loading {name}…")

    def progress(done: int, total: int, text: str) -> None:
        if text:
            status.update(label=f"loading {text}")

    with status:
        try:
            auth = access.auth_for(GuardedAction.LOAD, model=name, server=target.spec.url)
        except GeAdminError as exc:
            st.error(defused(str(exc)))
            return
        (result,) = actions.run_action(client_for(target),
                                       actions.ModelAction.LOAD, [name], log=log_for(target),
                                       repository=target.repository, progress=progress, auth=auth)
    st.session_state[keys.OVERVIEW_RETRY_RESULT] = result
    st.rerun()


def show_retry_result() -> None:
    result = st.session_state.pop(keys.OVERVIEW_RETRY_RESULT, None)
    if result is None:
        return
    if result.ok:
        st.success(result.message, icon=":material/check_circle:")
        show_side_effects(result.side_effects)  # e.g. an ensemble's members loaded with it
    else:
        next_step = actions.next_step(result.error) if result.error else actions.FIX_AND_RETRY
        failure = (from_explanation(result.explanation, fix=next_step) if result.explanation
                   else from_message(result.message, fix=next_step))
        show_failure(failure, title=f"Retry of {result.name} failed")


def model_table(snapshot: ServerSnapshot, reasons: dict[str, str], verdict: Verdict | None) -> None:
    st.subheader("Models")
    if not snapshot.models:
        st.info("The model repository is empty.")
        return
    drifted = {d.model: d.on_disk for d in verdict.drift} if verdict else {}
    rows = [{"model": m.name, "version": m.version, "state": m.state.value,
             "on disk": f"drifted: {drifted[m.name]}" if m.name in drifted else "",
             "reason": reasons.get(m.name, m.reason)} for m in snapshot.models]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"reason": REASON_COLUMN})


def bundle_download() -> None:
    """One .tar.gz for a ticket: built on request (it reads the log and every config)."""
    st.caption("Server metadata, model index, configs (on disk and normalized), statistics, the end "
               "of Triton's log, geadmin's settings (secrets redacted) and `npu-smi info`.")
    if st.button("Prepare bundle", key=keys.OVERVIEW_BUNDLE_PREPARE):
        target = selected_target()
        with st.spinner("collecting…"):
            bundle = build_bundle(selected_client(), repository=target.repository,
                                  log_path=target.log_path, log=target.log(),
                                  containers=compose_for(target.spec.url),
                                  stack_file=Workspace(settings.home()).live_stack_file(),
                                  metrics_url=target.urls().metrics, also=target.urls().known())
        st.session_state[keys.OVERVIEW_BUNDLE] = (default_bundle_name(), bundle.packed(), bundle.problems)
    prepared = st.session_state.get(keys.OVERVIEW_BUNDLE)
    if prepared is None:
        return
    name, data, problems = prepared
    st.download_button(f"Download {name} ({len(data) / 1024:.0f} KiB)", data, file_name=name,
                       mime="application/gzip", key=keys.OVERVIEW_BUNDLE_DOWNLOAD)
    for section, why in sorted(problems.items()):
        st.caption(f"Not collected: {section}: {why}")
