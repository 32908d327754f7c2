"""Deep links: every page takes its subject from the URL, so an alert, a bundle or a chat
message opens the exact view — `/models?server=prod&model=resnet50`,
`/metrics?model=resnet50&range=1%20h` (or `&from=2026-12-04T10:00:00Z`), `/editor?model=...`,
`/npu?npu=3&node=node-a` (the fault card of chip 3 of that node; `node` empty: this host).

`server` is a configured server's name or URL (the alert rules put Triton's URL there);
`model` preselects the page's model picker once the page knows its choices (`preselect`),
and a model the server does not have is said, not ignored. A link is applied once per URL:
after that, the operator's own choices stand.

A link's parameters are outside input (anyone can send a link): what a notice quotes of them
goes through `pages.ui.outside_text`, so `?server=[Session expired](https://evil.example)` is
shown as those characters, never as a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import streamlit as st

from geadmin import outside
from geadmin.domain import Endpoint
from geadmin.errors import ConfigError
from pages.ui import keys, outside_text
from pages.ui.context import targets
from pages.ui.telemetry import RANGES_MIN

MAX_CHIP_DIGITS = 4  # device ids are small numbers
MAX_NODE_CHARS = 253  # a DNS name / Kubernetes node name at most


def take_link(page: str) -> None:
    """Read this URL's parameters into the session, once per page and URL (app.py, before the page)."""
    params = {name: st.query_params[name] for name in st.query_params}
    seen = (page, tuple(sorted(params.items())))
    if st.session_state.get(keys.LINK_SEEN) == seen:
        return
    st.session_state[keys.LINK_SEEN] = seen
    st.session_state.pop(keys.LINK_MODEL, None)
    st.session_state.pop(keys.LINK_PROBLEM, None)
    st.session_state.pop(keys.LINK_NPU, None)
    st.session_state.pop(keys.LINK_NODE, None)
    if params.get("server"):
        _select_server(params["server"])
    if params.get("model"):
        st.session_state[keys.LINK_MODEL] = params["model"]
    if params.get("npu"):
        _take_chip(params["npu"], params.get("node", ""))
    label = range_label(params.get("range"), params.get("from"))
    if label:
        st.session_state[keys.METRICS_RANGE] = label
        st.session_state[keys.NPU_RANGE] = label


def _select_server(wanted: str) -> None:
    known = targets()
    for target in known:
        if wanted in (target.spec.name, target.spec.url) or _same_endpoint(wanted, target.spec.url):
            st.session_state[keys.SERVER] = target.spec.name
            return
    configured = ", ".join(outside_text.text(t.spec.name, 100) for t in known)
    st.session_state[keys.LINK_PROBLEM] = (f"The link names server {outside_text.quoted(wanted)}, which is "
                                           f"not configured here (configured: {configured}).")


def _take_chip(npu: str, node: str) -> None:
    """A chip is a device id (a few digits); a node a short label: anything else is said, not used."""
    if not (npu.isascii() and npu.isdigit() and len(npu) <= MAX_CHIP_DIGITS):
        st.session_state[keys.LINK_PROBLEM] = (f"The link names NPU {outside_text.quoted(npu)}, which is not "
                                               "a chip number.")
        return
    st.session_state[keys.LINK_NPU] = int(npu)
    st.session_state[keys.LINK_NODE] = outside.plain(node, MAX_NODE_CHARS).strip()  # compared, drawn escaped


def _same_endpoint(a: str, b: str) -> bool:
    try:
        return Endpoint.parse(a).url == Endpoint.parse(b).url
    except (ConfigError, ValueError):
        return False


def range_label(range_text: str | None, from_text: str | None, now: datetime | None = None) -> str | None:
    """The charts' range a link asks for: a label (`1 h`), or the smallest range reaching back to `from`."""
    if range_text in RANGES_MIN:
        return range_text
    if not from_text:
        return None
    try:
        epoch = from_text.replace(".", "").isdigit()
        start = (datetime.fromtimestamp(float(from_text), timezone.utc) if epoch
                 else datetime.fromisoformat(from_text.replace("Z", "+00:00")))
    except (ValueError, OverflowError, OSError):
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    minutes = ((now or datetime.now(timezone.utc)) - start).total_seconds() / 60
    return next((label for label, span in RANGES_MIN.items() if span >= minutes), list(RANGES_MIN)[-1])


def link_notice() -> None:
    """What a link asked for that this dashboard cannot show (an unknown server); the notice is
    markdown whose quoted parts are already escaped (`_select_server`)."""
    notice = st.session_state.get(keys.LINK_PROBLEM)
    if notice:
        st.warning(notice, icon=":material/link_off:")


def preselect(key: str, options: Sequence[str], *, many: bool = False) -> None:
    """Before the page's model picker (`key`): choose the model the link names, once."""
    wanted = st.session_state.pop(keys.LINK_MODEL, None)
    if wanted is None:
        return
    if wanted in options:
        st.session_state[key] = [wanted] if many else wanted
    else:
        shown = ", ".join(outside_text.text(option, 100) for option in list(options)[:10]) or "none"
        st.warning(f"The link names model {outside_text.quoted(wanted)}, which this page cannot show on this "
                   f"server (it has: {shown}).", icon=":material/link_off:")
