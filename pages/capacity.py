"""Capacity: per model, the rate at which it stops meeting its objective, the recorded peak and
mean, the headroom, the trend and when it would saturate, and what the forecast peak needs;
per NPU the memory left. Every figure names its source. One core function,
geadmin.ops.capacity.report.capacity_report (the same as `geadmin capacity`); "Measure now"
runs its guarded sweep on a trial copy (operator), the live model untouched, the copy removed
whatever happens (also when the page is left mid-sweep)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.diagnose.capacity import SET_OBJECTIVE, CapacityReport, Figure, ModelCapacity
from geadmin.errors import GeAdminError
from geadmin.ops.capacity.report import CapacityOptions, capacity_report
from geadmin.stack.target import Target
from geadmin.telemetry.sources.detect import NpuSources
from pages.ui import access, keys
from pages.ui.context import client_for, selected_target
from pages.ui.errors import failure_of, show_failure
from pages.ui.outside_text import defused

ALL = "every READY model"
GIB = float(1 << 30)


def render() -> None:
    st.title("Capacity")
    st.caption("How far each model's recorded load is from the rate at which it stops meeting its objective "
               "(p99, error budget), how fast the load grows, and what the forecast peak needs. The rate is "
               "measured on a trial copy beside the live model, which keeps serving unchanged.")
    target = selected_target()
    model_col, window_col, horizon_col, headroom_col = st.columns([3, 1, 1, 1])
    window_h = window_col.number_input("History (h)", min_value=1.0, max_value=2160.0, value=24.0,
                                       key=keys.CAPACITY_WINDOW_H)
    horizon = horizon_col.number_input("Horizon (days)", min_value=1.0, max_value=3650.0, value=30.0,
                                       key=keys.CAPACITY_HORIZON)
    headroom = headroom_col.number_input("Headroom wanted (x)", min_value=1.0, max_value=100.0, value=1.2,
                                         key=keys.CAPACITY_HEADROOM)
    options = CapacityOptions(window_h=float(window_h), horizon_days=float(horizon),
                              min_headroom=float(headroom))
    try:
        report = _report(target, options)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Capacity not read")
        return
    names = [m.model for m in report.models]
    chosen = model_col.selectbox("Model", [ALL, *names], key=keys.CAPACITY_MODEL)
    shown = [m for m in report.models if chosen in (ALL, m.model)]
    for m in shown:
        if chosen != ALL or not m.without_objective:
            show_model(m)
    without = [m.model for m in shown if m.without_objective]
    if chosen == ALL and without:  # one line, after the models with figures
        st.info(f"No p99 objective, so no capacity figures ({len(without)}): {', '.join(without)}. Set one "
                "in the Metrics page's Objectives, or with "
                f"`{SET_OBJECTIVE.format(model=without[0])}`.", icon=":material/flag:")
    if chosen != ALL:
        measure(target, chosen, options)
    show_npus(report)
    for note in report.notes:
        st.caption(note)


def _report(target: Target, options: CapacityOptions, model: str | None = None, auth: object = None,
            progress: Callable[[str], None] | None = None) -> CapacityReport:
    metrics = target.urls().metrics
    return capacity_report(client_for(target), model=model, repository=target.repository, options=options,
                           source=metrics, npu_sources=NpuSources(triton_metrics_url=metrics), auth=auth,
                           admin_key=target.spec.admin_key, progress=progress)


def _value(figure: Figure) -> str:
    return "-" if figure.value is None else f"{figure.value:.4g} {figure.unit}".strip()


def show_model(m: ModelCapacity) -> None:
    st.subheader(m.model)
    st.caption(f"Objective: {m.objective}")
    if m.short:
        st.warning(f"{defused(m.model)}: {m.short}", icon=":material/warning:")
    if m.without_objective:
        return
    rows = [("saturation rate", m.saturation), ("recorded peak", m.peak), ("recorded mean", m.mean),
            ("headroom", m.headroom), ("trend", m.trend), ("forecast peak", m.forecast_peak)]
    if m.needs is not None:
        rows += [("needs instances", m.needs.instances), ("needs NPUs", m.needs.npus),
                 ("needs replicas", m.needs.replicas)]
    st.dataframe(pd.DataFrame([{"figure": name, "value": _value(f), "source": f.source} for name, f in rows]),
                 hide_index=True, width="stretch")
    if m.saturates:
        st.caption(f"Saturates: {m.saturates}")
    for note in m.notes:
        st.caption(note)


def measure(target: Target, model: str, options: CapacityOptions) -> None:
    permitted, why_not = access.allowed(GuardedAction.TUNE)
    if not st.button("Measure now", key=keys.CAPACITY_MEASURE,
                     disabled=not permitted or target.repository is None,
                     help=why_not or ("the model repository is not known for this server (GEADMIN_REPOSITORY)"
                                      if target.repository is None else
                                      "a short sweep of request rates with perf_analyzer on a trial copy")):
        return
    try:
        auth = access.auth_for(GuardedAction.TUNE, model=model, server=target.spec.url)
        with st.status(f"Measuring {model}…", expanded=True) as status:
            report = _report(target, replace(options, measure=True), model=model,
                             auth=auth, progress=lambda text: status.write(text))
            status.update(label=f"Measured {model}", state="complete", expanded=False)
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Not measured")
        return
    for m in report.models:
        st.success(f"{defused(m.model)}: saturation rate {m.saturation.text()}")


def show_npus(report: CapacityReport) -> None:
    if not report.npus:
        st.caption(f"NPU memory: {report.npu_source}")
        return
    st.subheader("NPU memory")
    st.dataframe(pd.DataFrame([{
        "NPU": n.device, "used (GiB)": None if n.used_bytes is None else round(n.used_bytes / GIB, 2),
        "total (GiB)": None if n.total_bytes is None else round(n.total_bytes / GIB, 2),
        "free": "-" if n.free_ratio is None else f"{n.free_ratio:.0%}", "models": n.models,
        "source": n.source}
        for n in report.npus]), hide_index=True, width="stretch")
