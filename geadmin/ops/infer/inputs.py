"""Request tensors for a test inference, from one `InputSource` per input: random (seeded,
within the dtype's range, made in the input's dtype), zeros, ones, typed JSON, `.npy` bytes
(`geadmin.ops.infer.npy`), image bytes (`geadmin.ops.infer.images`) or text for BYTES. Every
tensor is checked against its `InputSpec` (`geadmin.ops.infer.spec`) before anything is sent;
generated data's batch and size before it is made.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geadmin.errors import InferInputError
from geadmin.ops.infer.images import Normalize, image_layout, image_tensor
from geadmin.ops.infer.npy import npy_tensor
from geadmin.ops.infer.spec import (
    NUMPY_DTYPES,
    InputSpec,
    ModelSpec,
    check_batch,
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
RANDOM_TEXT_CHARS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
RANDOM_TEXT_LENGTH = 8
RANDOM_CHUNK = 1 << 18  # random floats are drawn this many at a time, straight into the tensor


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
    generated data (random, zeros, ones, text) and of images; JSON and .npy bring their own.
    The batch and the size are checked before any data is made or decoded."""
    dtype_of(spec)
    kind = source.kind
    if kind in GENERATED:
        target = concrete_shape(spec, shape, batch_size)
        if target:
            check_batch(spec, target[0], max_batch_size)
        if kind is SourceKind.TEXT:
            item = text_item(spec, str(source.payload))
            check_tensor_size(spec, target, text_bytes=len(item))
            data = object_array([item] * math.prod(target), target)
        else:
            check_tensor_size(spec, target)
            data = (random_tensor(spec, target, seed) if kind is SourceKind.RANDOM
                    else filled_tensor(spec, target, 0 if kind is SourceKind.ZEROS else 1))
    elif kind is SourceKind.JSON:
        data = json_tensor(spec, source.payload)
    elif kind is SourceKind.NPY:
        data = npy_tensor(spec, _as_bytes(source.payload))
    else:
        check_batch(spec, shape[0] if shape and spec.batched else batch_size, max_batch_size)
        data = image_tensor(spec, _as_bytes(source.payload), source.normalize, shape=shape,
                            batch_size=batch_size)
    if shape is not None and tuple(data.shape) != tuple(shape):
        raise InferInputError(f"input {spec.name}: the data has shape {list(data.shape)}, "
                              f"not the chosen [{', '.join(map(str, shape))}]")
    return check_tensor(spec, data, max_batch_size)


def _as_bytes(payload: str | bytes) -> bytes:
    return payload.encode() if isinstance(payload, str) else payload


def random_tensor(spec: InputSpec, shape: Sequence[int], seed: int = DEFAULT_SEED) -> np.ndarray:
    """Reproducible per (seed, input name), whatever the order of the inputs. Made in the
    input's own dtype (floats a chunk at a time): never a float64 or int64 copy of it first."""
    if seed < 0:
        raise InferInputError(f"the seed must be 0 or more, got {seed}")
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    dtype = dtype_of(spec)
    if spec.datatype == "BOOL":
        return rng.integers(0, 2, size=shape, dtype=np.uint8).view(np.bool_)
    if spec.datatype == "BYTES":
        return _random_words(rng, shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values = np.empty(shape, dtype=dtype)
    flat = values.reshape(-1)
    low, high = FLOAT_RANDOM_RANGE
    drawn = np.float64 if dtype == np.float64 else np.float32
    for start in range(0, flat.size, RANDOM_CHUNK):
        part = rng.random(min(RANDOM_CHUNK, flat.size - start), dtype=drawn)
        part *= high - low
        part += low
        flat[start:start + part.size] = to_bf16(part) if spec.datatype == "BF16" else part
    return values


def _random_words(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """RANDOM_TEXT_LENGTH letters and digits per element, as bytes."""
    count = math.prod(shape)
    codes = rng.integers(0, RANDOM_TEXT_CHARS.size, size=count * RANDOM_TEXT_LENGTH, dtype=np.uint8)
    text = RANDOM_TEXT_CHARS[codes].tobytes()
    del codes
    step = RANDOM_TEXT_LENGTH
    return object_array([text[i:i + step] for i in range(0, len(text), step)], shape)


def filled_tensor(spec: InputSpec, shape: Sequence[int], value: int) -> np.ndarray:
    if spec.datatype == "BYTES":
        return object_array([b"" if value == 0 else str(value).encode()] * math.prod(shape), shape)
    return np.full(shape, value, dtype=dtype_of(spec))


def text_item(spec: InputSpec, text: str) -> bytes:
    """One element of a `text:` source: UTF-8, and only for a BYTES input."""
    if spec.datatype != "BYTES":
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; text is only for BYTES inputs")
    return utf8(spec, text)


def text_tensor(spec: InputSpec, text: str, shape: Sequence[int]) -> np.ndarray:
    return object_array([text_item(spec, text)] * math.prod(shape), shape)


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
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; {shown(bad[0])} is not a "
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
