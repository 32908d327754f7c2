"""The Load test page's saved runs: one run's charts (throughput, latency percentiles, where
the time goes), the table of saved runs, and two of them compared side by side (A vs B,
geadmin.ops.bench.compare). The numbers come from geadmin.ops.bench.results; this module only
draws them."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from geadmin.errors import GeAdminError
from geadmin.ops.bench.compare import Pair, chosen_pair, partners
from geadmin.ops.bench.results import CONCURRENCY, BenchRun, compare, describe_load, sent_late_note
from pages.ui import keys, outside_text
from pages.ui.charts import style
from pages.ui.outside_text import defused

WIDE_CHART_PX = 1000  # a chart across the page: its legend fits in fewer rows
STAGES = (("client_ms", "client send + recv"), ("network_ms", "network + server send/recv"),
          ("queue_ms", "server queue"), ("compute_input_ms", "compute input"),
          ("compute_infer_ms", "compute infer"), ("compute_output_ms", "compute output"))


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
    if run.cut_short:  # its error names the load it stopped at and the next step
        st.error(f"Cut short after {len(run.points)} point(s), which are kept below: "  # perf_analyzer's
                 f"{outside_text.text(run.cut_short)}", icon=":material/error:")  # words quote the server
    late = sent_late_note(run)
    if late:
        st.warning(late)
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
             "mode": r.mode, "loads": ", ".join(f"{p.load:g}" for p in r.points)
             + (" (cut short)" if r.cut_short else ""),
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
        st.warning(defused(str(exc)))
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
    """Pickers for A and B, defaulting to the two latest comparable runs (geadmin.ops.bench.compare);
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
