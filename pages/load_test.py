"""Load test: perf_analyzer against a READY model at chosen concurrencies or request rates,
with the playground's input; throughput, latency percentiles and the client / queue /
compute breakdown as charts; saved runs side by side (e.g. dynamic batching on vs off).

Everything but the widgets and the charts is geadmin.ops.bench (the same as `geadmin bench`).
Saved runs come from the workspace database: they stay visible while Triton is down."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from geadmin.access.roles import Action as Guarded
from geadmin.domain import ModelState, Transport
from geadmin.errors import GeAdminError
from geadmin.ops.actions import next_step
from geadmin.ops.bench import BenchSettings, load_test
from geadmin.ops.bench_results import (
    CONCURRENCY,
    REQUEST_RATE,
    BenchRun,
    compare,
    describe_load,
    list_runs,
    load_run,
)
from geadmin.ops.infer import transport_url
from geadmin.ops.infer_inputs import InputSource, SourceKind
from geadmin.stack.target import live_stack
from pages.ui import access, keys
from pages.ui.context import client_for, selected_target

INDEX_TTL_S = 5
MODES = {"Concurrency": CONCURRENCY, "Request rate": REQUEST_RATE}
PROTOCOLS = {"HTTP": Transport.HTTP, "gRPC": Transport.GRPC}
SOURCES = (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES)
STAGES = (("client_ms", "client send + recv"), ("network_ms", "network + server send/recv"),
          ("queue_ms", "server queue"), ("compute_input_ms", "compute input"),
          ("compute_infer_ms", "compute infer"), ("compute_output_ms", "compute output"))


@st.cache_data(ttl=INDEX_TTL_S, show_spinner=False)
def ready_models(url: str, admin_key: str | None) -> list[str]:
    index = client_for(url, admin_key).repository_index()
    return sorted({e.name for e in index if e.state is ModelState.READY})


def render() -> None:
    st.title("Load test")
    target = selected_target()
    url, admin_key = target.spec.url, target.spec.admin_key
    try:
        ready = ready_models(url, admin_key)
    except GeAdminError as exc:
        ready = []
        st.error(f"{exc}\n\n**Next step:** {next_step(exc)}. Saved runs are below.", icon=":material/error:")
    if ready:
        model_col, mode_col, loads_col = st.columns([3, 2, 2])
        model = model_col.selectbox("Model", ready, key=keys.LOAD_TEST_MODEL)
        mode = MODES[mode_col.radio("Load", list(MODES), horizontal=True, key=keys.LOAD_TEST_MODE)]
        loads_text = loads_col.text_input("Concurrencies" if mode == CONCURRENCY else "Request rates (/s)",
                                          value="1,4,16", key=keys.LOAD_TEST_LOADS)
        protocol_col, source_col, seed_col, batch_col, interval_col, stable_col = st.columns(
            [2, 2, 1, 1, 2, 2])
        with protocol_col:
            transport = PROTOCOLS[st.radio("Protocol", list(PROTOCOLS), horizontal=True,
                                           key=keys.LOAD_TEST_PROTOCOL)]
            bench_url = endpoint(target.spec.name, url, transport)
        source = source_col.selectbox("Input data (every input)", SOURCES, format_func=lambda s: s.value,
                                      key=keys.LOAD_TEST_SOURCE,
                                      help="built from the model's metadata as the Playground builds it")
        seed = int(seed_col.number_input("Seed", min_value=0, value=0, key=keys.LOAD_TEST_SEED))
        batch = int(batch_col.number_input("Batch", min_value=1, value=1, key=keys.LOAD_TEST_BATCH))
        interval = int(interval_col.number_input("Window (ms)", min_value=100, value=5000, step=500,
                                                 key=keys.LOAD_TEST_INTERVAL,
                                                 help="perf_analyzer's measurement interval"))
        stability = float(stable_col.number_input("Stability (%)", min_value=1, max_value=100, value=10,
                                                  key=keys.LOAD_TEST_STABILITY,
                                                  help="how far 3 windows in a row may differ to count "
                                                  "as stable; raise it on a busy machine"))
        label = st.text_input("Label", key=keys.LOAD_TEST_LABEL, placeholder="e.g. dynamic batching on")
        enabled, why = access.allowed(Guarded.BENCH)
        if st.button("Run", type="primary", key=keys.LOAD_TEST_RUN, disabled=not enabled, help=why or None,
                     icon=":material/speed:"):
            run_load_test(url, admin_key, model, mode, loads_text, bench_url, InputSource(source), seed,
                          batch, interval, stability, label)
    error = st.session_state.pop(keys.LOAD_TEST_ERROR, None)
    if error:
        st.error(error, icon=":material/error:")
    try:
        runs = list_runs()
        last = st.session_state.get(keys.LOAD_TEST_LAST)
        if last is not None:
            show_run(load_run(int(last)))
    except GeAdminError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    saved_runs(runs)


def endpoint(server: str, url: str, transport: Transport) -> str:
    stack = live_stack()
    known = [(stack.http_url, stack.grpc_url)] if stack is not None else []
    chosen, guessed = transport_url(url, transport, known)
    if guessed:
        return str(st.text_input(f"{transport.value} endpoint", value=chosen,
                                 key=f"{keys.LOAD_TEST_ENDPOINT_PREFIX}{server}.{transport.value}",
                                 help="guessed from Triton's default ports (HTTP 8000, gRPC 8001)"))
    st.caption(f"`{chosen}`")
    return chosen


def run_load_test(url: str, admin_key: str | None, model: str, mode: str, loads_text: str, bench_url: str,
                  source: InputSource, seed: int, batch: int, interval_ms: int, stability: float,
                  label: str) -> None:
    bar = st.progress(0.0, text="starting perf_analyzer")

    def progress(done: int, total: int, text: str) -> None:
        bar.progress(done / total if total else 0.0, text=f"{done} of {total} points — {text}")

    try:
        loads = tuple(float(v) for v in loads_text.split(",") if v.strip())
        settings = BenchSettings(model, bench_url, mode, loads, measurement_interval_ms=interval_ms,
                                 stability_percentage=stability, batch_size=batch, seed=seed,
                                 inputs={"*": source.kind.value})
        actor = access.actor_for(Guarded.BENCH, model=model, server=bench_url)
        run = load_test(client_for(url, admin_key), settings, default=source, progress=progress,
                        who=actor.name, label=label)
    except ValueError:
        st.session_state[keys.LOAD_TEST_ERROR] = (f"Loads must be numbers separated by commas, not "
                                                  f"{loads_text!r}.\n\n**Fix:** e.g. 1,4,16.")
    except GeAdminError as exc:
        st.session_state[keys.LOAD_TEST_ERROR] = f"{exc}\n\n**Next step:** {next_step(exc)}."
    else:
        st.session_state[keys.LOAD_TEST_LAST] = run.id
    bar.empty()


# -- charts ----------------------------------------------------------------------------------
def _axis(mode: str) -> str:
    return "concurrency" if mode == CONCURRENCY else "request rate (/s)"


def throughput_chart(runs: Sequence[BenchRun]) -> go.Figure:
    figure = go.Figure()
    for run in runs:
        figure.add_scatter(x=[p.load for p in run.points], y=[p.throughput_per_s for p in run.points],
                           mode="lines+markers", name=run.title())
    figure.update_layout(title="Throughput", xaxis_title=_axis(runs[0].mode), yaxis_title="inferences/s")
    return figure


def latency_chart(runs: Sequence[BenchRun]) -> go.Figure:
    figure = go.Figure()
    for run in runs:
        for field, dash in (("p50_ms", "dot"), ("p90_ms", "dash"), ("p99_ms", "solid")):
            figure.add_scatter(x=[p.load for p in run.points], y=[getattr(p, field) for p in run.points],
                               mode="lines+markers", line={"dash": dash},
                               name=f"{field[:3]} {run.title() if len(runs) > 1 else ''}".strip())
    figure.update_layout(title="Latency p50 / p90 / p99", xaxis_title=_axis(runs[0].mode), yaxis_title="ms")
    return figure


def breakdown_chart(run: BenchRun) -> go.Figure:
    figure = go.Figure()
    loads = [describe_load(run.mode, p.load) for p in run.points]
    for field, name in STAGES:
        figure.add_bar(x=loads, y=[getattr(p, field) for p in run.points], name=name)
    figure.update_layout(barmode="stack", title=f"Where the time goes — {run.title()}", yaxis_title="ms")
    return figure


def show_run(run: BenchRun) -> None:
    st.subheader(f"Run {run.title()}")
    left, right = st.columns(2)
    left.plotly_chart(throughput_chart([run]), key=f"{keys.LOAD_TEST_CHART_PREFIX}throughput.{run.id}")
    right.plotly_chart(latency_chart([run]), key=f"{keys.LOAD_TEST_CHART_PREFIX}latency.{run.id}")
    st.plotly_chart(breakdown_chart(run), key=f"{keys.LOAD_TEST_CHART_PREFIX}breakdown.{run.id}")


def saved_runs(runs: list[BenchRun]) -> None:
    st.subheader("Saved runs")
    if not runs:
        st.info("No load test is saved in this workspace yet: run one above, or `geadmin bench MODEL`.")
        return
    rows = [{"id": r.id, "at (UTC)": r.at.strftime("%Y-%m-%d %H:%M:%S"), "model": r.model, "label": r.label,
             "mode": r.mode, "loads": ", ".join(f"{p.load:g}" for p in r.points),
             "best infer/s": max((p.throughput_per_s for p in r.points), default=0.0), "who": r.who}
            for r in runs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if len(runs) < 2:
        return
    by_id = {r.id: r for r in runs}
    ids = list(by_id)
    a_col, b_col = st.columns(2)
    a = by_id[a_col.selectbox("Compare run A", ids, format_func=lambda i: by_id[i].title(),
                              key=keys.LOAD_TEST_COMPARE_A)]
    b = by_id[b_col.selectbox("with run B", ids, index=1, format_func=lambda i: by_id[i].title(),
                              key=keys.LOAD_TEST_COMPARE_B)]
    try:
        result = compare(a, b)
    except GeAdminError as exc:
        st.warning(str(exc))
        return
    st.markdown(f"**A vs B:** A has {result.headline()}.")
    left, right = st.columns(2)
    left.plotly_chart(throughput_chart([a, b]), key=f"{keys.LOAD_TEST_CHART_PREFIX}compare_throughput")
    right.plotly_chart(latency_chart([a, b]), key=f"{keys.LOAD_TEST_CHART_PREFIX}compare_latency")
    st.dataframe(pd.DataFrame([{"load": describe_load(a.mode, r.load), "A infer/s": r.throughput_a,
                                "B infer/s": r.throughput_b, "throughput A/B": r.throughput_ratio,
                                "A p99 ms": r.p99_a_ms, "B p99 ms": r.p99_b_ms, "p99 A/B": r.p99_ratio}
                               for r in result.rows]), hide_index=True, width="stretch")
