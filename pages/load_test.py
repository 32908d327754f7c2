"""Load test: perf_analyzer against a READY model at chosen concurrencies or request rates,
with the playground's input (random, zeros, ones — or exactly the request the Playground sent
last); throughput, latency percentiles and the client / queue / compute breakdown as charts;
saved runs side by side (e.g. dynamic batching on vs off).

A run goes on in a background thread while the page shows its progress and a Cancel button
(perf_analyzer is killed, nothing is saved); the page refreshes in place until it ends.
Everything but the widgets and the charts is geadmin.ops.bench (the same as `geadmin bench`).
Saved runs come from the workspace database: they stay visible while Triton is down."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.domain import ModelState, Transport
from geadmin.errors import BenchCancelledError, GeAdminError
from geadmin.ops.actions import next_step
from geadmin.ops.bench import BenchSettings, load_test, parse_loads
from geadmin.ops.bench_compare import Pair, chosen_pair, partners
from geadmin.ops.bench_results import (
    CONCURRENCY,
    REQUEST_RATE,
    BenchRun,
    compare,
    describe_load,
    list_runs,
    load_run,
)
from geadmin.ops.infer import InferRequest
from geadmin.ops.infer_inputs import InputSource, SourceKind
from geadmin.stack.target import Target
from geadmin.triton.client import TritonClient
from pages.ui import access, keys
from pages.ui.charts import style
from pages.ui.context import client_for, selected_target
from pages.ui.links import preselect
from pages.ui.tensors import Sent

INDEX_TTL_S = 5
MODES = {"Concurrency": CONCURRENCY, "Request rate": REQUEST_RATE}
PROTOCOLS = {"HTTP": Transport.HTTP, "gRPC": Transport.GRPC}
TENSORS = {"On the wire": "none", "Shared memory": "system"}  # perf_analyzer --shared-memory
SOURCES = (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES)
PLAYGROUND = "the Playground's last request"
PROGRESS_S = 1.0
WIDE_CHART_PX = 1000  # a chart across the page: its legend fits in fewer rows


@dataclass
class Running:
    """A load test going on in its thread; the thread writes the progress fields, the page reads them."""

    model: str
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    done: int = 0
    total: int = 0
    text: str = "starting perf_analyzer"
    run_id: int | None = None
    error: str | None = None
    cancelled: str | None = None  # the user's own stop: said calmly, not as an error

    @property
    def finished(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()
STAGES = (("client_ms", "client send + recv"), ("network_ms", "network + server send/recv"),
          ("queue_ms", "server queue"), ("compute_input_ms", "compute input"),
          ("compute_infer_ms", "compute infer"), ("compute_output_ms", "compute output"))


@st.cache_data(ttl=INDEX_TTL_S, show_spinner=False)
def ready_models(server: str, url: str, _client: TritonClient) -> list[str]:
    """Cached per configured server (name and URL); `_client` is that server's, not hashed."""
    index = _client.repository_index()
    return sorted({e.name for e in index if e.state is ModelState.READY})


def render() -> None:
    st.title("Load test")
    state = running()
    if state is not None and state.finished:  # ended between two refreshes
        finish(state)
    target = selected_target()
    url = target.spec.url
    try:
        ready = ready_models(target.spec.name, url, client_for(target))
    except GeAdminError as exc:
        ready = []
        st.error(f"{exc}\n\n**Next step:** {next_step(exc)}. Saved runs are below.", icon=":material/error:")
    if ready:
        model_col, mode_col, loads_col = st.columns([3, 2, 2])
        preselect(keys.LOAD_TEST_MODEL, ready)  # a deep link's model
        model = model_col.selectbox("Model", ready, key=keys.LOAD_TEST_MODEL)
        mode = MODES[mode_col.radio("Load", list(MODES), horizontal=True, key=keys.LOAD_TEST_MODE)]
        loads_text = loads_col.text_input("Concurrencies" if mode == CONCURRENCY else "Request rates (/s)",
                                          value="1,4,16", key=keys.LOAD_TEST_LOADS)
        protocol_col, source_col, seed_col, batch_col, interval_col, stable_col = st.columns(
            [2, 2, 1, 1, 2, 2])
        with protocol_col:
            transport = PROTOCOLS[st.radio("Protocol", list(PROTOCOLS), horizontal=True,
                                           key=keys.LOAD_TEST_PROTOCOL)]
            bench_url = endpoint(target, transport)
        sent = playground_request(target.spec.name, model)
        choices: list[SourceKind | str] = [*SOURCES, *([PLAYGROUND] if sent is not None else [])]
        source = source_col.selectbox("Input data (every input)", choices, key=keys.LOAD_TEST_SOURCE,
                                      format_func=lambda s: s if isinstance(s, str) else s.value,
                                      help="built from the model's metadata as the Playground builds it, or "
                                      "the tensors the Playground sent to this model last")
        seed = int(seed_col.number_input("Seed", min_value=0, value=0, key=keys.LOAD_TEST_SEED))
        batch = int(batch_col.number_input("Batch", min_value=1, value=1, key=keys.LOAD_TEST_BATCH,
                                           disabled=source == PLAYGROUND,
                                           help="the Playground's request keeps its own batch"))
        interval = int(interval_col.number_input("Window (ms)", min_value=100, value=5000, step=500,
                                                 key=keys.LOAD_TEST_INTERVAL,
                                                 help="perf_analyzer's measurement interval"))
        stability = float(stable_col.number_input("Stability (%)", min_value=1, max_value=100, value=10,
                                                  key=keys.LOAD_TEST_STABILITY,
                                                  help="how far 3 windows in a row may differ to count "
                                                  "as stable; raise it on a busy machine"))
        label_col, tensors_col = st.columns([3, 2])
        label = label_col.text_input("Label", key=keys.LOAD_TEST_LABEL,
                                     placeholder="e.g. dynamic batching on")
        shared_memory = TENSORS[tensors_col.radio(
            "Tensors", list(TENSORS), horizontal=True, key=keys.LOAD_TEST_TENSORS,
            help="in shared memory no tensor travels on the wire, so a large one measures the server; "
                 "perf_analyzer and Triton must share /dev/shm (one host)")]
        enabled, why = access.allowed(GuardedAction.BENCH)
        busy = running() is not None
        if st.button("Run", type="primary", key=keys.LOAD_TEST_RUN, disabled=not enabled or busy,
                     help=why or ("a load test is running" if busy else None), icon=":material/speed:"):
            request = sent.request if source == PLAYGROUND and sent is not None else None
            kind = InputSource(source) if isinstance(source, SourceKind) else InputSource(SourceKind.RANDOM)
            start_load_test(target, model, mode, loads_text, bench_url, kind, request, seed,
                            batch, interval, stability, label, shared_memory)
            if running() is not None:
                st.rerun()  # drawn again as running: Run disabled, progress and Cancel shown
    if running() is not None:
        progress_panel()
    error = st.session_state.pop(keys.LOAD_TEST_ERROR, None)
    if error:
        st.error(error, icon=":material/error:")
    notice = st.session_state.pop(keys.LOAD_TEST_NOTICE, None)
    if notice:
        st.info(notice, icon=":material/cancel:")
    try:
        runs = list_runs()
        last = st.session_state.get(keys.LOAD_TEST_LAST)
        if last is not None:
            show_run(load_run(int(last)))
    except GeAdminError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    saved_runs(runs)


def endpoint(target: Target, transport: Transport) -> str:
    """The configured server's endpoint for `transport` (geadmin.stack.target.server_urls): no
    free-text address, so a load test only ever targets a configured server."""
    urls = target.urls()
    chosen = urls.url(transport)
    st.caption(f"`{chosen}`" + (f" — from GEADMIN_{transport.name}_PORT on the server's host: set "
                                f"{transport.value}_url in the servers file if it listens elsewhere"
                                if urls.is_guess(transport) else ""))
    return chosen


def playground_request(server: str, model: str) -> Sent | None:
    sent = st.session_state.get(keys.PLAYGROUND_SENT)
    return sent if isinstance(sent, Sent) and sent.server == server and sent.model == model else None


def running() -> Running | None:
    found = st.session_state.get(keys.LOAD_TEST_RUNNING)
    return found if isinstance(found, Running) else None


def start_load_test(target: Target, model: str, mode: str, loads_text: str, bench_url: str,
                    source: InputSource, request: InferRequest | None, seed: int, batch: int,
                    interval_ms: int, stability: float, label: str, shared_memory: str = "none") -> None:
    """Check the loads, then run the test in a thread; `progress_panel` follows it."""
    try:
        loads = parse_loads(loads_text, mode)
        settings = BenchSettings(model, bench_url, mode, loads, measurement_interval_ms=interval_ms,
                                 stability_percentage=stability, batch_size=batch, seed=seed,
                                 shared_memory=shared_memory,
                                 inputs={"*": "playground" if request is not None else source.kind.value})
    except GeAdminError as exc:
        st.session_state[keys.LOAD_TEST_ERROR] = (f"{exc}.\n\n**Fix:** change the loads or the window "
                                                  "(e.g. concurrencies 1,4,16), then Run again.")
        return
    auth = access.auth_for(GuardedAction.BENCH, model=model, server=bench_url)
    client = client_for(target)
    state = Running(model, total=len(loads))

    def progress(done: int, total: int, text: str) -> None:
        state.done, state.total, state.text = done, total, text

    def work() -> None:
        try:
            run = load_test(client, settings, default=source, request=request, progress=progress,
                            cancel=state.cancel, auth=auth, label=label)
        except BenchCancelledError:
            state.cancelled = (f"Load test of {model} cancelled: perf_analyzer was stopped and nothing was "
                               "saved.")
        except GeAdminError as exc:
            state.error = f"{exc}\n\n**Next step:** {next_step(exc)}."
        else:
            state.run_id = run.id

    state.thread = threading.Thread(target=work, name=f"load-test-{model}", daemon=True)
    st.session_state[keys.LOAD_TEST_RUNNING] = state
    state.thread.start()


@st.fragment(run_every=PROGRESS_S)
def progress_panel() -> None:
    """The running test's progress and its Cancel button; when it ends, the whole page reruns
    to show the result."""
    state = running()
    if state is None:
        return
    if state.finished:
        finish(state)
        st.rerun()
    fraction = state.done / state.total if state.total else 0.0
    st.progress(fraction, text=f"{state.model}: {state.done} of {state.total or '?'} points — {state.text}")
    if state.cancel.is_set():
        st.caption("Cancelling: stopping perf_analyzer…")
    elif st.button("Cancel", key=keys.LOAD_TEST_CANCEL, icon=":material/cancel:"):
        state.cancel.set()
        st.caption("Cancelling: stopping perf_analyzer…")


def finish(state: Running) -> None:
    del st.session_state[keys.LOAD_TEST_RUNNING]
    if state.cancelled:
        st.session_state[keys.LOAD_TEST_NOTICE] = state.cancelled
    elif state.error:
        st.session_state[keys.LOAD_TEST_ERROR] = state.error
    elif state.run_id is not None:
        st.session_state[keys.LOAD_TEST_LAST] = state.run_id


# -- charts ----------------------------------------------------------------------------------
def _axis(mode: str) -> str:
    return "concurrency" if mode == CONCURRENCY else "request rate (/s)"


def throughput_chart(runs: Sequence[BenchRun], names: Sequence[str] = ()) -> go.Figure:
    """`names`: each run's legend name (e.g. "A #12"); one run needs none."""
    figure = go.Figure()
    for run, name in zip(runs, names or [f"#{r.id}" for r in runs], strict=True):
        figure.add_scatter(x=[p.load for p in run.points], y=[p.throughput_per_s for p in run.points],
                           mode="lines+markers", name=name)
    return style(figure, title="Throughput", x_title=_axis(runs[0].mode), y_title="inferences/s")


def latency_chart(runs: Sequence[BenchRun], names: Sequence[str] = ()) -> go.Figure:
    figure = go.Figure()
    labels = names or [""] * len(runs)
    for run, name in zip(runs, labels, strict=True):
        for column, dash in (("p50_ms", "dot"), ("p90_ms", "dash"), ("p99_ms", "solid")):
            figure.add_scatter(x=[p.load for p in run.points], y=[getattr(p, column) for p in run.points],
                               mode="lines+markers", line={"dash": dash}, name=f"{column[:3]} {name}".strip())
    return style(figure, title="Latency p50 / p90 / p99", x_title=_axis(runs[0].mode), y_title="ms")


def breakdown_chart(run: BenchRun) -> go.Figure:
    figure = go.Figure()
    loads = [describe_load(run.mode, p.load) for p in run.points]
    for column, name in STAGES:
        figure.add_bar(x=loads, y=[getattr(p, column) for p in run.points], name=name)
    figure.update_layout(barmode="stack")
    return style(figure, title=f"Where the time goes — run #{run.id}", y_title="ms", width_px=WIDE_CHART_PX)


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
    pair = comparison(runs)
    if pair is None:
        st.caption("Nothing to compare: the saved runs are each of another kind (concurrency or request "
                   "rate) — run a second one of the same kind.")
        return
    a, b = pair.a, pair.b
    try:
        result = compare(a, b)
    except GeAdminError as exc:
        st.warning(str(exc))
        return
    name_a, name_b = pair.names
    st.markdown(f"**A vs B:** A has {result.headline()}.")
    left, right = st.columns(2)
    left.plotly_chart(throughput_chart([a, b], pair.names),
                      key=f"{keys.LOAD_TEST_CHART_PREFIX}compare_throughput")
    right.plotly_chart(latency_chart([a, b], pair.names), key=f"{keys.LOAD_TEST_CHART_PREFIX}compare_latency")
    st.caption(f"{name_a}: {a.title()} · {name_b}: {b.title()}")
    st.dataframe(pd.DataFrame([{"load": describe_load(a.mode, r.load), "A infer/s": r.throughput_a,
                                "B infer/s": r.throughput_b, "throughput A/B": r.throughput_ratio,
                                "A p99 ms": r.p99_a_ms, "B p99 ms": r.p99_b_ms, "p99 A/B": r.p99_ratio}
                               for r in result.rows]), hide_index=True, width="stretch")


def comparison(runs: list[BenchRun]) -> Pair | None:
    """Pickers for A and B, defaulting to the two latest comparable runs (geadmin.ops.bench_compare);
    B's choices leave A out, and a choice that no longer fits falls back to the default."""
    state = st.session_state
    if state.get(keys.LOAD_TEST_COMPARE_NEWEST) != runs[0].id:  # a new run: back to the two latest
        state.pop(keys.LOAD_TEST_COMPARE_A, None)
        state.pop(keys.LOAD_TEST_COMPARE_B, None)
        state[keys.LOAD_TEST_COMPARE_NEWEST] = runs[0].id
    pair = chosen_pair(runs, state.get(keys.LOAD_TEST_COMPARE_A), state.get(keys.LOAD_TEST_COMPARE_B))
    if pair is None:
        return None
    for key, run_id in ((keys.LOAD_TEST_COMPARE_A, pair.a.id), (keys.LOAD_TEST_COMPARE_B, pair.b.id)):
        if state.get(key) != run_id:  # the default, or a choice that no longer fits, replaced
            state[key] = run_id
    by_id = {r.id: r for r in runs}
    with_partners = [r.id for r in runs if partners(runs, r)]
    a_col, b_col = st.columns(2)
    a = by_id[a_col.selectbox("Compare run A", with_partners, format_func=lambda i: by_id[i].title(),
                              key=keys.LOAD_TEST_COMPARE_A)]
    others = [r.id for r in partners(runs, a)]
    if state.get(keys.LOAD_TEST_COMPARE_B) not in others:
        state[keys.LOAD_TEST_COMPARE_B] = others[0]
    b = by_id[b_col.selectbox("with run B", others, format_func=lambda i: by_id[i].title(),
                              key=keys.LOAD_TEST_COMPARE_B)]
    return chosen_pair(runs, a.id, b.id)
