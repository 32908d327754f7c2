"""What a model's inputs and outputs accept, from its metadata and config, and the checks
a test-inference tensor passes before it is sent.

Each input gets an `InputSpec` (Triton dtype, dims with -1 where dynamic, whether the batch
dimension applies). A mismatch says what the input expects and what it got:
"input INPUT0 expects FP32 [-1, 4]; got int64 [2, 3]".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2

from geadmin.errors import InferInputError, InputTooLargeError
from geadmin.repository.bounded import read_bounded

MAX_UPLOAD_BYTES = 32 * 1024 * 1024  # an uploaded .npy / image / JSON document
MAX_TENSOR_BYTES = 256 * 1024 * 1024  # one built tensor (a shape like [1e9] is refused before allocating)
MAX_IMAGE_PIXELS = 25_000_000  # width x height of an uploaded image, read from its header before decoding
# A side of an uploaded image (JPEG's and WebP's own limit): Pillow keeps 8 bytes per row beside the
# pixels, so a 1 x 25,000,000 image held 300 MB decoded, and as much again converted.
MAX_IMAGE_SIDE = 65_535
MAX_JSON_DEPTH = 40  # nesting of a JSON document: a tensor has at most 32 dimensions (numpy's limit)

# Triton dtype -> the numpy dtype a tensor of it is held in (BF16: float32, as tritonclient wants).
NUMPY_DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16), "BF16": np.dtype(np.float32),
    "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
}
WIRE_BYTES = {"BF16": 2}  # bytes per element on the wire where it differs from the numpy dtype
BYTES_ESTIMATE = 64  # bytes per BYTES element besides its own text: a Python bytes object and its pointer
JSON_SCAN_CHUNK_BYTES = 1 << 18  # json_depth reads this much at a time: a few MiB of arrays at most


@dataclass(frozen=True)
class InputSpec:
    """What one model input accepts. `dims` excludes the batch dimension (-1 = dynamic)."""

    name: str
    datatype: str  # Triton's name: FP32, BYTES, ...
    dims: tuple[int, ...]
    batched: bool  # max_batch_size > 0: a leading batch dimension comes before `dims`
    format: str = "FORMAT_NONE"  # the config's `format` (FORMAT_NCHW / FORMAT_NHWC for images)
    optional: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        """The full shape Triton expects, batch dimension included (-1 when dynamic)."""
        return ((-1,) if self.batched else ()) + self.dims

    def describe(self) -> str:
        return f"{self.datatype} [{', '.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    datatype: str
    dims: tuple[int, ...]
    label_filename: str = ""  # from the config: one label per class, in the model directory


@dataclass(frozen=True)
class ModelSpec:
    name: str
    version: str
    max_batch_size: int
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    note: str = ""  # what is not known about the model, and why (said beside the request)

    def input(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise InferInputError(f"model {self.name!r} has no input {name!r} "
                              f"(inputs: {', '.join(s.name for s in self.inputs)})")

    def output(self, name: str) -> OutputSpec:
        for spec in self.outputs:
            if spec.name == name:
                return spec
        raise InferInputError(f"model {self.name!r} has no output {name!r} "
                              f"(outputs: {', '.join(s.name for s in self.outputs)})")


# -- specs from Triton ---------------------------------------------------------------------
def model_spec(name: str, metadata: Any, config: Any) -> ModelSpec:
    """From `ModelMetadataResponse` and the (normalized) `ModelConfig` of the same model."""
    batched = config.max_batch_size > 0
    configured = {i.name: i for i in config.input}
    inputs = []
    for tensor in metadata.inputs:
        shape = tuple(int(d) for d in tensor.shape)
        item = configured.get(tensor.name)
        fmt = model_format_name(item.format) if item is not None else "FORMAT_NONE"
        inputs.append(InputSpec(tensor.name, tensor.datatype, shape[1:] if batched else shape, batched,
                                fmt, bool(item.optional) if item is not None else False))
    labels = {o.name: o.label_filename for o in config.output}
    outputs = []
    for tensor in metadata.outputs:
        shape = tuple(int(d) for d in tensor.shape)
        outputs.append(OutputSpec(tensor.name, tensor.datatype, shape[1:] if batched else shape,
                                  labels.get(tensor.name, "")))
    version = metadata.versions[-1] if metadata.versions else ""
    return ModelSpec(name, version, int(config.max_batch_size), tuple(inputs), tuple(outputs))


def model_format_name(value: int) -> str:
    return str(model_config_pb2.ModelInput.Format.Name(value))


# -- shapes ----------------------------------------------------------------------------------
def concrete_shape(
    spec: InputSpec, shape: Sequence[int] | None = None, batch_size: int = 1
) -> tuple[int, ...]:
    """The shape to send: `shape` (full, batch included) when given and it fits, else the
    spec's with the batch size first and 1 for every other dynamic dimension."""
    if shape is not None:
        chosen = tuple(int(d) for d in shape)
        if not fits(spec, chosen) or any(d < 0 for d in chosen):
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; the shape "
                                  f"[{', '.join(map(str, chosen))}] does not fit it")
        return chosen
    if batch_size < 1:
        raise InferInputError(f"batch size must be at least 1, got {batch_size}")
    dims = tuple(1 if d < 0 else d for d in spec.dims)
    return ((batch_size,) if spec.batched else ()) + dims


def dynamic_dims(spec: InputSpec) -> tuple[int, ...]:
    """Positions in `spec.dims` (batch excluded) that are -1: what the shape picker asks for."""
    return tuple(i for i, d in enumerate(spec.dims) if d < 0)


def picked_shape(spec: InputSpec, sizes: Sequence[int], batch_size: int = 1) -> tuple[int, ...]:
    """The full shape from one size per dynamic dim (in `dynamic_dims` order) and the batch size."""
    positions = dynamic_dims(spec)
    if len(sizes) != len(positions):
        raise InferInputError(f"input {spec.name} has {len(positions)} dynamic dims, got {len(sizes)} sizes")
    chosen = dict(zip(positions, sizes, strict=True))
    dims = tuple(int(chosen.get(i, d)) for i, d in enumerate(spec.dims))
    if any(d < 1 for d in dims):
        raise InferInputError(f"input {spec.name}: every dimension must be at least 1, got {list(dims)}")
    if batch_size < 1:
        raise InferInputError(f"batch size must be at least 1, got {batch_size}")
    return ((batch_size,) if spec.batched else ()) + dims


def fits(spec: InputSpec, shape: Sequence[int]) -> bool:
    expected = spec.shape
    return len(shape) == len(expected) and all(e < 0 or e == s for e, s in zip(expected, shape, strict=True))


def check_tensor(spec: InputSpec, data: np.ndarray, max_batch_size: int = 0) -> np.ndarray:
    """`data` unchanged when it fits the spec, else an InferInputError naming both sides."""
    dtype_ok = data.dtype == NUMPY_DTYPES.get(spec.datatype)
    if spec.datatype == "BYTES":
        dtype_ok = data.dtype == np.object_ and all(isinstance(v, bytes) for v in data.flat)
    if not dtype_ok or not fits(spec, data.shape):
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; got {_describe_array(data)}")
    if data.shape:
        check_batch(spec, data.shape[0], max_batch_size)
    return data


def check_batch(spec: InputSpec, batch_size: int, max_batch_size: int) -> None:
    """A batch below 1, or over the model's max_batch_size, is refused (before any data is made
    for it: a negative one had reached numpy, exit 70)."""
    if batch_size < 1:
        raise InferInputError(f"input {spec.name}: batch size {batch_size} is not a batch: give 1 or more")
    if spec.batched and max_batch_size and batch_size > max_batch_size:
        raise InferInputError(f"input {spec.name}: batch size {batch_size} is over the model's "
                              f"max_batch_size {max_batch_size}")


def _describe_array(data: np.ndarray) -> str:
    kind = "bytes" if data.dtype == np.object_ else str(data.dtype)
    return f"{kind} [{', '.join(str(d) for d in data.shape)}]"


def check_size(what: str, n_bytes: int, limit: int) -> None:
    if n_bytes > limit:
        raise InputTooLargeError(f"{what} is {n_bytes / 1e6:.1f} MB, over the limit of {limit / 1e6:.1f} MB")


def check_tensor_size(spec: InputSpec, shape: Sequence[int], limit: int = MAX_TENSOR_BYTES, *,
                      text_bytes: int = 0) -> None:
    """Before a tensor of `shape` is made: its bytes within `limit`. A BYTES element counts
    BYTES_ESTIMATE plus its text, `text_bytes` long (a `text:` source's UTF-8 length; generated
    text is within the estimate): a long text repeated is as large as it is on the wire."""
    what = f"input {spec.name} of shape [{', '.join(map(str, shape))}]"
    if any(d < 0 for d in shape):  # a negative product passes any limit
        raise InferInputError(f"{what}: a dimension below 0 is no size: give 0 or more for each")
    if spec.datatype == "BYTES":
        item = BYTES_ESTIMATE + text_bytes
        if text_bytes:
            what += f" ({text_bytes:,} bytes of text each)"
    else:
        item = WIRE_BYTES.get(spec.datatype) or NUMPY_DTYPES[spec.datatype].itemsize
    check_size(what, math.prod(shape) * item, limit)


_STEPS = np.zeros(256, dtype=np.int8)  # what a byte outside a string does to the nesting
_STEPS[[ord("["), ord("{")]] = 1
_STEPS[[ord("]"), ord("}")]] = -1


def json_depth(text: str | bytes, *, chunk_bytes: int = JSON_SCAN_CHUNK_BYTES) -> int:
    """How deeply `text`'s arrays and objects nest, found without parsing (json.loads recurses
    once per level: RecursionError), in one linear pass of a small state machine: a backslash
    escapes the byte after it, a quote not escaped enters or leaves a string, a bracket outside
    a string opens or closes a level. (Outside a string a backslash is no JSON at all, and
    json.loads stops there: what it escapes there does not matter.) numpy runs the machine a
    chunk at a time, carrying its state (in a string, an escape pending, the depth) across
    chunks, so every byte costs the same: a regex had rescanned from every quote of an
    unterminated string (50 s of CPU for 120 KB, hours for the 32 MB the Playground takes)."""
    raw = text.encode() if isinstance(text, str) else text
    data = np.frombuffer(raw, dtype=np.uint8)
    inside, escaping, depth, deepest = False, False, 0, 0
    for start in range(0, data.size, chunk_bytes):
        inside, escaping, depth, deepest = _scan(data[start:start + chunk_bytes], inside, escaping, depth,
                                                 deepest)
    return deepest


def _scan(chunk: np.ndarray, inside: bool, escaping: bool, depth: int, deepest: int
          ) -> tuple[bool, bool, int, int]:
    """One chunk of json_depth's pass: the state after it, from the state before it."""
    positions = np.arange(chunk.size, dtype=np.int64)
    backslash = chunk == ord("\\")
    plain = np.maximum.accumulate(np.where(backslash, -1, positions))  # last byte so far that is no backslash
    before = np.zeros(chunk.size, dtype=np.int64)  # backslashes in this chunk right before each byte
    before[1:] = positions[:-1] - plain[:-1]
    escaped = (before & 1).astype(bool)
    if escaping:  # the previous chunk ended in an odd run of backslashes: it goes on up to here
        escaped[before == positions] ^= True
    quotes = (chunk == ord('"')) & ~escaped
    in_string = (np.cumsum(quotes, dtype=np.int64) & 1).astype(bool) ^ inside
    levels = np.cumsum(np.where(in_string | escaped, 0, _STEPS[chunk]), dtype=np.int64)
    trailing = chunk.size - 1 - int(plain[-1])  # the backslashes the chunk ends with
    pending = bool(trailing & 1) ^ (escaping and int(plain[-1]) < 0)
    return bool(in_string[-1]), pending, depth + int(levels[-1]), max(deepest, depth + int(levels.max()))


def load_json(text: str | bytes, what: str, *, max_depth: int = MAX_JSON_DEPTH,
              limit_bytes: int = MAX_UPLOAD_BYTES) -> Any:
    """A JSON document from a user, bounded in size and nesting; InferInputError naming `what`."""
    try:
        raw = text.encode() if isinstance(text, str) else text
    except UnicodeEncodeError as exc:  # a lone surrogate: bytes that were not UTF-8 on the command line
        raise InferInputError(f"{what}: not UTF-8 text ({exc.reason} at position {exc.start})") from exc
    check_size(what, len(raw), limit_bytes)
    depth = json_depth(raw)
    if depth > max_depth:
        raise InferInputError(f"{what}: JSON nested {depth} levels deep; the limit is {max_depth}")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InferInputError(f"{what}: not JSON ({exc})") from exc


def dtype_of(spec: InputSpec) -> np.dtype[Any]:
    try:
        return NUMPY_DTYPES[spec.datatype]
    except KeyError as exc:
        raise InferInputError(f"input {spec.name} has datatype {spec.datatype}, which geadmin "
                              f"cannot build ({', '.join(NUMPY_DTYPES)})") from exc


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values cut to bfloat16 precision, as tritonclient truncates them on the wire,
    so the tensor geadmin shows is the one Triton receives."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def object_array(items: Sequence[bytes], shape: Sequence[int]) -> np.ndarray:
    array = np.empty(len(items), dtype=np.object_)
    array[:] = list(items)
    return array.reshape(tuple(shape))


def read_local_file(path: str) -> bytes:
    """A local file given on the command line (`@file.npy`, `@image.png`), never more than
    MAX_UPLOAD_BYTES of it, and only a regular file (geadmin.repository.bounded)."""
    return read_bounded(path, MAX_UPLOAD_BYTES, what="input file", error=InferInputError,
                        too_large=InputTooLargeError,
                        fix="give a smaller regular file (a .npy, an image or a JSON document)")
