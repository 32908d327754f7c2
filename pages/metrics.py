"""Metrics: throughput, latency, queue vs compute, pending requests, batch size and failures
per model over time, from the sampler's history in the workspace (geadmin.telemetry.history.store) or,
with GEADMIN_PROMETHEUS_URL set, from Prometheus (geadmin.telemetry.history.prometheus), with
the audit log's changes (loads, unloads, applies, rollbacks, Triton restarts) as vertical
markers on every chart. Gaps (Triton down or restarted) are drawn as gaps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone

import plotly.graph_objects as go
import streamlit as st
from plotly.colors import qualitative

from geadmin import settings
from geadmin.errors import ConfigError, GeAdminError
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.prometheus import UNSET_HINT
from geadmin.telemetry.history.reader import HistoryReader, open_history
from geadmin.telemetry.history.store import Marker, Overview, Series
from pages.ui import keys
from pages.ui.charts import style
from pages.ui.fleet_history_view import by_server, source_label
from pages.ui.links import preselect
from pages.ui.objectives_view import current_objectives, objective_form, objective_lines
from pages.ui.outside_text import defused
from pages.ui.telemetry import DEFAULT_RANGE, RANGES_MIN, triton_metrics_url

# Six plotly charts redrawn every 2 s kept a loaded browser from ever drawing them all (two CI
# runs: a chart still missing after 30 s); every 5 s, or the sampler's interval if longer.
LIVE_REFRESH_MIN_S = 5.0
DEFAULT_MODELS = 6
STAGES = (("avg_queue_ms", "queue"), ("avg_compute_input_ms", "compute input"),
          ("avg_compute_infer_ms", "compute infer"), ("avg_compute_output_ms", "compute output"))
QUANTILES = (("p50_ms", "p50", "dot"), ("p90_ms", "p90", "dash"), ("p99_ms", "p99", "longdash"))
CHARTS = (("inferences_per_s", "Throughput", "inferences/s"),
          ("pending_requests", "Pending requests", "requests"),
          ("avg_batch_size", "Batch size", "inferences per execution"),
          ("failures_per_s", "Failures", "failed requests/s"))
XRange = tuple[datetime, datetime]


def render() -> None:
    st.title("Metrics")
    interval_s = sample_interval_s()
    try:
        reader = open_history()
        known = reader.sources()
    except GeAdminError as exc:
        st.error(f"Cannot read the telemetry history: {defused(str(exc))}")
        return
    if not known and settings.PROMETHEUS_URL.is_set():
        st.info(f"{reader.label} has no Triton model metrics from the last day: add a scrape job for "
                f"Triton's /metrics (port 8002), or {UNSET_HINT}.")
        return
    if not known:
        st.info(f"No telemetry history yet. The sampler records Triton's metrics every {interval_s:g} s "
                "while `geadmin up` runs, into this workspace's database; for a Triton started another way, "
                "run `geadmin sampler` (with `--metrics-url URL` when it is not on 127.0.0.1:8002). "
                "Charts appear here after its first two samples.")
        return
    overview = pick_source(known)
    live = st.fragment(live_charts, run_every=max(LIVE_REFRESH_MIN_S, interval_s))
    live(overview.source, overview.models, reader)
    with st.expander("Objectives (p99 target, error budget)"):
        objective_form(overview.models)


def sample_interval_s() -> float:
    try:
        return settings.SAMPLE_INTERVAL_S.get()
    except ConfigError:
        return float(settings.SAMPLE_INTERVAL_S.default or 2)


def pick_source(known: list[Overview]) -> Overview:
    """The selected server's history when there is one, else the most recently sampled."""
    urls = [o.source for o in known]
    if st.session_state.get(keys.METRICS_SOURCE) not in urls:
        try:
            wanted = triton_metrics_url()[0]
        except GeAdminError:
            wanted = ""
        st.session_state[keys.METRICS_SOURCE] = wanted if wanted in urls else urls[0]
    if len(urls) > 1:
        st.selectbox("Sampled server", urls, key=keys.METRICS_SOURCE, format_func=source_label)
    return next(o for o in known if o.source == st.session_state[keys.METRICS_SOURCE])


def live_charts(source: str, known: Sequence[str], reader: HistoryReader) -> None:
    """Redrawn in place every sampler interval (LIVE_REFRESH_MIN_S at the most often), and at once
    when the models or the range change (their widgets live in this fragment): the history's
    series and the audit's markers."""
    left, right = st.columns([3, 1])
    preselect(keys.METRICS_MODELS, known, many=True)  # a deep link's model
    chosen = st.session_state.setdefault(keys.METRICS_MODELS, list(known[:DEFAULT_MODELS]))
    if any(m not in known for m in chosen):  # another source, or a model gone
        st.session_state[keys.METRICS_MODELS] = [m for m in chosen if m in known]
    models = left.multiselect("Models", list(known), key=keys.METRICS_MODELS)
    st.session_state.setdefault(keys.METRICS_RANGE, DEFAULT_RANGE)
    label = right.selectbox("Time range", list(RANGES_MIN), key=keys.METRICS_RANGE)
    minutes = RANGES_MIN[label]
    since = datetime.now(timezone.utc) - timedelta(minutes=minutes)
    try:
        series = reader.model_series(source, since, models=list(models)) if models else []
        markers = history.change_markers(since)
        latest = next((o for o in reader.sources() if o.source == source), None)
    except GeAdminError as exc:
        st.error(f"Cannot read the telemetry history: {defused(str(exc))}")
        return
    if latest is not None and latest.down:
        st.warning(f"The latest sample failed — {latest.down}. The charts show a gap until Triton answers "
                   "again.")
    quiet = history.silence(latest, datetime.now(timezone.utc), sample_interval_s()) if latest else ""
    if quiet:
        st.warning(f"Stale: {quiet}.", icon=":material/history:")
    if not series:
        st.info(f"No samples for these models in the last {minutes} minutes." if models else
                "Choose one or more models.")
        return
    last = max(s.times[-1] for s in series if s.times)
    st.caption(f"{len(series)} model{'s' if len(series) > 1 else ''}, `{source}` from {reader.label}; latest "
               f"sample {local(last):%H:%M:%S}; {len(markers)} changes in range (dotted lines; hover for "
               "who and what). Local time.")
    x_range = (local(since), local(datetime.now(timezone.utc)))
    figures = {column: lines(series, column, title, unit, markers, x_range) for column, title, unit in CHARTS}
    throughput = figures.pop("inferences_per_s")
    found = current_objectives()
    targets = {m: found[m].p99_ms for m in models if m in found and found[m].p99_ms is not None}
    figures = {"inferences_per_s": throughput, "latency": latency(series, markers, x_range, targets),
               **figures}
    figures.update({f"breakdown_{s.name}": breakdown(s, markers, x_range) for s in series})
    objective_lines(source, models, found)
    columns = st.columns(2)
    for i, (name, figure) in enumerate(figures.items()):
        figure.update_layout(uirevision=label)  # a new range resets a zoomed view
        columns[i % 2].plotly_chart(figure, key=f"metrics_chart_{name}_{minutes}")
    by_server(source, models, since, x_range)  # a fleet source: each server apart


def local(moment: datetime) -> datetime:
    return moment.astimezone()


def times(s: Series) -> list[datetime]:
    return [local(t) for t in s.times]


def lines(series: Sequence[Series], column: str, title: str, unit: str, markers: Sequence[Marker],
          x_range: XRange) -> go.Figure:
    hover = reasons if column == "failures_per_s" else lambda s: None
    fig = go.Figure([go.Scatter(x=times(s), y=list(s.column(column)), name=s.name, mode="lines",
                                connectgaps=False, hovertext=hover(s)) for s in series])
    return styled(fig, title, unit, markers, x_range)


def reasons(s: Series) -> list[str] | None:
    """Per point, the failed requests of the window by Triton's reason label."""
    return [", ".join(f"{reason}: {count:g}" for reason, count in sorted(by_reason.items()))
            for by_reason in s.failures_by_reason]


def latency(series: Sequence[Series], markers: Sequence[Marker], x_range: XRange,
            targets: Mapping[str, float] | None = None) -> go.Figure:
    """One colour and one legend entry per model (its average, solid); the quantiles dotted and
    dashed in the model's colour, told apart by three grey legend entries — not 4 per model.
    A model's p99 objective (`targets`, ms) is a dash-dot line in its colour."""
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, s in enumerate(series):
        color = palette[i % len(palette)]
        fig.add_scatter(x=times(s), y=list(s.column("avg_request_ms")), name=s.name, mode="lines",
                        legendgroup=s.name, line={"color": color}, connectgaps=False,
                        hovertemplate=f"%{{x}}<br>%{{y:.2f}} ms<extra>{s.name} avg</extra>")
        for column, label, dash in QUANTILES:
            if s.has(column):
                fig.add_scatter(x=times(s), y=list(s.column(column)), name=f"{s.name} {label}", mode="lines",
                                legendgroup=s.name, showlegend=False, connectgaps=False,
                                line={"dash": dash, "width": 1, "color": color})
        if (targets or {}).get(s.name) is not None:
            fig.add_hline(y=(targets or {})[s.name], line={"dash": "dashdot", "width": 1, "color": color},
                          annotation_text=f"{s.name} p99 objective", annotation_position="top left")
    shown = {label for s in series for column, label, _ in QUANTILES if s.has(column)}
    for _, label, dash in QUANTILES:
        if label in shown:
            fig.add_scatter(x=[None], y=[None], name=label, mode="lines", legendgroup=f"quantile {label}",
                            line={"dash": dash, "width": 1, "color": "gray"}, hoverinfo="skip")
    return styled(fig, "Request latency (average, p50/p90/p99)", "ms", markers, x_range)


def breakdown(s: Series, markers: Sequence[Marker], x_range: XRange) -> go.Figure:
    """Where a request's time goes: queue vs the compute stages, stacked (no bar at a gap)."""
    fig = go.Figure([go.Bar(x=times(s), y=list(s.column(column)), name=label) for column, label in STAGES])
    fig.update_layout(barmode="stack", bargap=0)
    return styled(fig, f"Queue vs compute — {s.name}", "ms per request", markers, x_range)


def styled(fig: go.Figure, title: str, unit: str, markers: Sequence[Marker], x_range: XRange) -> go.Figure:
    """Title, axes, and the change markers: a dotted vertical line each, hover text on top."""
    for marker in markers:
        fig.add_vline(x=local(marker.at), line={"dash": "dot", "width": 1, "color": "gray"})
    if markers:
        fig.add_scatter(x=[local(m.at) for m in markers], y=[1.0] * len(markers), yaxis="y2", mode="markers",
                        name="changes", marker={"symbol": "triangle-down", "size": 10, "color": "gray"},
                        hovertext=[m.label for m in markers], hoverinfo="text", showlegend=False)
    fig.update_layout(yaxis={"rangemode": "tozero"}, xaxis={"range": list(x_range)},
                      yaxis2={"overlaying": "y", "range": [0, 1.05], "visible": False})
    return style(fig, title=title, y_title=unit)
