"""Models: every model with its state; load / unload / reload; details and ensemble graphs."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.diagnose import details, ensemble, impact
from geadmin.diagnose.failure_text import from_explanation, from_message
from geadmin.diagnose.rows import ModelRow, collect_rows, filter_rows
from geadmin.domain import ModelState
from geadmin.errors import GeAdminError, TritonTimeoutError, TritonUnreachableError
from geadmin.ops.models import actions
from geadmin.ops.models.actions import ModelAction
from geadmin.repository.modelconfig import to_dict, to_pbtxt
from geadmin.stack.server_history import outage_for
from geadmin.stack.target import Target, live_stack
from pages.ui import access, interrupted_view, keys
from pages.ui.context import client_for, log_for, selected_client, selected_target
from pages.ui.errors import show_error, show_failure
from pages.ui.impact_view import show_impact, show_side_effects
from pages.ui.links import preselect
from pages.ui.outside_text import defused
from pages.ui.verdict_view import drift_notes

REFRESH_S = 5
REASON_COLUMN = st.column_config.TextColumn("reason", width="medium")  # last; in full below


def read_rows(target: Target) -> list[ModelRow]:
    client = client_for(target)
    return collect_rows(client, target.repository, log_for(target))


def show_model_error(error: GeAdminError) -> None:
    """`show_error`, or the stack's outage when its Triton is stopped, restarting or not answering."""
    unanswered = isinstance(error, (TritonUnreachableError, TritonTimeoutError))
    show_error(error, outage=outage_for(selected_target().spec.url, live_stack(), unanswered=unanswered))


def render() -> None:
    st.title("Models")
    target = selected_target()
    interrupted_view.notice()  # applies cut short (a killed process): what is on disk, the way back
    show_results()
    paused = st.toggle("Pause auto-refresh", key=keys.MODELS_PAUSED,
                       help=f"the table refreshes itself every {REFRESH_S}s")
    st.fragment(live_table, run_every=None if paused else REFRESH_S)(target)
    rows, fresh = _last_rows(target)
    if rows is not None and fresh:
        actions_form([r.name for r in rows])
        detail(rows)


def _last_rows(target: Target) -> tuple[list[ModelRow] | None, bool]:
    shape = st.session_state.get(keys.MODELS_SHAPE)
    last_good: dict[str, list[ModelRow]] = st.session_state.get(keys.MODELS_LAST_GOOD, {})
    fresh = bool(shape and shape[0] == target.spec.name and shape[1])
    return last_good.get(target.spec.name), fresh


def live_table(target: Target) -> None:
    """The table, refreshed in place. When the server goes away or comes back, or the set of
    models changes, the whole page reruns so the actions below match what is shown."""
    last_good: dict[str, list[ModelRow]] = st.session_state.setdefault(keys.MODELS_LAST_GOOD, {})
    try:
        rows = read_rows(target)
        last_good[target.spec.name] = rows
        fresh = True
    except GeAdminError as exc:
        fresh = False
        show_model_error(exc)
    shape = (target.spec.name, fresh, tuple(r.name for r in last_good.get(target.spec.name, [])))
    previous = st.session_state.get(keys.MODELS_SHAPE)
    st.session_state[keys.MODELS_SHAPE] = shape
    if previous is not None and previous != shape:  # the next run sees the same shape: no loop
        st.rerun(scope="app")
    if target.spec.name not in last_good:
        st.caption(f"No data yet; retrying every {REFRESH_S}s.")
        return
    if not fresh:
        st.warning("Showing the last model list received; actions are disabled until Triton answers. "
                   "This page recovers by itself.")
    model_table(last_good[target.spec.name])
    if fresh:
        rows = last_good[target.spec.name]
        drift_notes(target, [r.name for r in rows if r.state is ModelState.READY], [r.name for r in rows])


def model_table(rows: list[ModelRow]) -> None:
    search_col, state_col = st.columns([2, 1])
    search = search_col.text_input("Search name or reason", key=keys.MODELS_SEARCH)
    states = state_col.multiselect("State", [s.value for s in ModelState], key=keys.MODELS_STATES)
    shown = filter_rows(rows, search, [ModelState(s) for s in states])
    labels = Counter(r.state_label for r in rows)  # "READY, NOT ANSWERING" is a state of its own
    counts = ", ".join(f"{n} {label}" for label, n in sorted(labels.items()))
    st.caption(f"{len(shown)} of {len(rows)} models · {counts}")
    if not shown:
        st.info("No model matches the search and state filter.")
        return
    st.dataframe(pd.DataFrame([r.table_record() for r in shown]), hide_index=True, width="stretch",
                 column_config={"reason": REASON_COLUMN})
    with_reasons = [r for r in shown if r.reason]
    if with_reasons:
        with st.expander(f"Reasons in full ({len(with_reasons)})"):
            for row in with_reasons:
                st.markdown(f"**{defused(row.name)}** ({row.state.value})")
                st.code(row.reason, language="text", wrap_lines=True)


def actions_form(names: list[str]) -> None:
    st.subheader("Actions")
    names_col, action_col, dep_col = st.columns([3, 1, 1])
    chosen = names_col.multiselect("Models", names, key=keys.MODELS_SELECTED,
                                   help="one model, or several for a bulk action")
    action = ModelAction(action_col.selectbox("Action", [a.value for a in ModelAction],
                                              key=keys.MODELS_ACTION))
    dependents = dep_col.checkbox("with dependents", key=keys.MODELS_DEPENDENTS,
                                  disabled=action is not ModelAction.UNLOAD,
                                  help="also unload the models Triton loaded for an ensemble")
    server = selected_target().spec.name
    pending = st.session_state.get(keys.MODELS_PENDING)
    if pending is not None and pending[0] != server:  # asked on another server: never apply here
        del st.session_state[keys.MODELS_PENDING]
        pending = None
    permitted, why_not = access.allowed(GuardedAction(action.value))
    if st.button(f"{action.value.capitalize()}…", disabled=not chosen or pending is not None or not permitted,
                 help=why_not or None):
        st.session_state[keys.MODELS_PENDING] = (server, action.value, tuple(chosen), dependents)
        st.rerun()
    if pending is not None:
        confirm(*pending[1:])


def confirm(action_value: str, names: tuple[str, ...], dependents: bool) -> None:
    action = ModelAction(action_value)
    extra = " and their dependents" if action is ModelAction.UNLOAD and dependents else ""
    st.warning(f"{action.value.capitalize()} {len(names)} model(s){extra}: {defused(', '.join(names))}?")
    found = impact.predict(selected_client(), action.value, names, repository=selected_target().repository)
    show_impact(found)
    yes, no = st.columns(2)
    if no.button("Cancel"):
        del st.session_state[keys.MODELS_PENDING]
        decline(found)
        st.rerun()
    if yes.button(f"Confirm {action.value}", type="primary"):
        del st.session_state[keys.MODELS_PENDING]
        bar = st.progress(0.0, text="starting")

        def progress(done: int, total: int, text: str) -> None:
            label = f"{action.value} {done + 1}/{total}: {text}" if text else f"done {done}/{total}"
            bar.progress(min(done / total, 1.0) if total else 1.0, text=label)

        target = selected_target()
        try:
            auth = access.auth_for(GuardedAction(action.value), model=", ".join(names),
                                   server=target.spec.url)
        except GeAdminError as exc:
            show_model_error(exc)
            return
        results = actions.run_action(selected_client(), action, names, dependents=dependents,
                                     log=log_for(target), repository=target.repository,
                                     progress=progress, auth=auth)
        st.session_state[keys.MODELS_RESULTS] = results
        st.rerun()


def decline(found: impact.Impact) -> None:
    """Cancel on a change that would take an ensemble down is a refusal, audited as the CLI
    audits a "no" to the same question (a change with nothing taken down asks nothing there)."""
    if not found.takes_down:
        return
    target = selected_target()
    refusal = f"not confirmed: {', '.join(found.taken_down)} would go down. Nothing was done"
    try:
        auth = access.auth_for(GuardedAction(found.action), model=", ".join(found.models),
                               server=target.spec.url)
    except GeAdminError as exc:
        show_model_error(exc)
        return
    problem = actions.audit_refusal(target.spec.url, found.action, found.models, refusal, auth.who)
    said = refusal if not problem else f"{refusal} (not audited: {problem})"
    st.toast(defused(said), icon=":material/block:")


def show_results() -> None:
    for result in st.session_state.pop(keys.MODELS_RESULTS, []):
        show_side_effects(result.side_effects)
        if result.ok:
            st.success(result.message, icon=":material/check_circle:")
            continue
        next_step = actions.next_step(result.error) if result.error else actions.FIX_AND_RETRY
        failure = (from_explanation(result.explanation, fix=next_step) if result.explanation
                   else from_message(result.message, fix=next_step))
        unfinished = result.explanation is not None and result.explanation.unfinished
        show_failure(failure, title=f"{result.action.value} {result.name} "
                     + ("did not finish" if unfinished else "failed"))


def detail(rows: list[ModelRow]) -> None:
    st.subheader("Model detail")
    if not rows:
        return
    preselect(keys.MODELS_DETAIL, [r.name for r in rows])  # a deep link's model
    name = st.selectbox("Model", [r.name for r in rows], key=keys.MODELS_DETAIL)
    row = next(r for r in rows if r.name == name)
    target = selected_target()
    client = selected_client()
    try:
        shown = details.shown_config(client, name, target.repository, row.state)
        stats = client.model_statistics(name) if row.state is ModelState.READY else []
    except GeAdminError as exc:
        show_model_error(exc)
        return
    config = shown.config
    if config is None:
        st.error(f"No config to show for {defused(name)}: {defused(shown.problem)}", icon=":material/error:")
        return
    if not shown.normalized:
        st.caption("Not loaded: showing config.pbtxt as written, not Triton's normalized config.")
    tabs = st.tabs(["Inputs / outputs", "Config (JSON)", "Config (pbtxt)", "Statistics"]
                   + (["Ensemble graph"] if config.platform == ensemble.ENSEMBLE else []))
    tabs[0].dataframe(pd.DataFrame(details.io_records(config)), hide_index=True, width="stretch")
    tabs[1].json(to_dict(config))
    tabs[2].code(to_pbtxt(config), language="protobuf")
    if stats:
        tabs[3].dataframe(pd.DataFrame(details.stats_records(stats)), hide_index=True, width="stretch")
    else:
        tabs[3].info("No statistics: the model is not loaded.")
    if len(tabs) > 4:
        graph = ensemble.ensemble_graph(config)
        tabs[4].graphviz_chart(ensemble.graph_dot(graph))
        tabs[4].caption("Steps: " + " → ".join(graph.steps))
