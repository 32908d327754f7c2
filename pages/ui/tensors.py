"""Playground widgets: one input's data source, and what a request brought back (outputs,
latency and Triton's breakdown, top-k, the request as curl and Python). The snippets of a
small request come with its answer; a larger one's are made when asked (the button under
"Reproduce"), and a request over the snippet limit says so instead."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from geadmin.errors import GeAdminError, InputTooLargeError
from geadmin.ops.infer.images import Normalize, output_image
from geadmin.ops.infer.inputs import GENERATED, InputSource, SourceKind, source_kinds
from geadmin.ops.infer.outputs import ClassScore, tensor_rows
from geadmin.ops.infer.request import InferRequest, InferResult
from geadmin.ops.infer.snippets import (
    JSON_DATA_LIMIT_BYTES,
    Snippet,
    check_snippet_size,
    curl_command,
    python_snippet,
)
from geadmin.ops.infer.spec import InputSpec, dynamic_dims
from geadmin.repository.bounded import size_text
from geadmin.triton.client import Tensor
from pages.ui import keys
from pages.ui.outside_text import defused

TABLE_MAX_CELLS = 2_000  # bigger outputs are shown as an array
IMAGE_TYPES = ["png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff"]
SOURCE_LABELS = {SourceKind.RANDOM: "random", SourceKind.ZEROS: "zeros", SourceKind.ONES: "ones",
                 SourceKind.JSON: "JSON", SourceKind.NPY: ".npy upload", SourceKind.IMAGE: "image upload",
                 SourceKind.TEXT: "text"}
JSON_HINT = '[[1, 2, 3]] or {"shape": [1, 3], "data": [1, 2, 3]}'


@dataclass(frozen=True)
class Chosen:
    """One input as the widgets set it: `source` None until a file is uploaded."""

    source: InputSource | None
    sizes: tuple[int, ...] | None = None  # one per dynamic dim, for generated sources


@dataclass(frozen=True)
class Sent:
    """The last request sent from the page, what came back, and the same request as snippets."""

    server: str
    model: str
    request: InferRequest
    result: InferResult
    ranked: dict[str, list[list[ClassScore]]]
    python: Snippet | None  # None until made (build_snippets)
    curl: Snippet | None
    curl_note: str = ""  # why there is no curl command, or which URL it guessed
    images: tuple[tuple[str, np.ndarray], ...] = ()  # (input, its pixels as sent: resized) for uploads
    urls: tuple[str, str] = ("", "")  # (the URL the request went to: Python's, Triton's HTTP URL: curl's)
    output_types: dict[str, str] = field(default_factory=dict)  # {output: datatype}, for curl


def build_snippets(sent: Sent) -> Sent:
    """`sent` with its curl command and Python script (GeAdminError when they cannot be made,
    InputTooLargeError over the snippet limit)."""
    python_url, curl_url = sent.urls
    return replace(sent, curl=curl_command(curl_url, sent.request, output_types=sent.output_types),
                   python=python_snippet(python_url, sent.request))


def with_snippets_if_cheap(sent: Sent) -> Sent:
    """The snippets of a request of at most JSON_DATA_LIMIT_BYTES of tensor data (made in
    milliseconds) right away; a larger request's wait until asked for."""
    if check_snippet_size(sent.request) <= JSON_DATA_LIMIT_BYTES:
        return build_snippets(sent)
    return sent


def input_widget(spec: InputSpec, model: str) -> Chosen:
    """The source picker of one input (only the sources that fit its dtype) and its fields."""
    prefix = f"{keys.PLAYGROUND_INPUT_PREFIX}{model}.{spec.name}."
    kinds = source_kinds(spec)
    with st.container(border=True):
        st.markdown(f"**{defused(spec.name)}** · {spec.describe()}"
                    + (" · optional" if spec.optional else ""))
        kind = st.selectbox("Source", kinds, format_func=lambda k: SOURCE_LABELS[k],
                            key=prefix + "source") or kinds[0]
        if kind in GENERATED:
            text = st.text_input("Text", key=prefix + "text") if kind is SourceKind.TEXT else ""
            dims = dynamic_dims(spec)
            columns = st.columns(max(len(dims), 1))
            sizes = tuple(int(columns[n].number_input(f"dim {i + int(spec.batched)} (-1)", min_value=1,
                                                      value=1, step=1, key=f"{prefix}dim{i}"))
                          for n, i in enumerate(dims))
            return Chosen(InputSource(kind, text), sizes or None)
        if kind is SourceKind.JSON:
            payload = st.text_area("JSON", key=prefix + "json", placeholder=JSON_HINT,
                                   help="nested lists, or an object with shape and flat data")
            return Chosen(InputSource(kind, payload))
        if kind is SourceKind.NPY:
            upload = st.file_uploader(".npy file", type=["npy"], key=prefix + "npy")
            return Chosen(None if upload is None else InputSource(kind, upload.getvalue()))
        upload = st.file_uploader("Image", type=IMAGE_TYPES, key=prefix + "image",
                                  help="decoded, resized to the input's height and width, laid out as "
                                  "its dims")
        normalize = st.selectbox("Normalisation", list(Normalize), format_func=lambda n: n.value,
                                 key=prefix + "norm",
                                 help="none: pixels 0..255; 0-1: divided by 255; imagenet: then mean/std")
        return Chosen(None if upload is None else InputSource(kind, upload.getvalue(),
                                                              normalize or Normalize.NONE))


def show_sent(sent: Sent) -> None:
    show_timing(sent.result)
    for name, pixels in sent.images:
        height, width = pixels.shape[:2]
        st.image(pixels, caption=f"{name} as sent: {width}×{height} after resizing (first item)")
    st.subheader("Outputs")
    for tensor in sent.result.outputs:
        show_output(tensor)
    if sent.ranked:
        st.subheader("Top classes")
        st.dataframe(pd.DataFrame(top_k_records(sent.ranked)), hide_index=True, width="stretch")
    show_snippets(sent)


def show_timing(result: InferResult) -> None:
    server = result.server
    cells = [("End to end", result.latency_ms)]
    if server is not None:
        cells += [("Queue", server.queue_us / 1000), ("Compute input", server.compute_input_us / 1000),
                  ("Compute infer", server.compute_infer_us / 1000),
                  ("Compute output", server.compute_output_us / 1000)]
    for column, (label, value_ms) in zip(st.columns(len(cells)), cells, strict=True):
        column.metric(label + (" (approximate)" if server and server.approximate and label != "End to end"
                               else ""), f"{value_ms:.3f} ms")
    st.caption(f"{defused(result.model)} version {result.version or '?'} over {result.protocol}; "
               "the server stages are Triton's statistics deltas around the request")
    if server is not None and server.approximate:
        st.warning(f"Approximate breakdown: {server.note}", icon=":material/warning:")
    elif server is None:
        st.caption(f"No server breakdown: {result.server_note}.")


def show_output(tensor: Tensor) -> None:
    shape = ", ".join(map(str, tensor.shape))
    st.markdown(f"**{defused(tensor.name)}** · {tensor.datatype} [{shape}]")
    pixels = output_image(tensor.data)
    if pixels is not None:
        st.image(pixels, caption=f"{tensor.name} as an image (first item)")
    elif tensor.data.size <= TABLE_MAX_CELLS:
        rows = [[_cell(v) for v in row] for row in tensor_rows(tensor)]
        st.dataframe(pd.DataFrame(rows), hide_index=False, width="stretch")
    else:
        with np.printoptions(threshold=200, edgeitems=4, linewidth=110):
            st.code(str(tensor.data), language="text")


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict) else value  # non-UTF-8 bytes: {"base64": ...}


def top_k_records(ranked: dict[str, list[list[ClassScore]]]) -> list[dict[str, Any]]:
    return [{"output": name, "item": item, "rank": rank, "class": c.index, "label": c.label, "score": c.score}
            for name, rows in ranked.items() for item, row in enumerate(rows)
            for rank, c in enumerate(row, 1)]


def show_snippets(sent: Sent) -> None:
    st.subheader("Reproduce")
    if sent.python is None:
        sent = _snippets_when_asked(sent)
        if sent.python is None:
            return
    st.caption("The exact request (random data included), ready to copy; files go beside the command.")
    curl_tab, python_tab = st.tabs(["curl", "Python"])
    with curl_tab:
        if sent.curl_note:
            st.caption(sent.curl_note)
        if sent.curl is not None:
            st.code(sent.curl.text, language="bash", wrap_lines=True)
            _downloads(sent.curl, "curl")
    with python_tab:
        st.code(sent.python.text, language="python")
        _downloads(sent.python, "python")


def _snippets_when_asked(sent: Sent) -> Sent:
    """A large request's snippets, made once on the button and kept with the request sent."""
    try:
        size = check_snippet_size(sent.request)
    except InputTooLargeError as exc:
        st.info(f"No curl or Python snippet: {defused(str(exc))}.", icon=":material/info:")
        return sent
    if not st.button(f"Show as curl and Python ({size_text(size)} of tensor data)",
                     help="the exact request as a curl command and a Python script, with its data as files "
                     "to download"):
        return sent
    try:
        sent = build_snippets(sent)
    except GeAdminError as exc:
        st.error(f"No snippet: {defused(str(exc))}", icon=":material/error:")
        return sent
    st.session_state[keys.PLAYGROUND_SENT] = sent
    return sent


def _downloads(snippet: Snippet, which: str) -> None:
    for name, content in snippet.files.items():
        st.download_button(f"Download {name}", content, file_name=name,
                           key=f"{keys.PLAYGROUND_DOWNLOAD_PREFIX}{which}.{name}")
