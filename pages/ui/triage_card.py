"""The Overview's triage card: each model's bottleneck over the last minute, with its numbers.

Every refresh of the live Overview scrapes Triton's /metrics once; the scrapes of the last
minute stay in session state, and the window reaches from the oldest to the newest
(geadmin.telemetry.bottleneck.recent_window). NPU utilization comes from the npu_ge metrics on
the same page, so "device-bound" needs no other source.
"""

from __future__ import annotations

import streamlit as st

from geadmin.errors import GeAdminError
from geadmin.telemetry.bottleneck import Bottleneck, Verdict, recent_window, triage, with_traffic
from geadmin.telemetry.npu import devices_from_triton
from geadmin.telemetry.scrape import scrape
from pages.ui import keys
from pages.ui.telemetry import triton_metrics_url

SCRAPE_TIMEOUT_S = 3.0
BADGE = {Verdict.QUEUE_BOUND: "orange", Verdict.DEVICE_BOUND: "violet", Verdict.COMPUTE_BOUND: "blue",
         Verdict.HOST_BOUND: "orange", Verdict.BALANCED: "gray", Verdict.NO_DATA: "gray"}


def triage_card() -> None:
    with st.container(border=True):
        st.markdown("**Bottlenecks** · last minute")
        try:
            url, _ = triton_metrics_url()
            now = scrape(url, timeout_s=SCRAPE_TIMEOUT_S)
        except GeAdminError as exc:  # Triton down: the page above already says so, calmly here
            st.caption(f"No bottleneck figures: {exc}")
            return
        kept, window = recent_window(st.session_state.get(keys.OVERVIEW_TRIAGE_SCRAPES, ()), now)
        st.session_state[keys.OVERVIEW_TRIAGE_SCRAPES] = kept
        if window is None:
            st.caption("Measuring: the first verdicts come with the next refresh.")
            return
        busy = with_traffic(triage(window, devices_from_triton(now)))
        if not busy:
            st.caption(f"No traffic in the last {window.window_s:.0f} s: nothing to triage.")
            return
        for b in busy:
            verdict_line(b)
        st.caption(f"Window {window.window_s:.0f} s, from Triton's metrics at `{url}`.")


def verdict_line(b: Bottleneck) -> None:
    st.markdown(f"**{b.model}** v{b.version} :{BADGE[b.verdict]}-badge[{b.verdict.value}] {b.why}")
    details = [f"fix: {b.fix}"] if b.fix else []
    if b.note:
        details.append(b.note)
    if details:
        st.caption(" · ".join(details))
