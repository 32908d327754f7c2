""".npy uploads as test-inference tensors: the header's shape and dtype checked against the
size limit before numpy allocates for them (a 100-byte file may declare a terabyte array),
then loaded without pickle; strings become bytes for a BYTES input, float32 is cut to BF16."""

from __future__ import annotations

import io
import math
from tokenize import TokenError

import numpy as np

from geadmin.errors import InferInputError
from geadmin.ops.infer.spec import (
    BYTES_ESTIMATE,
    MAX_TENSOR_BYTES,
    MAX_UPLOAD_BYTES,
    InputSpec,
    check_size,
    object_array,
    to_bf16,
)


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
        count = math.prod(int(d) for d in shape)
        declared = count * dtype.itemsize
    except NPY_ERRORS as exc:
        raise InferInputError(f"input {spec.name}: not a readable .npy file ({exc})") from exc
    if any(int(d) < 0 for d in shape):  # a negative product passes the size check below
        raise InferInputError(f"input {spec.name}: the .npy header declares the shape {list(shape)}, with "
                              "a dimension below 0: not an array numpy wrote")
    # Strings for a BYTES input become one Python bytes object each, as generated text does.
    held = declared + (count * BYTES_ESTIMATE if spec.datatype == "BYTES" else 0)
    check_size(f".npy file for input {spec.name} (shape {list(shape)})", held, MAX_TENSOR_BYTES)
    if not dtype.hasobject and declared > len(data):
        raise InferInputError(f"input {spec.name}: the .npy header declares {list(shape)} {dtype} "
                              f"({declared} bytes), but the file holds {len(data)} bytes")
