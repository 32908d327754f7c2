"""Request tensors for a test inference, from one `InputSource` per input: random (seeded,
within the dtype's range), zeros, ones, typed JSON, `.npy` bytes, image bytes
(`geadmin.ops.infer.images`) or text for BYTES. Every tensor is checked against its
`InputSpec` (`geadmin.ops.infer.spec`) before anything is sent.
"""

from __future__ import annotations

import enum
import io
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from tokenize import TokenError
from typing import Any

import numpy as np

from geadmin.errors import InferInputError
from geadmin.ops.infer.images import Normalize, image_layout, image_tensor
from geadmin.ops.infer.spec import (
    MAX_TENSOR_BYTES,
    MAX_UPLOAD_BYTES,
    NUMPY_DTYPES,
    InputSpec,
    ModelSpec,
    check_size,
    check_tensor,
    check_tensor_size,
    concrete_shape,
    dtype_of,
    load_json,
    object_array,
    to_bf16,
)

DEFAULT_SEED = 0
FLOAT_RANDOM_RANGE = (-1.0, 1.0)  # random floats: uniform in [low, high)
RANDOM_TEXT_CHARS = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))
RANDOM_TEXT_LENGTH = 8


class SourceKind(str, enum.Enum):
    RANDOM = "random"
    ZEROS = "zeros"
    ONES = "ones"
    JSON = "json"
    NPY = "npy"
    IMAGE = "image"
    TEXT = "text"


@dataclass(frozen=True)
class InputSource:
    """Where one input's data comes from. `payload` is the JSON/text string, or file bytes."""

    kind: SourceKind
    payload: str | bytes = ""
    normalize: Normalize = Normalize.NONE  # images only

    @classmethod
    def parse(cls, text: str, read_file: Any = None) -> InputSource:
        """`random`, `zeros`, `ones`, `json:...`, `text:...`, `@file.npy`, `@image.png`;
        `read_file(path) -> bytes` reads `@` files (the CLI passes one with the size limit)."""
        for kind in (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES):
            if text == kind.value:
                return cls(kind)
        for kind in (SourceKind.JSON, SourceKind.TEXT):
            if text.startswith(kind.value + ":"):
                return cls(kind, text[len(kind.value) + 1:])
        if text.startswith("@") and read_file is not None:
            path = text[1:]
            kind = SourceKind.NPY if path.lower().endswith(".npy") else SourceKind.IMAGE
            return cls(kind, read_file(path))
        raise InferInputError(f"unknown input source {text!r}: use random, zeros, ones, json:DATA, "
                              "text:STRING, @file.npy or @image.png")


RANDOM = InputSource(SourceKind.RANDOM)
ZEROS = InputSource(SourceKind.ZEROS)
GENERATED = (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES, SourceKind.TEXT)  # shaped by the picker


def source_kinds(spec: InputSpec) -> tuple[SourceKind, ...]:
    """The sources that can fill `spec`: text only for BYTES, images only for number inputs
    whose dims can hold one ([H, W], [C, H, W] or [H, W, C])."""
    kinds = [SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES, SourceKind.JSON, SourceKind.NPY]
    if spec.datatype == "BYTES":
        kinds.append(SourceKind.TEXT)
    elif spec.datatype != "BOOL" and spec.datatype in NUMPY_DTYPES:
        try:
            image_layout(spec)
            kinds.append(SourceKind.IMAGE)
        except InferInputError:
            pass
    return tuple(kinds)


# -- building ----------------------------------------------------------------------------------
def build_tensor(
    spec: InputSpec,
    source: InputSource,
    *,
    shape: Sequence[int] | None = None,
    batch_size: int = 1,
    seed: int = DEFAULT_SEED,
    max_batch_size: int = 0,
) -> np.ndarray:
    """The tensor `source` gives for `spec`, checked. `shape`/`batch_size` pick the shape of
    generated data (random, zeros, ones, text) and of images; JSON and .npy bring their own."""
    dtype_of(spec)
    kind = source.kind
    if kind in (SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES, SourceKind.TEXT):
        target = concrete_shape(spec, shape, batch_size)
        check_tensor_size(spec, target)
        if kind is SourceKind.RANDOM:
            data = random_tensor(spec, target, seed)
        elif kind is SourceKind.TEXT:
            data = text_tensor(spec, str(source.payload), target)
        else:
            data = filled_tensor(spec, target, 0 if kind is SourceKind.ZEROS else 1)
    elif kind is SourceKind.JSON:
        data = json_tensor(spec, source.payload)
    elif kind is SourceKind.NPY:
        data = npy_tensor(spec, _as_bytes(source.payload))
    else:
        data = image_tensor(spec, _as_bytes(source.payload), source.normalize, shape=shape,
                            batch_size=batch_size)
    if shape is not None and tuple(data.shape) != tuple(shape):
        raise InferInputError(f"input {spec.name}: the data has shape {list(data.shape)}, "
                              f"not the chosen [{', '.join(map(str, shape))}]")
    return check_tensor(spec, data, max_batch_size)


def _as_bytes(payload: str | bytes) -> bytes:
    return payload.encode() if isinstance(payload, str) else payload


def random_tensor(spec: InputSpec, shape: Sequence[int], seed: int = DEFAULT_SEED) -> np.ndarray:
    """Reproducible per (seed, input name), whatever the order of the inputs."""
    if seed < 0:
        raise InferInputError(f"the seed must be 0 or more, got {seed}")
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    dtype = dtype_of(spec)
    if spec.datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if spec.datatype == "BYTES":
        letters = rng.choice(RANDOM_TEXT_CHARS, size=(*shape, RANDOM_TEXT_LENGTH))
        flat = ["".join(row).encode() for row in letters.reshape(-1, RANDOM_TEXT_LENGTH)]
        return object_array(flat, shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    low, high = FLOAT_RANDOM_RANGE
    values = rng.uniform(low, high, size=shape).astype(dtype)
    return to_bf16(values) if spec.datatype == "BF16" else values


def filled_tensor(spec: InputSpec, shape: Sequence[int], value: int) -> np.ndarray:
    if spec.datatype == "BYTES":
        return object_array([b"" if value == 0 else str(value).encode()] * math.prod(shape), shape)
    return np.full(shape, value, dtype=dtype_of(spec))


def text_tensor(spec: InputSpec, text: str, shape: Sequence[int]) -> np.ndarray:
    if spec.datatype != "BYTES":
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; text is only for BYTES inputs")
    return object_array([utf8(spec, text)] * math.prod(shape), shape)


def json_tensor(spec: InputSpec, payload: str | bytes) -> np.ndarray:
    """Nested lists (`[[1, 2], [3, 4]]`) or flat with a shape (`{"shape": [2, 2], "data": [...]}`)."""
    document = load_json(payload, f"JSON for input {spec.name}")
    shape: tuple[int, ...] | None = None
    if isinstance(document, dict):
        if "data" not in document:
            raise InferInputError(f'input {spec.name}: a JSON object needs "data" (and "shape")')
        declared = document.get("datatype")
        if declared is not None and declared != spec.datatype:
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; the JSON says {declared}")
        raw_shape = document.get("shape")
        if raw_shape is not None:
            if not isinstance(raw_shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**31 for d in raw_shape):
                raise InferInputError(f'input {spec.name}: "shape" must be a list of sizes, '
                                      f'got {raw_shape!r}')
            shape = tuple(raw_shape)
        document = document["data"]
    values = _typed_values(spec, document)
    if shape is not None:
        if math.prod(shape) != values.size:
            raise InferInputError(f"input {spec.name}: {values.size} values do not fill shape {list(shape)}")
        try:
            values = values.reshape(shape)
        except (ValueError, TypeError) as exc:  # e.g. more dimensions than numpy allows
            raise InferInputError(f"input {spec.name}: shape {list(shape)} cannot be used: {exc}") from exc
    return values


def _typed_values(spec: InputSpec, document: Any) -> np.ndarray:
    """JSON values as the spec's dtype: no silent wrap-around, rounding or truthiness."""
    try:
        raw = np.array(document, dtype=np.object_)
    except ValueError as exc:  # ragged lists
        raise InferInputError(f"input {spec.name}: the JSON lists are ragged ({exc})") from exc
    if raw.dtype != np.object_ or any(isinstance(v, list) for v in raw.flat):
        raise InferInputError(f"input {spec.name}: the JSON lists are ragged")
    flat: list[Any] = list(raw.flat)
    kind = spec.datatype
    if kind == "BYTES":
        if not all(isinstance(v, str) for v in flat):
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; the JSON has non-strings")
        return object_array([utf8(spec, v) for v in flat], raw.shape)
    if kind == "BOOL":
        if not all(isinstance(v, bool) for v in flat):
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; the JSON has non-booleans")
        return np.array(flat, dtype=np.bool_).reshape(raw.shape)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat):
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; the JSON has non-numbers")
    dtype = NUMPY_DTYPES[kind]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bad = [v for v in flat if (isinstance(v, float) and not v.is_integer())
               or not info.min <= v <= info.max]
        if bad:
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; {bad[0]!r} is not a "
                                  f"{dtype} (range {info.min}..{info.max})")
        return np.array([int(v) for v in flat], dtype=dtype).reshape(raw.shape)
    limit = float(np.finfo(dtype).max)  # BF16's range is float32's; a Python int compares exactly
    over = next((v for v in flat if abs(v) > limit), None)
    if over is not None:  # else numpy raises OverflowError on an int too large for a float
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; {shown(over)} is over "
                              f"{kind}'s range (±{limit:.4g})")
    typed = np.array(flat, dtype=np.float64).astype(dtype).reshape(raw.shape)
    return to_bf16(typed) if kind == "BF16" else typed


def utf8(spec: InputSpec, text: str) -> bytes:
    """`text` as UTF-8 for a BYTES input; a lone surrogate (JSON "\\ud800", argv bytes that are
    not UTF-8) is an InferInputError naming the input and the text."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InferInputError(f"input {spec.name}: {shown(text)} is not valid Unicode text (character "
                              f"{exc.start + 1} is a lone surrogate, e.g. bytes that are not UTF-8): "
                              "give UTF-8 text") from exc


def shown(value: object, most: int = 40) -> str:
    """A user's value in a message, cut short: a 400-digit integer is not quoted whole."""
    if isinstance(value, int) and len(digits := str(abs(value))) > most // 2:
        return f"{'-' if value < 0 else ''}{digits[:most // 2]}… ({len(digits)} digits)"
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}…"


def npy_tensor(spec: InputSpec, data: bytes) -> np.ndarray:
    """A `.npy` file as it is: its dtype must be the input's (float32 for BF16)."""
    check_size(f".npy file for input {spec.name}", len(data), MAX_UPLOAD_BYTES)
    _check_npy_header(spec, data)
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except NPY_ERRORS as exc:
        raise InferInputError(f"input {spec.name}: not a readable .npy file ({exc})") from exc
    if not isinstance(array, np.ndarray):
        raise InferInputError(f"input {spec.name}: a .npz archive, not one .npy array")
    if spec.datatype == "BYTES" and array.dtype.kind in "SU":
        try:
            return object_array([v.encode() if isinstance(v, str) else bytes(v) for v in array.flat],
                                 array.shape)
        # a `<U` array holding code points past U+10FFFF: numpy raises SystemError reading one
        except (SystemError, UnicodeError, ValueError) as exc:
            raise InferInputError(f"input {spec.name}: the .npy strings are not valid text ({exc})") from exc
    if spec.datatype == "BF16" and array.dtype == np.float32:
        return to_bf16(array)
    return array


# numpy reads a .npy header with ast.literal_eval: a malformed one raises SyntaxError (or
# tokenize's TokenError) besides ValueError; short data raises EOFError / ValueError.
NPY_ERRORS = (ValueError, OSError, EOFError, SyntaxError, TokenError, TypeError, MemoryError, OverflowError)


def _check_npy_header(spec: InputSpec, data: bytes) -> None:
    """The shape and dtype a `.npy` header declares, checked before numpy allocates for them:
    a 100-byte file may declare a terabyte array."""
    if not data.startswith(b"\x93NUMPY"):
        return  # np.load says what it is (.npz, pickle, text)
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        declared = math.prod(int(d) for d in shape) * dtype.itemsize
    except NPY_ERRORS as exc:
        raise InferInputError(f"input {spec.name}: not a readable .npy file ({exc})") from exc
    check_size(f".npy file for input {spec.name} (shape {list(shape)})", declared, MAX_TENSOR_BYTES)
    if not dtype.hasobject and declared > len(data):
        raise InferInputError(f"input {spec.name}: the .npy header declares {list(shape)} {dtype} "
                              f"({declared} bytes), but the file holds {len(data)} bytes")


def build_inputs(
    model: ModelSpec,
    sources: Mapping[str, InputSource],
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    batch_size: int = 1,
    seed: int = DEFAULT_SEED,
    default: InputSource = RANDOM,
) -> dict[str, np.ndarray]:
    """Every required input's tensor (optional inputs only when a source names them)."""
    shapes = shapes or {}
    for name in [*sources, *shapes]:
        model.input(name)  # unknown names fail here, with the list of inputs
    tensors = {}
    for spec in model.inputs:
        if spec.optional and spec.name not in sources:
            continue
        tensors[spec.name] = build_tensor(spec, sources.get(spec.name, default), shape=shapes.get(spec.name),
                                          batch_size=batch_size, seed=seed,
                                          max_batch_size=model.max_batch_size)
    batches = {tensors[s.name].shape[0] for s in model.inputs if s.batched and s.name in tensors}
    if len(batches) > 1:
        raise InferInputError(f"inputs have different batch sizes {sorted(batches)}; one request has one")
    return tensors
