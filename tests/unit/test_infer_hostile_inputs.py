"""Hostile test-inference inputs cost what their size says, not more, and are refused before
they cost it: JSON nesting is measured in one linear pass (an unterminated string took 50 s
for 120 KB), a batch over max_batch_size or a text over the tensor limit is refused before
any data is generated, random data is made in the input's dtype, an image of extreme
proportions is refused from its header, a labels file that is a FIFO is refused, and an
out-of-range number is quoted short.

A test that guards against slowness bounds its wait (`pytest.mark.timeout`, generous: the old
code needed minutes to hours there, the fixed one milliseconds) and asserts on results, never
on elapsed time; memory is measured with tracemalloc (tests/support/memory.py).
"""

from __future__ import annotations

import io
import json
import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from geadmin.errors import InferInputError, InputTooLargeError, RepositoryError
from geadmin.ops.infer.images import Normalize, image_tensor
from geadmin.ops.infer.inputs import InputSource, SourceKind, build_tensor, json_tensor, random_tensor
from geadmin.ops.infer.outputs import read_labels
from geadmin.ops.infer.request import build_request
from geadmin.ops.infer.spec import (
    MAX_JSON_DEPTH,
    MAX_TENSOR_BYTES,
    NUMPY_DTYPES,
    InputSpec,
    ModelSpec,
    OutputSpec,
    json_depth,
)
from tests.support.hypothesis_profiles import examples
from tests.support.memory import peak_bytes

MIB = 1 << 20


# -- JSON nesting: one linear pass ---------------------------------------------------------------
def reference_depth(raw: bytes) -> int:
    """The state machine json_depth runs, byte by byte: a backslash escapes the next byte, an
    unescaped quote enters or leaves a string, a bracket outside a string counts."""
    depth = deepest = 0
    inside = escaped = False
    for byte in raw:
        if escaped:
            escaped = False
        elif byte == ord("\\"):
            escaped = True
        elif byte == ord('"'):
            inside = not inside
        elif not inside and byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and byte in b"]}":
            depth -= 1
    return deepest


@pytest.mark.timeout(15)  # the fixed pass takes milliseconds; the old one 50 s of CPU
def test_the_reviewers_unterminated_string_is_measured_at_once() -> None:
    attack = '"' + '\\"' * 60_000  # 120 KB: the regex rescanned from every quote (50 s of CPU)
    assert json_depth(attack) == 0
    with pytest.raises(InferInputError, match="not JSON"):
        json_tensor(InputSpec("features", "FP32", (-1,), False), attack)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["escaped quotes", "quotes", "backslashes", "strings", "brackets",
                                  "open strings"])
def test_multi_megabyte_hostile_json_is_measured_in_one_pass(name: str) -> None:
    size = 8 * MIB  # the old code needed hours for the first of these
    document = {
        "escaped quotes": b'"' + b'\\"' * (size // 2),
        "quotes": b'"' * size,
        "backslashes": b"[" + b"\\" * size,
        "strings": b"[" + b'"a",' * (size // 4),
        "brackets": b"[]" * (size // 2),
        "open strings": b'["' + b'[\\"' * (size // 3),
    }[name]
    expected = 0 if name in ("escaped quotes", "quotes") else 1
    depth, peak = peak_bytes(lambda: json_depth(document))
    assert depth == expected
    assert peak < 32 * MIB  # a few chunks' arrays, never arrays of the document's size


def test_the_deepest_document_the_upload_limit_allows_is_counted_exactly() -> None:
    deep = b"[" * (16 * MIB) + b"]" * (16 * MIB)
    assert json_depth(deep) == 16 * MIB


@settings(max_examples=examples(500))
@given(st.binary(max_size=200).map(lambda b: bytes(b'"\\[]{}ab'[x % 8] for x in b)), st.integers(1, 9))
def test_the_chunked_pass_is_the_state_machine_whatever_the_chunk_boundaries(raw: bytes, chunk: int) -> None:
    assert json_depth(raw, chunk_bytes=chunk) == reference_depth(raw)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='"\\[]{}ab\n'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='"\\[]{}a'), inner,
                                                               max_size=3),
    max_leaves=20)


def nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=examples(300))
@given(JSON_VALUES, st.integers(1, 7))
def test_valid_json_is_measured_as_deep_as_it_parses(value: object, chunk: int) -> None:
    assert json_depth(json.dumps(value), chunk_bytes=chunk) == nesting(value)


def test_nesting_over_the_limit_is_still_refused() -> None:
    with pytest.raises(InferInputError, match=f"nested {MAX_JSON_DEPTH + 1} levels deep"):
        deep = MAX_JSON_DEPTH + 1
        json_tensor(InputSpec("x", "FP32", (-1,), False), "[" * deep + "1" + "]" * deep)


# -- batch and size refused before any data is generated ------------------------------------------
DIGITS = ModelSpec("digits_classifier", "1", 32, (InputSpec("features", "FP32", (64,), True),),
                   (OutputSpec("probabilities", "FP32", (10,)),))


def test_a_batch_over_max_batch_size_is_refused_before_generating_data() -> None:
    # 1,000,000 x 64 FP32 is 256 MB, just under the tensor limit: the old code made it (840 MB peak).
    raised, peak = peak_bytes(lambda: build_request(DIGITS, batch_size=1_000_000))
    assert isinstance(raised, InferInputError)
    assert str(raised) == "input features: batch size 1000000 is over the model's max_batch_size 32"
    assert peak < 1 * MIB


@pytest.mark.parametrize("kind", [SourceKind.ZEROS, SourceKind.ONES, SourceKind.TEXT])
def test_every_generated_source_checks_the_batch_first(kind: SourceKind) -> None:
    spec = ModelSpec("m", "1", 4, (InputSpec("t", "BYTES", (2,), True),), ())
    sources = {"t": InputSource(kind, "x")}
    raised, peak = peak_bytes(lambda: build_request(spec, sources, batch_size=2_000_000))
    assert isinstance(raised, InferInputError) and "over the model's max_batch_size 4" in str(raised)
    assert peak < 1 * MIB


def test_an_image_batch_over_max_batch_size_is_refused_before_decoding() -> None:
    spec = ModelSpec("m", "1", 8, (InputSpec("image", "UINT8", (3, 8, 8), True),), ())
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "PNG")
    source = InputSource(SourceKind.IMAGE, buffer.getvalue())
    with pytest.raises(InferInputError, match="batch size 9 is over the model's max_batch_size 8"):
        build_request(spec, {"image": source}, batch_size=9)


@pytest.mark.parametrize("batch_size", [0, -1, -(2**40)])
def test_a_batch_below_one_is_refused_for_every_source(batch_size: int) -> None:
    """Never numpy's error (exit 70): a negative batch passes a size check as a negative product."""
    spec = ModelSpec("m", "1", 8, (InputSpec("image", "UINT8", (3, 8, 8), True),), ())
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "PNG")
    for source in (InputSource(SourceKind.IMAGE, buffer.getvalue()), InputSource(SourceKind.RANDOM, "")):
        refused = rf"batch size (must be at least 1, got {batch_size}|{batch_size} is not a batch)"
        with pytest.raises(InferInputError, match=refused):
            build_request(spec, {"image": source}, batch_size=batch_size)


def test_a_negative_dimension_is_no_size_anywhere() -> None:
    from geadmin.ops.infer.spec import check_tensor_size

    with pytest.raises(InferInputError, match=r"shape \[-2, 3\]: a dimension below 0 is no size"):
        check_tensor_size(InputSpec("x", "FP32", (-1, 3), False), (-2, 3))
    header = {"descr": "<f4", "fortran_order": False, "shape": (-(2**28), 2**36 - 1)}
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, header)
    source = InputSource(SourceKind.NPY, stream.getvalue())
    with pytest.raises(InferInputError, match=r"a dimension below 0: not an array numpy wrote"):
        build_request(ModelSpec("m", "1", 0, (InputSpec("x", "FP32", (-1, -1), False),), ()), {"x": source})


def test_json_text_that_is_not_utf8_is_an_input_error() -> None:
    """Bytes that are not UTF-8 on the command line arrive as a lone surrogate: encode() raised."""
    with pytest.raises(InferInputError, match="not UTF-8 text"):
        json_tensor(InputSpec("x", "BYTES", (-1,), False), '["\udcff"]')


@pytest.mark.parametrize("datatype", ["FP16", "BF16", "FP32", "FP64", "BOOL", "INT8", "UINT16", "INT64"])
def test_random_data_is_made_in_the_inputs_dtype_not_through_float64(datatype: str) -> None:
    count = 4 * MIB  # elements
    tensor, peak = peak_bytes(lambda: random_tensor(InputSpec("x", datatype, (-1,), False), (count,)))
    assert isinstance(tensor, np.ndarray) and tensor.dtype == NUMPY_DTYPES[datatype]
    assert peak < tensor.nbytes * 1.25 + 8 * MIB, f"{peak / MIB:.0f} MiB for {tensor.nbytes / MIB:.0f} MiB"


def test_random_bytes_stay_within_the_memory_their_size_check_allows() -> None:
    count = 200_000
    spec = InputSpec("t", "BYTES", (-1,), False)
    tensor, peak = peak_bytes(lambda: random_tensor(spec, (count,)))
    assert isinstance(tensor, np.ndarray) and len(tensor[0]) == 8
    assert peak < count * 64 * 1.25  # BYTES_ESTIMATE a word, as check_tensor_size counts it


def test_a_long_text_times_many_elements_is_refused_from_its_real_length() -> None:
    # 1 MB of text x 4,000,000 elements is 4 TB on the wire: the old check counted 64 bytes each.
    spec = ModelSpec("m", "1", 0, (InputSpec("t", "BYTES", (-1,), False),), ())
    source = InputSource(SourceKind.TEXT, "A" * 1_000_000)
    raised, peak = peak_bytes(lambda: build_request(spec, {"t": source}, shapes={"t": [4_000_000]}))
    assert isinstance(raised, InputTooLargeError), raised
    assert "input t of shape [4000000] (1,000,000 bytes of text each)" in str(raised)
    assert peak < 4 * MIB
    fits = build_request(spec, {"t": InputSource(SourceKind.TEXT, "A" * 1000)}, shapes={"t": [1000]})
    assert fits.inputs[0].data.shape == (1000,)


def test_text_just_under_the_limit_is_built() -> None:
    spec = InputSpec("t", "BYTES", (-1,), False)
    length = 1_000_000
    count = MAX_TENSOR_BYTES // (length + 64)
    data = build_tensor(spec, InputSource(SourceKind.TEXT, "b" * length), shape=(count,))
    assert data.shape == (count,)
    with pytest.raises(InputTooLargeError):
        build_tensor(spec, InputSource(SourceKind.TEXT, "b" * length), shape=(count + 1,))


# -- images of extreme proportions -----------------------------------------------------------------
def flat_png(width: int, height: int) -> bytes:
    """A `width` x `height` RGBA PNG of one colour, written row by row (a few hundred KB):
    Pillow would hold the whole image to save it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 6, 0, 0, 0])
    compressor = zlib.compressobj(9)
    row = b"\0" + bytes([200, 100, 50, 255]) * width
    rows_at_once = max(1, (1 << 22) // len(row))
    parts = [compressor.compress(row * min(rows_at_once, height - done))
             for done in range(0, height, rows_at_once)]
    parts.append(compressor.flush())
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(parts))
            + chunk(b"IEND", b""))


def test_an_image_of_extreme_proportions_is_refused_from_its_header() -> None:
    # 120 KB, one pixel under the pixel limit: Pillow held 300 MB for its rows, the resize 800 MB more.
    data = flat_png(1, 24_999_999)
    raised, peak = peak_bytes(lambda: image_tensor(InputSpec("image", "FP32", (3, 8, 8), True), data))
    assert isinstance(raised, InputTooLargeError)
    assert str(raised) == ("input image: the image is 1 x 24999999 pixels; the limit is 65535 pixels a side: "
                           "crop or resize it")
    assert peak < 4 * MIB


def test_an_image_at_the_side_limit_still_works() -> None:
    tensor = image_tensor(InputSpec("image", "FP32", (3, 8, 8), True), flat_png(1, 65_535))
    assert tensor.shape == (1, 3, 8, 8) and sorted(set(tensor.ravel().tolist())) == [50.0, 100.0, 200.0]
    with pytest.raises(InputTooLargeError, match="65536 x 1 pixels; the limit is 65535 pixels a side"):
        image_tensor(InputSpec("image", "FP32", (3, 8, 8), True), flat_png(65_536, 1))


@pytest.mark.parametrize(("datatype", "normalize"), [("UINT8", Normalize.NONE), ("FP32", Normalize.IMAGENET),
                                                     ("FP16", Normalize.UNIT)])
def test_image_pixels_are_not_copied_as_float64_for_a_narrower_input(datatype: str,
                                                                     normalize: Normalize) -> None:
    side = 1024
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (10, 20, 30)).save(buffer, "PNG")
    spec = InputSpec("image", datatype, (side, side, 3), False)
    tensor, peak = peak_bytes(lambda: image_tensor(spec, buffer.getvalue(), normalize))
    assert isinstance(tensor, np.ndarray) and tensor.shape == (side, side, 3)
    float32_copy = side * side * 3 * 4  # the widest array the fixed path holds besides the tensor
    assert peak < tensor.nbytes + 2 * float32_copy, f"{peak / MIB:.0f} MiB for {tensor.nbytes / MIB:.0f} MiB"


@pytest.mark.parametrize(("size", "target"), [((2, 40), (8, 4)), ((40, 2), (4, 8)), ((3, 5), (9, 10)),
                                              ((12, 12), (4, 4))])
def test_mixed_resizes_average_the_shrinking_side_and_interpolate_the_growing_one(
        size: tuple[int, int], target: tuple[int, int]) -> None:
    width, height = target
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 20, 30)).save(buffer, "PNG")
    tensor = image_tensor(InputSpec("image", "UINT8", (height, width, 3), False), buffer.getvalue())
    assert tensor.shape == (height, width, 3)
    assert (tensor == np.array([10, 20, 30], dtype=np.uint8)).all()


# -- labels files and messages ---------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_a_labels_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m").mkdir(parents=True)
    os.mkfifo(tmp_path / "repo" / "m" / "labels.txt")  # nobody writes: reading it would never end
    with pytest.raises(RepositoryError, match="not a regular file") as raised:
        read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), "labels.txt"))
    assert "labels.txt" in str(raised.value) and "\n" not in str(raised.value)


def test_a_labels_file_over_the_limit_is_refused_and_one_under_is_read(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m").mkdir(parents=True)
    with (tmp_path / "repo" / "m" / "big.txt").open("wb") as handle:
        handle.truncate(40 * MIB)  # sparse
    with pytest.raises(RepositoryError, match=r"more than 32\.0 MiB"):
        read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), "big.txt"))
    (tmp_path / "repo" / "m" / "ok.txt").write_text("cat\ndog\n")
    assert read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), "ok.txt")) == ["cat", "dog"]


def test_a_label_file_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "labels.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(RepositoryError, match="not UTF-8"):
        read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), "labels.txt"))


@pytest.mark.parametrize("datatype", ["INT8", "INT32", "UINT64", "INT64"])
def test_an_out_of_range_integer_is_quoted_short(datatype: str) -> None:
    huge = "9" * 4000
    with pytest.raises(InferInputError) as raised:
        json_tensor(InputSpec("x", datatype, (-1,), False), f"[1, {huge}]")
    message = str(raised.value)
    assert "(4000 digits) is not a" in message and len(message) < 200, message
    with pytest.raises(InferInputError, match=r"-12\.5 is not a"):
        json_tensor(InputSpec("x", datatype, (-1,), False), "[-12.5]")
