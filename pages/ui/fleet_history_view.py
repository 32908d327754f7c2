"""The fleet as Prometheus sees it (GEADMIN_PROMETHEUS_URL), drawn on three pages: per-server
lines under the Metrics page's fleet charts, the Fleet page's triage across servers, and the
NPU page's servers-by-node map (geadmin.telemetry.history.prometheus_fleet)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from geadmin import settings
from geadmin.errors import GeAdminError
from geadmin.telemetry.history.prometheus import FLEET_PREFIX, PrometheusHistory, fleet_job
from geadmin.telemetry.history.prometheus_fleet import fleet_bottlenecks, node_map, server_series
from pages.ui import keys
from pages.ui.charts import style
from pages.ui.outside_text import defused
from pages.ui.triage_card import verdict_line

PER_SERVER = (("p99_ms", "p99 by server", "ms"), ("inferences_per_s", "Throughput by server", "inferences/s"))


def prometheus() -> PrometheusHistory | None:
    url = settings.PROMETHEUS_URL.get()
    return PrometheusHistory(url) if url else None


def source_label(source: str) -> str:
    job = fleet_job(source)
    return f"every server of job {job} ({source})" if job is not None else source


def by_server(source: str, models: Sequence[str], since: datetime,
              x_range: tuple[datetime, datetime]) -> None:
    """Under a fleet source's charts: one chosen model's p99 and throughput on each server."""
    history = prometheus()
    if history is None or fleet_job(source) is None or not models:
        return
    st.subheader("By server")
    model = st.selectbox("Model", list(models), key=keys.METRICS_SERVER_MODEL)
    try:
        series = server_series(history, source, model, since)
    except GeAdminError as exc:
        st.error(f"Cannot read the per-server history: {defused(str(exc))}")
        return
    st.caption(f"{defused(model)} on each of {len(series)} servers; the fleet charts above sum "
               "the servers' rates, weight their averages by requests and show the worst server's quantiles.")
    for column, (name, title, unit) in zip(st.columns(2), PER_SERVER, strict=True):
        fig = go.Figure([go.Scatter(x=[t.astimezone() for t in s.times], y=list(s.column(name)), name=s.name,
                                    mode="lines", connectgaps=False) for s in series])
        fig.update_layout(yaxis={"rangemode": "tozero"}, xaxis={"range": list(x_range)})
        column.plotly_chart(style(fig, title=f"{title} — {model}", y_title=unit),
                            key=f"metrics_by_server_{name}")


def fleet_triage() -> None:
    """The Fleet page: each Prometheus fleet's bottlenecks over its last minute."""
    history = prometheus()
    if history is None:
        return
    try:
        sources = [o.source for o in history.sources() if o.source.startswith(FLEET_PREFIX)]
        found = [(source, fleet_bottlenecks(history, source)) for source in sources]
    except GeAdminError as exc:
        st.caption(f"No bottlenecks across the fleet: {defused(str(exc))}")
        return
    with st.container(border=True):
        st.markdown("**Bottlenecks across the fleet** · last minute, from Prometheus")
        if not sources:
            st.caption(f"{history.label} scrapes no job with two or more Triton servers.")
        for source, busy in found:
            st.markdown(f"`{source}`")
            if not busy:
                st.caption("No traffic in the last minute: nothing to triage.")
            for b in busy:
                verdict_line(b)
        st.caption("Per-server lines: the Metrics page with a fleet:JOB source.")


def node_table() -> None:
    """The NPU page: which Triton servers (pods) and models sit on each node's NPUs."""
    history = prometheus()
    if history is None:
        return
    try:
        rows = node_map(history)
    except GeAdminError as exc:
        st.caption(f"No servers-by-node map: {defused(str(exc))}")
        return
    if not rows:
        return
    st.subheader("Servers and NPUs by node")
    st.dataframe(pd.DataFrame([{"node": r.node, "NPU sources": ", ".join(r.npu_sources) or "none scraped",
                                "Triton servers": ", ".join(r.servers) or "-", "models": ", ".join(r.models)}
                               for r in rows]), hide_index=True, width="stretch")
    st.caption(f"Joined on the node label of {history.label}'s targets (node, kubernetes_node, ...). A node "
               "without NPU sources: scrape npu-exporter there, or npu_ge's metrics on Triton's page.")
