"""Tune: search a model's serving config on a trial copy (the live model untouched), see every
trial as a table and a throughput-vs-p99 chart, and apply the winner through the config
editor's safe apply. The search is geadmin.ops.tune.search (the same as `geadmin tune`); runs are
kept in the workspace database and stay visible while Triton is down. "Meet the objective" is
geadmin.ops.tune.objective (the same as `geadmin tune --objective`): the fewest instances that hold
the model's p99 objective at its recorded peak request rate."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.audit import parse_since
from geadmin.domain import ModelState
from geadmin.errors import GeAdminError
from geadmin.ops.tune.apply import apply_winner, winner_refusal
from geadmin.ops.tune.objective import objective_plan, tune_to_objective
from geadmin.ops.tune.outcome import TuneResult
from geadmin.ops.tune.results import list_runs
from geadmin.ops.tune.search import Progress, TuneSettings, tune
from geadmin.repository import store, trials
from geadmin.stack.target import Target
from geadmin.telemetry.history.reader import open_history
from pages.ui import access, keys
from pages.ui.charts import style
from pages.ui.context import client_for, selected_target
from pages.ui.errors import failure_of, show_failure
from pages.ui.links import preselect
from pages.ui.outside_text import defused


def render() -> None:
    st.title("Tune")
    st.caption("Finds max_batch_size, the preferred batch size, the queue delay and the instance count that "
               "give the most throughput under your limits. Every candidate runs as a trial copy beside the "
               "live model, which keeps serving unchanged; the copy is removed at the end.")
    target = selected_target()
    try:
        ready = sorted({e.name for e in client_for(target).repository_index()
                        if e.state is ModelState.READY and not trials.is_trial(target.repository, e.name)})
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Cannot list the models")
        ready = []
    if ready:
        goal = st.radio("Goal", GOALS, horizontal=True, key=keys.TUNE_GOAL)
        (objective_form if goal == GOALS[1] else tune_form)(target, ready)
    past_runs(target)


GOALS = ("Most throughput under limits", "Meet the objective at the recorded load")


def objective_form(target: Target, ready: list[str]) -> None:
    permitted, why_not = access.allowed(GuardedAction.TUNE)
    preselect(keys.TUNE_MODEL, ready)
    with st.form(keys.TUNE_FORM):
        model_col, since_col, inst_col, budget_col = st.columns([3, 1, 1, 1])
        model = model_col.selectbox("Model", ready, key=keys.TUNE_MODEL)
        since = since_col.text_input("History window", value="24h", help="the recorded load is read over "
                                     "this long (30m, 2h, 7d) from the sampler's history or Prometheus")
        instances = inst_col.number_input("Max instances", min_value=1, max_value=16, value=3)
        budget = budget_col.number_input("Budget (s)", min_value=10, max_value=3600, value=180)
        run = st.form_submit_button("Tune to the objective", type="primary", disabled=not permitted,
                                    help=why_not or "candidates measured at the recorded peak request rate")
    if not run:
        return
    repository = known_repository(target)
    if repository is None:
        return
    try:
        plan = objective_plan(model, history=open_history(), since=parse_since(since),
                              source=target.urls().metrics, max_instances=int(instances))
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Not tuned")
        return
    st.caption(f"Objective: {plan.objective.describe()}. Load replayed: {plan.load.describe()}")
    run_tuning(f"Tuning {model} to its objective…", model, "Not tuned", lambda progress: tune_to_objective(
        client_for(target), repository, plan, budget_s=float(budget), progress=progress,
        auth=access.auth_for(GuardedAction.TUNE, model=model, server=target.spec.url),
        admin_key=target.spec.admin_key, metrics_url=target.urls().metrics))


def tune_form(target: Target, ready: list[str]) -> None:
    permitted, why_not = access.allowed(GuardedAction.TUNE)
    preselect(keys.TUNE_MODEL, ready)
    with st.form(keys.TUNE_FORM):
        model_col, p99_col, thr_col, budget_col, conc_col = st.columns([3, 1, 1, 1, 1])
        model = model_col.selectbox("Model", ready, key=keys.TUNE_MODEL)
        p99 = p99_col.number_input("Max p99 (ms)", min_value=0.0, value=None, placeholder="no limit",
                                   help="empty: no latency limit")
        throughput = thr_col.number_input("Min inferences/s", min_value=0.0, value=None,
                                          placeholder="no minimum", help="empty: no minimum")
        budget = budget_col.number_input("Budget (s)", min_value=10, max_value=3600, value=120)
        concurrency = conc_col.number_input("Concurrency", min_value=1, max_value=256, value=16)
        run = st.form_submit_button("Tune", type="primary", disabled=not permitted, help=why_not or None)
    if not run:
        return
    repository = known_repository(target)
    if repository is None:
        return
    run_tuning(f"Tuning {model}…", model, "Tuning stopped", lambda progress: tune(
        client_for(target), repository, progress=progress,
        tune_settings=TuneSettings(model, p99 or None, throughput or None, float(budget), int(concurrency)),
        auth=access.auth_for(GuardedAction.TUNE, model=model, server=target.spec.url),
        admin_key=target.spec.admin_key, metrics_url=target.urls().metrics))


def run_tuning(label: str, model: str, stopped_title: str, work: Callable[[Progress], TuneResult]) -> None:
    """Runs `work` with its progress in a status box; the run it saved becomes the one shown."""
    try:
        with st.status(label, expanded=True) as status:
            result = work(lambda text: status.write(text))
            status.update(label=f"Tuned {model}: {result.headline()}", state="complete", expanded=False)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title=stopped_title)
        return
    st.session_state[keys.TUNE_RUN] = result.id


def past_runs(target: Target) -> None:
    try:
        runs = list_runs()
    except GeAdminError as exc:
        st.warning(f"Saved runs not read: {defused(str(exc))}")
        return
    if not runs:
        st.info("No tuning run yet.")
        return
    st.subheader("Runs")
    ids = [r["id"] for r in runs]
    if st.session_state.get(keys.TUNE_RUN) not in ids:
        st.session_state[keys.TUNE_RUN] = ids[0]
    chosen = st.selectbox("Run", ids, key=keys.TUNE_RUN,
                          format_func=lambda i: next(f"#{r['id']} {r['at']} {r['model']} on {r['server']}: "
                                                     f"{r['headline']}" for r in runs if r["id"] == i))
    show_run(target, next(r for r in runs if r["id"] == chosen))


def show_run(target: Target, run: dict[str, Any]) -> None:
    st.markdown(f"**{run['model']}** — {run['headline']} ({run['seconds']:.0f} s, by {run['who']})")
    p99, throughput = run["settings"].get("max_p99_ms"), run["settings"].get("min_throughput")
    if run.get("kind") == "objective":
        st.caption(f"Measured on {run['server']} at {run['rate_rps']:.3g} req/s · objective: "
                   f"{run['objective']['text']}")
    else:
        st.caption(f"Measured on {run['server']} · max p99: {f'{p99:g} ms' if p99 else 'no limit'} · "
                   f"min throughput: {f'{throughput:g}/s' if throughput else 'no minimum'}")
    for note in run["notes"]:
        st.caption(note)
    frame = pd.DataFrame([{**t, "queue delay (ms)": t["queue_delay_us"] / 1000} for t in run["trials"]])
    columns = ["phase", "max_batch_size", "queue delay (ms)", "instances", "throughput", "p50_ms", "p99_ms",
               "avg_batch", "ok", "error"]
    st.dataframe(frame[columns], hide_index=True, width="stretch")
    if run.get("kind") == "objective":
        st.plotly_chart(curve(run), key=f"tune_curve_{run['id']}")
    else:
        st.plotly_chart(pareto(run), key=f"tune_pareto_{run['id']}")
    if run["best"] and run["best_text"]:
        winner(target, run)


def pareto(run: dict[str, Any]) -> go.Figure:
    """Throughput against p99 for every measured trial; the front (no trial both faster and
    quicker) joined by a line; the winner marked."""
    measured = [t for t in run["trials"] if t["ok"] and t["throughput"] is not None]
    fig = go.Figure()
    labels = [f"max batch {t['max_batch_size']}, delay {t['queue_delay_us'] / 1000:g} ms, "
              f"{t['instances']} inst." for t in measured]
    fig.add_scatter(x=[t["p99_ms"] for t in measured], y=[t["throughput"] for t in measured], mode="markers",
                    name="trials", text=labels)
    front, best_so_far = [], -1.0
    for t in sorted(measured, key=lambda t: (t["p99_ms"], -t["throughput"])):
        if t["throughput"] > best_so_far:
            front.append(t)
            best_so_far = t["throughput"]
    fig.add_scatter(x=[t["p99_ms"] for t in front], y=[t["throughput"] for t in front], mode="lines",
                    name="Pareto front", line={"dash": "dot"})
    if run["best"]:
        fig.add_scatter(x=[run["best"]["p99_ms"]], y=[run["best"]["throughput"]], mode="markers",
                        name="winner", marker={"size": 14, "symbol": "star"})
    if run["settings"].get("max_p99_ms"):
        fig.add_vline(x=run["settings"]["max_p99_ms"], line={"dash": "dash"}, annotation_text="p99 limit")
    return style(fig, title="Throughput vs p99 per trial", y_title="inferences/s", x_title="p99 (ms)")


def curve(run: dict[str, Any]) -> go.Figure:
    """The winner's p99 against the request rate, with the objective and the recorded peak."""
    points = run["curve"]
    fig = go.Figure()
    fig.add_scatter(x=[p["rate_rps"] for p in points], y=[p["p99_ms"] for p in points], mode="lines+markers",
                    name="the winner's p99")
    if run["objective"]["p99_ms"]:
        fig.add_hline(y=run["objective"]["p99_ms"], line={"dash": "dash"}, annotation_text="p99 objective")
    fig.add_vline(x=run["rate_rps"], line={"dash": "dot"}, annotation_text="recorded peak")
    return style(fig, title="p99 vs request rate (the winner, measured)", y_title="p99 (ms)",
                 x_title="requests/s")


def winner(target: Target, run: dict[str, Any]) -> None:
    st.subheader("The winner against the live config")
    live_text, live_sha = "", ""
    if target.repository is not None:
        try:
            live = store.read_config(target.repository, run["model"])
            live_text, live_sha = live.text, live.sha256
        except GeAdminError as exc:
            st.warning(f"The live config file was not read: {defused(str(exc))}")
    changed = bool(live_sha and run.get("live_sha256") and live_sha != run["live_sha256"])
    if changed:
        st.warning("The config file changed since this run started: applying its winner is refused (it "
                   "would undo that change). Tune again.", icon=":material/warning:")
    diff = "".join(difflib.unified_diff(live_text.splitlines(keepends=True),
                                        run["best_text"].splitlines(keepends=True),
                                        "config.pbtxt (on disk)", "config.pbtxt (the winner)"))
    st.code(diff or "(the winner is the config on disk)", language="diff")
    permitted, why_not = access.allowed(GuardedAction.APPLY)
    if not diff or target.repository is None:
        return
    refusal = winner_refusal(run, target.spec.url) or ("the config file changed since this run started"
                                                       if changed else "")
    if refusal:
        st.info(f"Not applicable here: {refusal}.", icon=":material/block:")
    st.caption(f"Applies to {run['server']}, the server this run measured, and only to the config file "
               "the run started from.")
    if st.button("Apply the winner", type="primary", key=keys.TUNE_APPLY,
                 disabled=not permitted or bool(refusal),
                 help=why_not or refusal or "through the config editor's apply: validated, written "
                 "atomically, reloaded, rolled back if it does not load or answer; audited with this run"):
        with st.spinner(f"Applying to {run['model']}…"):
            try:
                result = apply_winner(client_for(target), target.repository, run,
                                      auth=access.auth_for(GuardedAction.APPLY, model=run["model"],
                                                           server=target.spec.url))
            except GeAdminError as exc:
                show_failure(failure_of(exc), title="Not applied")
                return
        (st.success if result.ok else st.error)(result.message)


def known_repository(target: Target) -> Path | None:
    """The trial copy is written into the model repository: without one, say so (None)."""
    if target.repository is None:
        st.error("The model repository is not known for this server (GEADMIN_REPOSITORY): the trial copy "
                 "is written there.", icon=":material/error:")
    return target.repository
