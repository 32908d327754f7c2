"""Playground: one test request to any READY model, built from its metadata; its outputs,
latency and Triton's breakdown; the same request as curl and Python (a large request's when
asked: pages.ui.tensors.show_snippets).

Everything but the widgets is geadmin.ops.infer.request and .outputs (the same functions as
`geadmin infer`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.domain import ModelState, Transport
from geadmin.errors import GeAdminError, InferInputError, InputTooLargeError
from geadmin.ops.infer.images import sent_image
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.outputs import TopKPlan, rank_outputs, top_k_plan
from geadmin.ops.infer.request import InferRequest, build_request, input_fix, prepare, send
from geadmin.ops.infer.spec import ModelSpec, picked_shape
from geadmin.ops.models.actions import next_step
from geadmin.ops.monitoring import save_probe_input
from geadmin.stack.target import Target
from geadmin.triton.client import TritonClient
from pages.ui import access, keys, outside_text
from pages.ui.context import client_for, selected_target
from pages.ui.errors import show_error
from pages.ui.links import preselect
from pages.ui.outside_text import defused
from pages.ui.tensors import Chosen, Sent, input_widget, show_sent, with_snippets_if_cheap

INDEX_TTL_S = 5
SPEC_TTL_S = 30
PROTOCOLS = {"HTTP": Transport.HTTP, "gRPC": Transport.GRPC}


@st.cache_data(ttl=INDEX_TTL_S, show_spinner=False)
def ready_versions(server: str, url: str, _client: TritonClient) -> dict[str, list[str]]:
    """{model: its READY versions}, per configured server; `_client` is that server's (not hashed)."""
    ready: dict[str, list[str]] = {}
    for entry in _client.repository_index():
        if entry.state is ModelState.READY:
            ready.setdefault(entry.name, [])
            if entry.version:
                ready[entry.name].append(entry.version)
    return ready


@st.cache_data(ttl=SPEC_TTL_S, show_spinner=False)
def model_spec(server: str, url: str, model: str, version: str, _client: TritonClient) -> ModelSpec:
    return prepare(_client, model, version)


def render() -> None:
    st.title("Playground")
    target = selected_target()
    server_url = target.spec.url
    try:
        ready = ready_versions(target.spec.name, server_url, client_for(target))
    except GeAdminError as exc:
        show_error(exc, retry_url=server_url)
        return
    if not ready:
        st.info(f"No model is READY on {server_url}: load one on the Models page.")
        return
    model_col, version_col, protocol_col = st.columns([3, 1, 2])
    preselect(keys.PLAYGROUND_MODEL, sorted(ready))  # a deep link's model
    model = model_col.selectbox("Model", sorted(ready), key=keys.PLAYGROUND_MODEL)
    version = version_col.selectbox("Version", ["latest", *ready.get(model, [])],
                                    key=keys.PLAYGROUND_VERSION_PREFIX + model)
    version = "" if version == "latest" else version
    with protocol_col:
        protocol = st.radio("Protocol", list(PROTOCOLS), horizontal=True, key=keys.PLAYGROUND_PROTOCOL)
        transport = PROTOCOLS[protocol]
        urls = endpoints(target, transport)
    try:
        spec = model_spec(target.spec.name, server_url, model, version, client_for(target))
    except GeAdminError as exc:
        show_error(exc, retry_url=server_url)
        return
    if spec.note:
        st.warning(spec.note[0].upper() + spec.note[1:], icon=":material/key:")

    st.subheader("Inputs")
    batch_col, seed_col = st.columns(2)
    batch_size = 1
    if spec.max_batch_size > 0:
        batch_size = int(batch_col.number_input("Batch size", min_value=1, max_value=spec.max_batch_size,
                                                value=1, key=keys.PLAYGROUND_BATCH_PREFIX + model))
    seed = int(seed_col.number_input("Seed (random inputs)", min_value=0, value=0, key=keys.PLAYGROUND_SEED))
    chosen = {s.name: input_widget(s, model) for s in spec.inputs}

    names = [o.name for o in spec.outputs]
    out_col, k_col, stats_col = st.columns([3, 1, 1])
    outputs = out_col.multiselect("Outputs to request", names, default=names,
                                  key=keys.PLAYGROUND_OUTPUTS_PREFIX + model)
    k = int(k_col.number_input("Top-k", min_value=0, value=0, key=keys.PLAYGROUND_TOP_K,
                               help="the k best classes of each output, with labels when the model has them"))
    breakdown = stats_col.toggle("Server breakdown", value=True, key=keys.PLAYGROUND_BREAKDOWN,
                                 help="read Triton's statistics before and after the request")
    may_send, why_not = access.allowed(GuardedAction.INFER)
    if st.button("Send", type="primary", key=keys.PLAYGROUND_SEND, disabled=not may_send,
                 help=why_not or None):
        missing = [name for name, c in chosen.items() if c.source is None]
        if missing:
            st.error(f"No file uploaded for input {', '.join(missing)}.\n\n**Fix:** upload one, or pick "
                     "another source.", icon=":material/error:")
        elif not outputs:
            st.error("No output is chosen.\n\n**Fix:** pick at least one output to request.",
                     icon=":material/error:")
        else:
            request = checked_request(target, spec, chosen, batch_size=batch_size, seed=seed, version=version,
                                      outputs=() if len(outputs) == len(names) else outputs, k=k)
            if request is not None:
                images = sent_images(spec, chosen, request[0])
                send_request(target, transport, spec, *request, urls, breakdown, images)
    save_as_probe_input(target, model, chosen)
    sent: Sent | None = st.session_state.get(keys.PLAYGROUND_SENT)
    if sent is not None and (sent.server, sent.model) == (target.spec.name, model):
        show_sent(sent)


def save_as_probe_input(target: Target, model: str, chosen: dict[str, Chosen]) -> None:
    """The sampler's probe of `model` sends these inputs instead of zeros (shapes as the probe
    picks them: batch 1, dynamic dims from the data)."""
    may_save, why_not = access.allowed(GuardedAction.MONITORING)
    if not st.button("Use as the probe's input", key=keys.PLAYGROUND_PROBE_INPUT, disabled=not may_save,
                     help=why_not or "geadmin's synthetic probe of this model sends these inputs instead of "
                     "zeros (a model that rejects zeros still gets a meaningful probe)"):
        return
    sources = {name: c.source for name, c in chosen.items() if c.source is not None}
    try:
        save_probe_input(model, sources, auth=access.auth_for(GuardedAction.MONITORING, model=model,
                                                              server=target.spec.url))
    except GeAdminError as exc:
        st.error(f"Not saved: {defused(str(exc))}", icon=":material/error:")
        return
    st.success(f"Saved: the probe of {defused(model)} now sends this request (audited).")


def endpoints(target: Target, transport: Transport) -> tuple[str, str, str]:
    """(URL to send to, HTTP URL for curl, a note when the curl URL is a guess): the configured
    server's known endpoints (geadmin.stack.target.server_urls), never a typed address."""
    urls = target.urls()
    url = urls.url(transport)
    st.caption(f"`{url}`" + (f" — from GEADMIN_{transport.name}_PORT on the server's host: set "
                             f"{transport.value}_url in the servers file if it listens elsewhere"
                             if urls.is_guess(transport) else ""))
    if transport is Transport.HTTP or not urls.is_guess(Transport.HTTP):
        return url, urls.http, ""
    return url, urls.http, (f"curl speaks HTTP: this command uses {urls.http}, from GEADMIN_HTTP_PORT on "
                            "the server's host.")


def checked_request(target: Target, spec: ModelSpec, chosen: dict[str, Chosen], *, batch_size: int,
                    seed: int, version: str, outputs: Sequence[str], k: int
                    ) -> tuple[InferRequest, TopKPlan] | None:
    """The request and its top-k plan, or None after showing why the input does not fit."""
    try:
        shapes = {name: picked_shape(spec.input(name), c.sizes, batch_size)
                  for name, c in chosen.items() if c.sizes}
        sources: dict[str, InputSource] = {n: c.source for n, c in chosen.items() if c.source is not None}
        plan = top_k_plan(spec, k, outputs, target.repository)
        request = build_request(spec, sources, shapes=shapes, batch_size=batch_size, seed=seed,
                                outputs=outputs, class_count=plan.class_count, version=version)
    except InferInputError as exc:
        st.error(f"{outside_text.text(exc)}\n\n**Fix:** {input_fix(exc)}. Nothing was sent.",
                 icon=":material/error:")
        return None
    except GeAdminError as exc:  # e.g. a labels file that cannot be read
        st.error(f"{outside_text.text(exc)}\n\n**Next step:** {next_step(exc)}. Nothing was sent.",
                 icon=":material/error:")
        return None
    return request, plan


def sent_images(spec: ModelSpec, chosen: dict[str, Chosen], request: InferRequest
                ) -> tuple[tuple[str, np.ndarray], ...]:
    """Each uploaded image as the request carries it (resized to the input, first item)."""
    found = []
    for name, c in chosen.items():
        if c.source is not None and c.source.kind is SourceKind.IMAGE:
            pixels = sent_image(spec.input(name), request.input(name).data, c.source.normalize)
            if pixels is not None:
                found.append((name, pixels))
    return tuple(found)


def send_request(target: Target, transport: Transport, spec: ModelSpec, request: InferRequest,
                 plan: TopKPlan, urls: tuple[str, str, str], breakdown: bool,
                 images: tuple[tuple[str, np.ndarray], ...] = ()) -> None:
    url, http_url, curl_note = urls
    try:
        with st.spinner(f"Sending to {request.model} at {url}…"):
            result = send(client_for(target, transport), request, statistics=breakdown)
        ranked = rank_outputs(result, plan)
    except GeAdminError as exc:
        show_error(exc, retry_url=url)
        return
    sent = Sent(target.spec.name, request.model, request, result, ranked, None, None, curl_note, images,
                (url, http_url), {o.name: o.datatype for o in spec.outputs})
    try:  # a large request's snippets are made when asked (pages.ui.tensors.show_snippets)
        sent = with_snippets_if_cheap(sent)
    except InputTooLargeError:
        pass  # the Reproduce section says why there is none
    except GeAdminError as exc:
        show_error(exc, retry_url=url)
    st.session_state[keys.PLAYGROUND_SENT] = sent
