"""NPUs: a fault card per faulted chip first (code, level, the models and share of instances it
took, the plan with Dry run / Apply: pages.ui.fault_card; `/npu?npu=N&node=NODE` opens on one),
then each device's utilization, HBM, temperature, power and health, refreshed in place,
the model <-> NPU map — which model fills which NPU — and each device's utilization and HBM
over time from the sampler's history (geadmin.telemetry.history.store), gaps drawn as gaps."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import datetime, timezone

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st
from tritonclient.grpc import model_config_pb2

from geadmin import settings
from geadmin.errors import GeAdminError, TelemetryError
from geadmin.ops.npu import wiring
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.reader import open_history
from geadmin.telemetry.history.store import Series
from geadmin.telemetry.npu_map import FROM_CONFIG, ModelMap, hbm_by_device, loaded_npu_ge_configs, model_map
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.npu import NpuDevice, NpuReport
from geadmin.triton.client import TritonClient
from pages.ui import keys
from pages.ui.charts import style
from pages.ui.context import client_for, selected_target
from pages.ui.fault_card import fault_cards
from pages.ui.fleet_history_view import node_table
from pages.ui.outside_text import defused
from pages.ui.telemetry import DEFAULT_RANGE, RANGES_MIN, triton_metrics_url

REFRESH_S = 5
FAULT_REFRESH_S = 10  # the faults are read from every source: not on every refresh of the figures
CONFIG_TTL_S = 30  # configs change only on a reload: read them twice a minute at most
GIB = 1 << 30
WIDE_CHART_PX = 1000  # a chart across the page
# (history column, chart title, unit, scale): one chart each, one line per device
HISTORY_CHARTS = (("aicore_util_pct", "AI-core utilization over time", "%", 1.0),
                  ("hbm_used_bytes", "HBM used over time", "GiB", 1 / GIB))
NO_NPU_PREFIX = "no Ascend NPU on this host: "  # geadmin.telemetry.sources.detect' summary
NO_SOURCE = "No NPU source was found on this host, so this page has no devices and no charts to show"
ADD_SOURCE = ("To add one: point `GEADMIN_NPU_EXPORTER_URL` at an npu-exporter's /metrics (the compose "
              "profile `npu` runs one), put the Ascend driver's `npu-smi` on the dashboard "
              "host's PATH, or serve models with the `npu_ge` backend (its Triton metrics carry each "
              "NPU's figures). This page then refreshes by itself.")
NO_HISTORY = ("No NPU history yet: the sampler records each device's utilization and HBM while `geadmin up` "
              "runs (for a Triton started another way, run `geadmin sampler`); charts over time appear here "
              "after its first samples.")


def render() -> None:
    st.title("NPUs")
    faults()
    live_npus()
    npu_history()
    node_table()  # with GEADMIN_PROMETHEUS_URL: which servers and models sit on each node's NPUs


@st.fragment(run_every=FAULT_REFRESH_S)
def faults() -> None:
    """The fault cards of the selected server's host, from one core call (geadmin.ops.npu.wiring)."""
    if keys.LINK_NPU in st.session_state or keys.LINK_MODEL in st.session_state:  # a link: once
        st.session_state[keys.NPU_FAULT_LINKED] = (st.session_state.pop(keys.LINK_NPU, None),
                                                   st.session_state.pop(keys.LINK_NODE, ""),
                                                   st.session_state.pop(keys.LINK_MODEL, ""))
    npu, node, model = st.session_state.get(keys.NPU_FAULT_LINKED, (None, "", ""))
    target = selected_target()
    url, _ = triton_metrics_url()
    try:
        client = client_for(target)
        report = wiring.current_report(wiring.HostFaultSources(
            client, url, exporter_url=settings.NPU_EXPORTER_URL.get(), npu_smi=shutil.which("npu-smi"),
            repository=target.repository))
    except GeAdminError as exc:
        st.caption(f"NPU faults not read: {defused(str(exc))}")
        return
    if not report.impacts and npu is None:
        return  # nothing faulted: the devices below say the rest (a host without NPUs, one calm line)
    st.subheader("Faults")
    fault_cards(report, client=client, repository=target.repository, metrics_url=url, npu=npu, node=node,
                model=model)


@st.fragment(run_every=REFRESH_S)
def live_npus() -> None:
    url, explicit = triton_metrics_url()
    try:
        report = detect(NpuSources(exporter_url=settings.NPU_EXPORTER_URL.get(), triton_metrics_url=url,
                                triton_metrics_explicit=explicit))
    except TelemetryError as exc:
        st.error(f"NPU telemetry cannot be read: {defused(str(exc))}", icon=":material/error:")
        report = st.session_state.get(keys.NPU_LAST_GOOD)
        if report is None:
            return
        st.warning(f"Below: the last data received, from {report[1]:%H:%M:%S} UTC; retrying every "
                   f"{REFRESH_S}s.")
        report = report[0]
    else:
        st.session_state[keys.NPU_LAST_GOOD] = (report, datetime.now(timezone.utc))
    if not report.devices:
        looked = report.summary.removeprefix(NO_NPU_PREFIX)
        st.info(f"{NO_SOURCE} (looked at: {looked}).\n\n{ADD_SOURCE}", icon=":material/info:")
        return
    show(report)
    st.caption(f"{report.summary} · refreshed {datetime.now(timezone.utc):%H:%M:%S} UTC · every {REFRESH_S}s")


@st.fragment(run_every=REFRESH_S)
def npu_history() -> None:
    """Below the current values: utilization and HBM used per device over a chosen range, from
    the history of the selected server's /metrics (else the most recently sampled source)."""
    try:
        reader = open_history()
        known = reader.npu_sources()
        url = triton_metrics_url()[0] if known else ""
    except GeAdminError as exc:
        st.caption(f"NPU history not read: {defused(str(exc))}")
        return
    if not known:
        last = st.session_state.get(keys.NPU_LAST_GOOD)
        if last is not None and last[0].devices:  # charts come once the sampler has samples
            st.caption(NO_HISTORY)
        return  # no NPU source: the line above says how to add one; no chart can come
    st.subheader("Over time")
    if st.session_state.get(keys.NPU_SOURCE) not in known:
        st.session_state[keys.NPU_SOURCE] = url if url in known else known[0]
    if len(known) > 1:  # several nodes (a fleet's Prometheus) or hosts
        st.selectbox("NPU source", known, key=keys.NPU_SOURCE)
    source = st.session_state[keys.NPU_SOURCE]
    st.session_state.setdefault(keys.NPU_RANGE, DEFAULT_RANGE)
    label = st.selectbox("Time range", list(RANGES_MIN), key=keys.NPU_RANGE)
    since = history.window_since(RANGES_MIN[label])
    try:
        series = reader.npu_series(source, since)
    except GeAdminError as exc:
        st.caption(f"NPU history not read: {defused(str(exc))}")
        return
    if not series:
        st.caption(f"No NPU samples from `{source}` in the last {label}.")
        return
    latest = max(s.times[-1] for s in series).astimezone()
    st.caption(f"`{source}` from {reader.label}; latest sample {latest:%H:%M:%S}. Gaps are times without "
               "samples. Local time.")
    x_range = (since.astimezone(), datetime.now(timezone.utc).astimezone())
    for column, (name, title, unit, scale) in zip(st.columns(2), HISTORY_CHARTS, strict=False):
        column.plotly_chart(history_chart(series, name, title, unit, scale, x_range),
                            key=keys.NPU_HISTORY_PREFIX + name)


def history_chart(series: Sequence[Series], column: str, title: str, unit: str, scale: float,
                  x_range: tuple[datetime, datetime]) -> go.Figure:
    """One line per device; None points (gaps, holes) break the line."""
    fig = go.Figure([go.Scatter(x=[t.astimezone() for t in s.times], name=s.name, mode="lines",
                                y=[None if v is None else v * scale for v in s.column(column)],
                                connectgaps=False) for s in series])
    fig.update_layout(yaxis={"rangemode": "tozero"}, xaxis={"range": list(x_range)})
    return style(fig, title=title, y_title=unit)


def show(report: NpuReport) -> None:
    for note in report.notes:
        st.caption(f":material/info: {note}")
    placed = {p.model for d in report.devices for p in d.models or ()}
    found = model_map(report.devices, configs(tuple(sorted(placed))))
    st.subheader("Devices")
    st.dataframe(device_rows(report.devices, found), hide_index=True, width="stretch",
                 column_config={c: percent(c) for c in ("AI core %", "vector %", "cube %")})
    st.subheader("Model ↔ NPU map")
    map_table(report.devices, found)
    hbm_chart(report.devices, found)


def configs(placed: tuple[str, ...]) -> dict[str, model_config_pb2.ModelConfig]:
    """Live configs of the npu_ge models the placements do not cover ({} when Triton does not answer)."""
    target = selected_target()
    try:
        return _configs(target.spec.name, target.spec.url, placed, client_for(target))
    except GeAdminError as exc:
        st.caption(f"Model configs not read ({defused(str(exc))}): the map shows the npu_ge placements only.")
        return {}


@st.cache_data(ttl=CONFIG_TTL_S, show_spinner=False)
def _configs(server: str, url: str, placed: tuple[str, ...],
             _client: TritonClient) -> dict[str, model_config_pb2.ModelConfig]:
    """Cached per configured server (name and URL); `_client` is that server's, not hashed."""
    return loaded_npu_ge_configs(_client, skip=placed)


def device_rows(devices: tuple[NpuDevice, ...], found: ModelMap) -> pd.DataFrame:
    rows = []
    for d in devices:
        used, total = d.device_memory
        rows.append({"device": d.id, "models": ", ".join(found.models_on(d.id)) or _holders(d),
                     "AI core %": d.aicore_util_pct, "vector %": d.vector_util_pct, "cube %": d.cube_util_pct,
                     "HBM used GiB": _gib(used), "HBM total GiB": _gib(total),
                     "temperature °C": d.temperature_c, "power W": d.power_w, "health": d.health or "-",
                     "chip": d.chip_name or "-"})
    return pd.DataFrame(rows)


def map_table(devices: tuple[NpuDevice, ...], found: ModelMap) -> None:
    if not found.rows:
        st.info("No model instance is known to run on these NPUs: Triton publishes no npu_ge placements and "
                "no loaded npu_ge model names `device_ids`.", icon=":material/info:")
    else:
        by_id = {d.id: d for d in devices}
        rows = []
        for r in found.rows:
            device = by_id.get(r.device, NpuDevice(id=r.device, source=""))
            used, total = device.device_memory
            rows.append({"model": r.model, "version": r.version or "loaded", "device": r.device,
                         "instances": r.instances, "HBM used GiB": _gib(used), "HBM total GiB": _gib(total),
                         "AI core %": device.aicore_util_pct, "from": r.source})
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"AI core %": percent("AI core %")})
        if any(r.source == FROM_CONFIG for r in found.rows):
            st.caption("`config device_ids`: where the config puts the instances (instance i on "
                       "device_ids[i % n]); the backend publishes no placements for these models.")
    if found.unplaced:
        st.caption("On the backend's default devices (no `device_ids` in their config): "
                   + ", ".join(found.unplaced))


def hbm_chart(devices: tuple[NpuDevice, ...], found: ModelMap) -> None:
    bars = [b for b in hbm_by_device(devices, found) if b.used_bytes is not None]
    if not bars:
        st.caption("No source reports HBM use for these devices.")
        return
    rows = [{"device": f"NPU {b.device}", "GiB": b.used_bytes / GIB, "held by": b.label}
            for b in bars if b.used_bytes is not None]
    rows += [{"device": f"NPU {b.device}", "GiB": b.free_bytes / GIB, "held by": "free"}
             for b in bars if b.free_bytes is not None]
    figure = px.bar(pd.DataFrame(rows), x="device", y="GiB", color="held by",
                    color_discrete_map={"free": "#d0d4da"})
    figure.update_layout(barmode="stack")
    style(figure, title="HBM per device", y_title="GiB", width_px=WIDE_CHART_PX)
    st.plotly_chart(figure, key=keys.NPU_HBM_CHART)


def percent(label: str) -> st.column_config.ProgressColumn:  # type: ignore[name-defined]
    return st.column_config.ProgressColumn(label, format="%.0f%%", min_value=0, max_value=100)


def _holders(d: NpuDevice) -> str:
    if d.processes:
        return ", ".join(f"{p.name or 'pid'} {p.pid}" for p in d.processes)
    return "nothing" if d.models == () or d.processes == () else "-"


def _gib(value: int | None) -> float | None:
    return None if value is None else round(value / GIB, 2)
