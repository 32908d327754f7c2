"""Models: every model with its state; load / unload / reload; details and ensemble graphs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from geadmin import models
from geadmin.errors import GeAdminError
from geadmin.models import Action, ModelRow
from geadmin.triton import ModelState
from pages.ui import keys
from pages.ui.context import client_for, log_source_for, selected_client, selected_server

CACHE_TTL_S = 5


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def read_rows(url: str, admin_key: str | None) -> list[ModelRow]:
    rows = models.collect_rows(client_for(url, admin_key), models.repository_from_env())
    return models.with_log_reasons(rows, log_source_for(url))


def show_error(error: GeAdminError) -> None:
    st.error(f"{error}\n\n**Next step:** {models.next_step(error)}", icon=":material/error:")


def render() -> None:
    st.title("Models")
    spec = selected_server()
    last_good: dict[str, list[ModelRow]] = st.session_state.setdefault(keys.MODELS_LAST_GOOD, {})
    fresh = True
    try:
        rows = read_rows(spec.url, spec.admin_key)
        last_good[spec.name] = rows
    except GeAdminError as exc:
        fresh = False
        show_error(exc)
        wait_for_recovery(spec.url, spec.admin_key)
        if spec.name not in last_good:
            return
        rows = last_good[spec.name]
        st.warning("Showing the last model list received; actions are disabled until Triton answers.")
    show_results()
    shown = model_table(rows)
    if fresh:
        actions(shown)
        detail(rows)


@st.fragment(run_every=CACHE_TTL_S)
def wait_for_recovery(url: str, admin_key: str | None) -> None:
    """While Triton is down, look every few seconds; reload the page when it answers again."""
    try:
        client_for(url, admin_key).is_live()
    except GeAdminError:
        return
    st.rerun()


def model_table(rows: list[ModelRow]) -> list[ModelRow]:
    search_col, state_col = st.columns([2, 1])
    search = search_col.text_input("Search name or reason", key=keys.MODELS_SEARCH)
    states = state_col.multiselect("State", [s.value for s in ModelState], key=keys.MODELS_STATES)
    shown = models.filter_rows(rows, search, [ModelState(s) for s in states])
    counts = ", ".join(f"{sum(r.state is s for r in rows)} {s.value}" for s in ModelState
                       if any(r.state is s for r in rows))
    st.caption(f"{len(shown)} of {len(rows)} models · {counts}")
    if shown:
        st.dataframe(pd.DataFrame([r.record() for r in shown]), hide_index=True, width="stretch")
    else:
        st.info("No model matches the search and state filter.")
    return shown


def actions(shown: list[ModelRow]) -> None:
    st.subheader("Actions")
    names_col, action_col, dep_col = st.columns([3, 1, 1])
    names = names_col.multiselect("Models", [r.name for r in shown], key=keys.MODELS_SELECTED,
                                  help="one model, or several for a bulk action")
    action = Action(action_col.selectbox("Action", [a.value for a in Action], key=keys.MODELS_ACTION))
    dependents = dep_col.checkbox("with dependents", key=keys.MODELS_DEPENDENTS,
                                  disabled=action is not Action.UNLOAD,
                                  help="also unload the models Triton loaded for an ensemble")
    server = selected_server().name
    pending = st.session_state.get(keys.MODELS_PENDING)
    if pending is not None and pending[0] != server:  # asked on another server: never apply here
        del st.session_state[keys.MODELS_PENDING]
        pending = None
    if st.button(f"{action.value.capitalize()}…", disabled=not names or pending is not None):
        st.session_state[keys.MODELS_PENDING] = (server, action.value, tuple(names), dependents)
        st.rerun()
    if pending is not None:
        confirm(*pending[1:])


def confirm(action_value: str, names: tuple[str, ...], dependents: bool) -> None:
    action = Action(action_value)
    extra = " and their dependents" if action is Action.UNLOAD and dependents else ""
    st.warning(f"{action.value.capitalize()} {len(names)} model(s){extra}: {', '.join(names)}?")
    yes, no = st.columns(2)
    if no.button("Cancel"):
        del st.session_state[keys.MODELS_PENDING]
        st.rerun()
    if yes.button(f"Confirm {action.value}", type="primary"):
        del st.session_state[keys.MODELS_PENDING]
        bar = st.progress(0.0, text="starting")

        def progress(done: int, total: int, name: str) -> None:
            text = f"{action.value} {done + 1}/{total}: {name}" if name else f"done {done}/{total}"
            bar.progress(done / total if total else 1.0, text=text)

        with st.spinner(f"{action.value} {len(names)} model(s)…"):
            results = models.run_action(selected_client(), action, names, dependents=dependents,
                                        log=log_source_for(selected_server().url),
                                        repository=models.repository_from_env(), progress=progress)
        st.session_state[keys.MODELS_RESULTS] = results
        read_rows.clear()  # the table must show the new states
        st.rerun()


def show_results() -> None:
    for result in st.session_state.pop(keys.MODELS_RESULTS, []):
        if result.ok:
            st.success(result.message, icon=":material/check_circle:")
            continue
        reason = result.explanation.reason if result.explanation else result.message
        next_step = models.next_step(result.error) if result.error else models.FIX_AND_RETRY
        st.error(f"**{result.action.value} {result.name} failed:** {reason}\n\n"
                 f"**Next step:** {next_step} Details below.", icon=":material/error:")
        with st.expander(f"Details for {result.name}"):
            st.code(result.message, language="text")


def detail(rows: list[ModelRow]) -> None:
    st.subheader("Model detail")
    names = [r.name for r in rows]
    if not names:
        return
    name = st.selectbox("Model", names, key=keys.MODELS_DETAIL)
    row = next(r for r in rows if r.name == name)
    client = selected_client()
    try:
        config = models.model_config(client, name, models.repository_from_env(), row.state)
        stats = client.model_statistics(name) if row.state is ModelState.READY else []
    except GeAdminError as exc:
        show_error(exc)
        return
    if config is None:
        st.info(f"{name} is not loaded and its config.pbtxt is not readable here "
                "(set GEADMIN_REPOSITORY to the served repository to see it).")
        return
    if row.state is not ModelState.READY:
        st.caption("Not loaded: showing config.pbtxt as written, not Triton's normalized config.")
    tabs = st.tabs(["Inputs / outputs", "Config (JSON)", "Config (pbtxt)", "Statistics"]
                   + (["Ensemble graph"] if config.platform == models.ENSEMBLE else []))
    tabs[0].dataframe(pd.DataFrame(models.io_records(config)), hide_index=True, width="stretch")
    tabs[1].json(models.config_json(config))
    tabs[2].code(models.config_pbtxt(config), language="protobuf")
    if stats:
        tabs[3].dataframe(pd.DataFrame(models.stats_records(stats)), hide_index=True, width="stretch")
    else:
        tabs[3].info("No statistics: the model is not loaded.")
    if len(tabs) > 4:
        graph = models.ensemble_graph(config)
        tabs[4].graphviz_chart(models.graph_dot(graph))
        tabs[4].caption("Steps: " + " → ".join(graph.steps))
