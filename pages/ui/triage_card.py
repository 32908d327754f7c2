"""The Overview's triage card: each model's bottleneck over the last minute, with its numbers.

Every refresh of the live Overview scrapes Triton's /metrics once; the scrapes of the last
minute stay in session state, and the window reaches from the oldest to the newest
(geadmin.telemetry.bottleneck.recent_window). NPU utilization comes from the npu_ge metrics on
the same page, so "device-bound" needs no other source.
"""

from __future__ import annotations

import streamlit as st

from geadmin.errors import GeAdminError
from geadmin.repository.trials import is_trial
from geadmin.stack.server_history import outage_for
from geadmin.stack.target import live_stack
from geadmin.telemetry.alerting.objectives import latency_note
from geadmin.telemetry.bottleneck import (
    MIN_RATE_PER_S,
    Bottleneck,
    BottleneckKind,
    find_bottlenecks,
    recent_window,
    served_facts,
    window_label,
    with_traffic,
)
from geadmin.telemetry.history import watch
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import scrape
from pages.ui import keys
from pages.ui.context import selected_client, selected_target
from pages.ui.objectives_view import current_objectives
from pages.ui.outside_text import defused
from pages.ui.telemetry import triton_metrics_url

SCRAPE_TIMEOUT_S = 3.0
ENSEMBLES_TTL_S = 30  # which models are ensembles, and their batching, change only with a load
BADGE = {BottleneckKind.QUEUE_BOUND: "orange", BottleneckKind.DEVICE_BOUND: "violet",
         BottleneckKind.COMPUTE_BOUND: "blue",
         BottleneckKind.HOST_BOUND: "orange", BottleneckKind.BALANCED: "gray", BottleneckKind.NO_DATA: "gray"}


def triage_card() -> None:
    """The header names the one window the verdicts below cover (the body repeats no other)."""
    with st.container(border=True):
        try:
            url, _ = triton_metrics_url()
            now = scrape(url, timeout_s=SCRAPE_TIMEOUT_S)
        except GeAdminError as exc:  # Triton down: the page above already says so, calmly here
            st.markdown("**Bottlenecks**")
            outage = outage_for(selected_target().spec.url, live_stack())  # the stack's: stopped, restarting
            st.caption(f"No bottleneck figures: {outage or defused(str(exc))}")
            return
        kept, window = recent_window(st.session_state.get(keys.OVERVIEW_TRIAGE_SCRAPES, ()), now)
        st.session_state[keys.OVERVIEW_TRIAGE_SCRAPES] = kept
        if window is None:
            st.markdown("**Bottlenecks** · measuring")
            st.caption("Measuring: the first verdicts come with the next refresh.")
            return
        st.markdown(f"**Bottlenecks** · {window_label(window.window_s)}")
        names = tuple(sorted({m.model for m in window.models}))
        ensembles, delays = _facts(url, names)
        probes = watch.probe_rates(selected_target().spec.url, now_s=now.timestamp_s)
        repository = selected_target().repository  # trials by their markers (no repository: by name)
        trials = {n for n in names if is_trial(repository, n)}
        busy = with_traffic(find_bottlenecks(window, devices_from_triton(now), ensembles,
                                             queue_delay_ms=delays, probe_rates=probes, trials=trials))
        if not busy:
            st.caption(f"No traffic in this window (under {MIN_RATE_PER_S:g} request/s per model besides "
                       "geadmin's probes): nothing to triage.")
            return
        found = current_objectives()
        for b in busy:
            verdict_line(b, latency_note(window.model(b.model, b.version), found.get(b.model)))
        st.caption(f"Figures from Triton's metrics at `{url}`.")


@st.cache_data(ttl=ENSEMBLES_TTL_S, show_spinner=False)
def _facts(metrics_url: str, models: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], dict[str, float]]:
    """The selected server's ensembles among `models` and their batchers' max_queue_delay (ms),
    keyed by its metrics URL."""
    return served_facts(selected_client(), models)


def verdict_line(b: Bottleneck, objective: str = "") -> None:
    via = f" via {b.slow_member}" if b.slow_member else ""
    version = f" v{b.version}" if b.version else ""  # a fleet's verdict spans its versions
    badge = f":{BADGE[b.verdict]}-badge[{defused(b.verdict.value + via)}]"  # a member's name is outside words
    st.markdown(f"**{defused(b.model)}**{version} {badge} {defused(b.why)}")
    details = [objective] if objective else []
    details += [f"fix: {b.fix}"] if b.fix else []
    if b.note:
        details.append(b.note)
    if details:
        st.caption(" · ".join(details))
