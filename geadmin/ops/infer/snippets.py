"""The same request as a `curl` command and as a Python `tritonclient` script.

Both carry the request's exact tensors (random data included), so they reproduce it.
curl sends a JSON body (KServe v2); inputs JSON cannot hold (FP16, BF16, NaN/inf,
non-UTF-8 bytes) and tensors of more than JSON_DATA_LIMIT_BYTES go as Triton's binary
tensor extension (the raw bytes: a JSON list of 64 million floats had taken 3 GB and 33 s),
and FP16/BF16 outputs come back binary after the JSON header (`parse_http_response` reads
both). A body over `inline_limit_bytes` goes to a file (`@request.json` / `@request.bin`)
returned beside the command (`geadmin infer` writes them, never through a link). A request of
more than MAX_SNIPPET_DATA_BYTES of tensor data gets no snippet (InputTooLargeError says
so). The Python script prints its outputs as JSON, in `tensor_record` form.

User strings (the model, its version, input and output names) go into a snippet only as
data: shell-quoted words and a percent-encoded URL path for curl, Python literals (`repr`)
in assignments and JSON for the script — never into a docstring or a comment, where a
model name holding three double quotes had ended the docstring and become code.
"""

from __future__ import annotations

import base64
import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import numpy as np

from geadmin.domain import Endpoint, Transport
from geadmin.errors import InferInputError, InputTooLargeError
from geadmin.ops.infer.outputs import plain_bytes, plain_values
from geadmin.ops.infer.request import InferRequest
from geadmin.ops.infer.spec import NUMPY_DTYPES, WIRE_BYTES
from geadmin.repository.bounded import size_text
from geadmin.triton.client import Tensor

INLINE_LIMIT_BYTES = 4096  # a body (curl) or tensor data (Python) up to this stays in the command
JSON_DATA_LIMIT_BYTES = 128 * 1024  # tensor data curl sends as JSON (at most ~1 MiB of it); more: binary
MAX_SNIPPET_DATA_BYTES = 16 * 1024 * 1024  # tensor data a snippet carries at all
JSON_BODY_FILE = "request.json"
BINARY_BODY_FILE = "request.bin"
PY_INPUTS_FILE = "request_inputs.json"
BINARY_DTYPES = ("FP16", "BF16")  # Triton reads and writes them only as binary data


@dataclass(frozen=True)
class Snippet:
    text: str  # the command / script, ready to copy
    files: dict[str, bytes] = field(default_factory=dict)  # name -> content, to write beside it


# -- curl ------------------------------------------------------------------------------------
def curl_command(
    url: str,
    request: InferRequest,
    *,
    output_types: Mapping[str, str] | None = None,
    inline_limit_bytes: int = INLINE_LIMIT_BYTES,
) -> Snippet:
    """`url` is Triton's HTTP endpoint (curl does not speak gRPC); `output_types`
    ({name: datatype}, from the model) lets FP16/BF16 outputs be asked as binary data."""
    endpoint = Endpoint.parse(url)
    if endpoint.transport is not Transport.HTTP:
        raise InferInputError(f"curl needs Triton's HTTP endpoint, not {url}")
    size = check_snippet_size(request)
    target = f"{endpoint.url}/v2/models/{quote(request.model, safe='')}"
    target += f"/versions/{quote(request.version, safe='')}/infer" if request.version else "/infer"
    binary = size > JSON_DATA_LIMIT_BYTES or any(_needs_binary(t) for t in request.inputs)
    header: dict[str, Any] = {"inputs": []}
    payload: list[bytes] = []
    for tensor in request.inputs:
        entry: dict[str, Any] = {"name": tensor.name, "shape": list(tensor.shape),
                                 "datatype": tensor.datatype}
        if binary:
            payload.append(wire_bytes(tensor))
            entry["parameters"] = {"binary_data_size": len(payload[-1])}
        else:
            entry["data"] = plain_values(tensor.data)
        header["inputs"].append(entry)
    types = dict(output_types or {})
    names = request.outputs
    if not names and not request.class_count and any(t in BINARY_DTYPES for t in types.values()):
        names = tuple(types)  # binary outputs must be asked for by name
    if names:
        header["outputs"] = [_output_entry(n, request.class_count, types.get(n)) for n in names]
    head = json.dumps(header, separators=(",", ":")).encode()
    body = b"".join([head, *payload])
    del payload
    options = ["curl", "-sS", "--fail-with-body", "-X", "POST", target]
    files: dict[str, bytes] = {}
    if binary:
        options += ["-H", "Content-Type: application/octet-stream",
                    "-H", f"Inference-Header-Content-Length: {len(head)}",
                    "--data-binary", f"@{BINARY_BODY_FILE}"]
        files[BINARY_BODY_FILE] = body
    elif len(body) > inline_limit_bytes:
        options += ["-H", "Content-Type: application/json", "--data-binary", f"@{JSON_BODY_FILE}"]
        files[JSON_BODY_FILE] = body
    else:
        options += ["-H", "Content-Type: application/json", "--data-binary", body.decode()]
    return Snippet(shlex.join(options), files)


def snippet_data_bytes(request: InferRequest) -> int:
    """The request's tensor data as Triton's binary extension carries it (BYTES: a 4-byte
    length before each element), counted without encoding anything."""
    total = 0
    for tensor in request.inputs:
        if tensor.datatype == "BYTES":
            total += sum(4 + len(v) for v in tensor.data.flat)
        else:
            total += tensor.data.size * (WIRE_BYTES.get(tensor.datatype) or tensor.data.dtype.itemsize)
    return total


def check_snippet_size(request: InferRequest) -> int:
    """The request's tensor data in bytes; InputTooLargeError when a snippet would carry more
    than MAX_SNIPPET_DATA_BYTES of it."""
    size = snippet_data_bytes(request)
    if size > MAX_SNIPPET_DATA_BYTES:
        raise InputTooLargeError(
            f"the request carries {size_text(size)} of tensor data; a curl or Python snippet carries at "
            f"most {size_text(MAX_SNIPPET_DATA_BYTES)}: make the batch or the shape smaller for the "
            "snippet (the request itself can still be sent)")
    return size


def _output_entry(name: str, class_count: int, datatype: str | None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"binary_data": datatype in BINARY_DTYPES and not class_count}
    if class_count:
        parameters["classification"] = class_count
    return {"name": name, "parameters": parameters}


def _needs_binary(tensor: Tensor) -> bool:
    if tensor.datatype in BINARY_DTYPES:
        return True
    if tensor.data.dtype.kind == "f":
        return not bool(np.all(np.isfinite(tensor.data)))
    if tensor.data.dtype == np.object_:
        try:
            for value in tensor.data.flat:
                value.decode()
        except UnicodeDecodeError:
            return True
    return False


def wire_bytes(tensor: Tensor) -> bytes:
    """The tensor as Triton's binary extension lays it out (row-major, little-endian)."""
    if tensor.datatype == "BYTES":
        return b"".join(len(v).to_bytes(4, "little") + v for v in tensor.data.flat)
    if tensor.datatype == "BF16":
        bits = np.ascontiguousarray(tensor.data, dtype="<f4").view("<u4") >> 16
        return bits.astype("<u2").tobytes()
    return np.ascontiguousarray(tensor.data).astype(tensor.data.dtype.newbyteorder("<")).tobytes()


def parse_http_response(body: bytes) -> list[dict[str, Any]]:
    """Triton's HTTP infer answer (JSON, or JSON header + binary outputs), as `tensor_record`s."""
    text = body.decode("latin-1")  # one char per byte: offsets stay byte offsets
    try:
        _, end = json.JSONDecoder().raw_decode(text)
        # Triton writes BYTES outputs into JSON as they are, even when they are not UTF-8.
        header = json.loads(body[:end].decode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise InferInputError(f"not a Triton inference response: {exc}") from exc
    if "error" in header:
        raise InferInputError(f"Triton answered with an error: {header['error']}")
    offset = end
    records = []
    for output in header.get("outputs", []):
        size = output.get("parameters", {}).get("binary_data_size")
        if size is None:
            data = output["data"]
            if output["datatype"] == "BYTES":
                data = [plain_bytes(v.encode("utf-8", "surrogateescape")) for v in data]
        else:
            data = _decode_wire(body[offset:offset + size], output["datatype"], math.prod(output["shape"]))
            offset += size
        records.append({"name": output["name"], "datatype": output["datatype"], "shape": output["shape"],
                        "data": data})
    return records


def _decode_wire(raw: bytes, datatype: str, count: int) -> list[Any]:
    if datatype == "BF16":
        return [float(v) for v in (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")]
    if datatype == "BYTES":
        items, at = [], 0
        while at < len(raw):
            length = int.from_bytes(raw[at:at + 4], "little")
            items.append(plain_bytes(raw[at + 4:at + 4 + length]))
            at += 4 + length
        return items
    values = np.frombuffer(raw, NUMPY_DTYPES[datatype].newbyteorder("<"), count=count)
    return [v.item() for v in values]


# -- python ----------------------------------------------------------------------------------
PY_TEMPLATE = '''\
"""Reproduces a geadmin test inference: the model, version and tensors are below."""
import base64
import json

import numpy as np
import tritonclient.{module} as triton

URL = {address!r}
MODEL = {model!r}
VERSION = {version!r}
OUTPUTS = {outputs!r}  # empty: every output
CLASS_COUNT = {class_count!r}  # > 0: Triton's classification extension
{inputs_line}


def tensor(spec):
    if spec["datatype"] == "BYTES":
        items = [base64.b64decode(v) for v in spec["items"]]
        data = np.empty(len(items), dtype=np.object_)
        data[:] = items
        return data.reshape(spec["shape"])
    return np.frombuffer(base64.b64decode(spec["raw"]), dtype=spec["numpy"]).reshape(spec["shape"])


def text(value):
    try:
        return value.decode()
    except UnicodeDecodeError:
        return {{"base64": base64.b64encode(value).decode()}}


def printable(data):
    if data.dtype == np.object_:
        return [text(v) if isinstance(v, bytes) else str(v) for v in data.flat]
    return [v.item() for v in data.flat]


client = triton.InferenceServerClient(URL{ssl})
inputs = []
for spec in INPUTS:
    item = triton.InferInput(spec["name"], spec["shape"], spec["datatype"])
    item.set_data_from_numpy(tensor(spec))
    inputs.append(item)
outputs = [triton.InferRequestedOutput(name, class_count=CLASS_COUNT) for name in OUTPUTS] or None
result = client.infer(MODEL, inputs, model_version=VERSION, outputs=outputs)
response = result.get_response({as_json})
print(json.dumps([
    {{"name": o["name"], "datatype": o["datatype"], "shape": list(result.as_numpy(o["name"]).shape),
      "data": printable(result.as_numpy(o["name"]))}}
    for o in response["outputs"]
]))
'''


def python_snippet(
    url: str, request: InferRequest, *, inline_limit_bytes: int = INLINE_LIMIT_BYTES
) -> Snippet:
    """A script for `tritonclient` over the URL's transport; it prints the outputs as JSON.
    Every user string is a literal of an assignment (`repr`) or inside the inputs' JSON."""
    endpoint = Endpoint.parse(url)
    check_snippet_size(request)
    specs = [_py_input(t) for t in request.inputs]
    encoded = json.dumps(specs)
    files: dict[str, bytes] = {}
    if len(encoded) > inline_limit_bytes:
        files[PY_INPUTS_FILE] = encoded.encode()
        inputs_line = f"with open({PY_INPUTS_FILE!r}) as handle:\n    INPUTS = json.load(handle)"
    else:
        inputs_line = f"INPUTS = json.loads({encoded!r})"
    grpc = endpoint.transport is Transport.GRPC
    text = PY_TEMPLATE.format(
        model=request.model, version=request.version, outputs=list(request.outputs),
        class_count=request.class_count, address=endpoint.address, inputs_line=inputs_line,
        module="grpc" if grpc else "http",
        ssl=", ssl=True" if endpoint.ssl else "",
        as_json="as_json=True" if grpc else "",
    )
    return Snippet(text, files)


def _py_input(tensor: Tensor) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
    if tensor.datatype == "BYTES":
        spec["items"] = [base64.b64encode(v).decode() for v in tensor.data.flat]
    else:
        data = np.ascontiguousarray(tensor.data)
        spec["numpy"] = data.dtype.str
        spec["raw"] = base64.b64encode(data.tobytes()).decode()
    return spec
