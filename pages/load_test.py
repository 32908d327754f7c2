"""Load test: perf_analyzer against a READY model at chosen concurrencies or request rates,
with the playground's input (random, zeros, ones — or exactly the request the Playground sent
last); throughput, latency percentiles and the client / queue / compute breakdown as charts;
saved runs side by side (e.g. dynamic batching on vs off).

A run goes on in the background (geadmin.ops.bench.background, a run of the registry
geadmin.ops.runs) while the page shows its progress and a Cancel button (perf_analyzer is
killed, nothing is saved); the page refreshes in place until it ends. Everything but the
widgets is geadmin.ops.bench.load_test (the same as `geadmin bench`); the charts are pages.ui.bench_view.
Saved runs come from the workspace database: they stay visible while Triton is down."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.domain import ModelState, Transport
from geadmin.errors import GeAdminError
from geadmin.ops import runs
from geadmin.ops.bench.background import outcome, start_load_test
from geadmin.ops.bench.load_test import BenchSettings, parse_loads
from geadmin.ops.bench.params import MAX_SENDER_THREADS
from geadmin.ops.bench.results import CONCURRENCY, REQUEST_RATE, BenchRun, list_runs, load_run
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.request import InferRequest
from geadmin.ops.models.actions import next_step
from geadmin.ops.runs import Run
from geadmin.stack.target import Target
from geadmin.triton.client import TritonClient
from pages.ui import access, keys, outside_text
from pages.ui.bench_view import saved_runs, show_run
from pages.ui.context import client_for, selected_target
from pages.ui.links import preselect
from pages.ui.outside_text import defused
from pages.ui.tensors import Sent

INDEX_TTL_S = 5
MODES = {"Concurrency": CONCURRENCY, "Request rate": REQUEST_RATE}
PROTOCOLS = {"HTTP": Transport.HTTP, "gRPC": Transport.GRPC}
TENSORS = {"On the wire": "none", "Shared memory": "system"}  # perf_analyzer --shared-memory
SOURCES = (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES)
PLAYGROUND = "the Playground's last request"
PROGRESS_S = 1.0


@st.cache_data(ttl=INDEX_TTL_S, show_spinner=False)
def ready_models(server: str, url: str, _client: TritonClient) -> list[str]:
    """Cached per configured server (name and URL); `_client` is that server's, not hashed."""
    index = _client.repository_index()
    return sorted({e.name for e in index if e.state is ModelState.READY})


def render() -> None:
    st.title("Load test")
    state = running()
    if state is not None and not state.running:  # ended between two refreshes
        finish(state)
    target = selected_target()
    url = target.spec.url
    try:
        ready = ready_models(target.spec.name, url, client_for(target))
    except GeAdminError as exc:
        ready = []
        st.error(f"{defused(str(exc))}\n\n**Next step:** {next_step(exc)}. Saved runs are below.",
                 icon=":material/error:")
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
        stability = float(stable_col.number_input("Stability (%)", min_value=0, max_value=100, value=10,
                                                  key=keys.LOAD_TEST_STABILITY,
                                                  help="how far 3 windows in a row may differ to count "
                                                  "as stable; raise it on a busy machine. 0: no gate, "
                                                  "the first three windows as measured, noise and all"))
        label_col, tensors_col, threads_col = st.columns([3, 2, 1])
        label = label_col.text_input("Label", key=keys.LOAD_TEST_LABEL,
                                     placeholder="e.g. dynamic batching on")
        shared_memory = TENSORS[tensors_col.radio(
            "Tensors", list(TENSORS), horizontal=True, key=keys.LOAD_TEST_TENSORS,
            help="in shared memory no tensor travels on the wire, so a large one measures the server; "
                 "perf_analyzer and Triton must share /dev/shm (one host)")]
        threads = int(threads_col.number_input(
            "Sending threads", min_value=0, max_value=MAX_SENDER_THREADS, value=0,
            key=keys.LOAD_TEST_THREADS, disabled=mode != REQUEST_RATE,
            help="request rate: perf_analyzer's sending threads, the requests it keeps in flight; 0: its "
                 "own default, 4 — a rate times the model's latency above the threads is sent late"))
        enabled, why = access.allowed(GuardedAction.BENCH)
        busy = running() is not None
        if st.button("Run", type="primary", key=keys.LOAD_TEST_RUN, disabled=not enabled or busy,
                     help=why or ("a load test is running" if busy else None), icon=":material/speed:"):
            request = sent.request if source == PLAYGROUND and sent is not None else None
            kind = InputSource(source) if isinstance(source, SourceKind) else InputSource(SourceKind.RANDOM)
            start(target, LoadTestForm(model, mode, loads_text, bench_url, kind, request, seed, batch,
                                       interval, stability, label, shared_memory,
                                       threads if mode == REQUEST_RATE and threads else None))
            if running() is not None:
                st.rerun()  # drawn again as running: Run disabled, progress and Cancel shown
    if running() is not None:
        progress_panel()
    failed = st.session_state.pop(keys.LOAD_TEST_ERROR, None)
    if failed:
        reason, next_text = failed  # the reason quotes perf_analyzer and the server: text, never markdown
        st.error(f"{outside_text.text(reason)}\n\n**Next step:** {next_text}", icon=":material/error:")
    warning = st.session_state.pop(keys.LOAD_TEST_WARNING, None)
    if warning:
        st.warning(warning, icon=":material/warning:")
    notice = st.session_state.pop(keys.LOAD_TEST_NOTICE, None)
    if notice:
        st.info(notice, icon=":material/cancel:")
    try:
        runs = list_runs()
        last = st.session_state.get(keys.LOAD_TEST_LAST)
        if last is not None:
            show_run(load_run(int(last)))
    except GeAdminError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
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


def running() -> Run[BenchRun] | None:
    """This session's load test while it runs (or until the page has said how it ended)."""
    found = st.session_state.get(keys.LOAD_TEST_RUNNING)
    return found if isinstance(found, Run) else None


@dataclass(frozen=True)
class LoadTestForm:
    """What the form asked for, as the page read it."""

    model: str
    mode: str
    loads_text: str
    bench_url: str
    source: InputSource
    request: InferRequest | None  # the Playground's last request, when that is the input
    seed: int
    batch: int
    interval_ms: int
    stability: float
    label: str
    shared_memory: str
    max_threads: int | None  # request rate only; None: perf_analyzer's own default

    def settings(self) -> BenchSettings:
        """The load test's settings (InvalidArgumentError / BenchSettingsError for bad loads)."""
        source = "playground" if self.request is not None else self.source.kind.value
        return BenchSettings(self.model, self.bench_url, self.mode, parse_loads(self.loads_text, self.mode),
                             measurement_interval_ms=self.interval_ms, stability_percentage=self.stability,
                             batch_size=self.batch, seed=self.seed, shared_memory=self.shared_memory,
                             max_threads=self.max_threads, inputs={"*": source})


def start(target: Target, form: LoadTestForm) -> None:
    """Check the loads, then start the test in the background; `progress_panel` follows it."""
    try:
        settings = form.settings()
    except GeAdminError as exc:
        st.session_state[keys.LOAD_TEST_ERROR] = (f"{exc}.", "change the loads (e.g. 1,4,16) or the window, "
                                                  "then Run again.")
        return
    try:
        auth = access.auth_for(GuardedAction.BENCH, model=form.model, server=form.bench_url)
        run = start_load_test(client_for(target), settings, default=form.source, request=form.request,
                              label=form.label, auth=auth)
    except GeAdminError as exc:  # another run on this server, no right to run, no audit row
        st.session_state[keys.LOAD_TEST_ERROR] = (str(exc), f"{next_step(exc)}.")
        return
    st.session_state[keys.LOAD_TEST_RUNNING] = run


@st.fragment(run_every=PROGRESS_S)
def progress_panel() -> None:
    """The running test's progress and its Cancel button; when it ends, the whole page reruns
    to show the result."""
    run = running()
    if run is None:
        return
    if not run.running:
        finish(run)
        st.rerun()
    status = run.status
    st.progress(status.fraction, text=f"{run.subject}: {status.done} of {status.total or '?'} points — "
                                      f"{status.text}")
    if run.aborted.is_set():
        st.caption("Cancelling: stopping perf_analyzer…")
    elif st.button("Cancel", key=keys.LOAD_TEST_CANCEL, icon=":material/cancel:"):
        try:  # audited, as the signed-in user
            runs.steer(run, "abort", access.auth_for(GuardedAction.BENCH, model=run.subject, server=run.key))
            st.caption("Cancelling: stopping perf_analyzer…")
        except GeAdminError as exc:
            st.error(defused(str(exc)), icon=":material/error:")


def finish(run: Run[BenchRun]) -> None:
    del st.session_state[keys.LOAD_TEST_RUNNING]
    said = outcome(run)
    if said.warning:
        st.session_state[keys.LOAD_TEST_WARNING] = said.warning
    if said.notice:
        st.session_state[keys.LOAD_TEST_NOTICE] = said.notice
    elif said.error:
        st.session_state[keys.LOAD_TEST_ERROR] = (said.error, f"{said.next_step}.")
    elif said.saved_id is not None:
        st.session_state[keys.LOAD_TEST_LAST] = said.saved_id
