"""Test-inference requests without a server: specs from metadata/config, every dtype from
every source, shapes, images, size limits, BF16, top-k, and the curl / Python snippets."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format, text_format
from PIL import Image
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import deserialize_bf16_tensor, serialize_bf16_tensor

from geadmin.cli import infer as cli_infer
from geadmin.cli.main import main
from geadmin.errors import (
    InferInputError,
    InputTooLargeError,
    RepositoryError,
    TritonRequestError,
    TritonUnreachableError,
)
from geadmin.ops.infer.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Normalize,
    image_layout,
    image_tensor,
    output_image,
)
from geadmin.ops.infer.inputs import (
    FLOAT_RANDOM_RANGE,
    InputSource,
    SourceKind,
    build_inputs,
    build_tensor,
    json_tensor,
    npy_tensor,
    random_tensor,
    source_kinds,
)
from geadmin.ops.infer.outputs import (
    TopKPlan,
    parse_classification,
    plain_values,
    rank_outputs,
    read_labels,
    tensor_record,
    tensor_rows,
    top_k,
    top_k_plan,
)
from geadmin.ops.infer.request import InferRequest, InferResult, build_request, input_fix
from geadmin.ops.infer.snippets import (
    BINARY_BODY_FILE,
    JSON_BODY_FILE,
    PY_INPUTS_FILE,
    curl_command,
    parse_http_response,
    python_snippet,
    wire_bytes,
)
from geadmin.ops.infer.spec import (
    MAX_UPLOAD_BYTES,
    NUMPY_DTYPES,
    InputSpec,
    ModelSpec,
    OutputSpec,
    check_tensor,
    concrete_shape,
    dynamic_dims,
    model_spec,
    picked_shape,
    read_local_file,
    to_bf16,
)
from geadmin.triton.client import Tensor, TritonClient, _infer_inputs, _requested_outputs

DTYPES = list(NUMPY_DTYPES)
NUMERIC = [d for d in DTYPES if d not in ("BYTES", "BOOL")]
INTS = [d for d in DTYPES if d.startswith(("INT", "UINT"))]
FLOATS = ["FP16", "BF16", "FP32", "FP64"]


def spec_of(datatype: str, dims: tuple[int, ...] = (4,), batched: bool = True, **kw: object) -> InputSpec:
    return InputSpec("INPUT0", datatype, dims, batched, **kw)  # type: ignore[arg-type]


def png(pixels: np.ndarray, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format="PNG")
    return buffer.getvalue()


# -- the dtype table and specs ---------------------------------------------------------------
def test_every_triton_datatype_has_a_numpy_dtype() -> None:
    triton = {name.removeprefix("TYPE_").replace("STRING", "BYTES")
              for name in list(model_config_pb2.DataType.keys()) if name != "TYPE_INVALID"}
    assert set(NUMPY_DTYPES) == triton


def test_model_spec_from_metadata_and_config_keeps_batch_dynamic_dims_format_and_labels() -> None:
    metadata = json_format.ParseDict({
        "name": "m", "versions": ["1", "3"], "platform": "python",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [-1, 3, -1, -1]},
                   {"name": "mask", "datatype": "BOOL", "shape": [-1, 4]}],
        "outputs": [{"name": "scores", "datatype": "FP32", "shape": [-1, 10]}],
    }, service_pb2.ModelMetadataResponse())
    config = text_format.Parse("""
        name: "m" max_batch_size: 8
        input [ { name: "image" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, -1, -1] },
                { name: "mask" data_type: TYPE_BOOL dims: [4] optional: true } ]
        output [ { name: "scores" data_type: TYPE_FP32 dims: [10] label_filename: "labels.txt" } ]
    """, model_config_pb2.ModelConfig())
    spec = model_spec("m", metadata, config)
    image, mask = spec.inputs
    assert image == InputSpec("image", "FP32", (3, -1, -1), True, "FORMAT_NCHW", False)
    assert image.shape == (-1, 3, -1, -1)
    assert mask.optional and mask.format == "FORMAT_NONE"
    assert spec.outputs == (OutputSpec("scores", "FP32", (10,), "labels.txt"),)
    assert spec.version == "3" and spec.max_batch_size == 8


def test_model_spec_without_batching_keeps_the_full_shape() -> None:
    metadata = json_format.ParseDict(
        {"name": "m", "inputs": [{"name": "x", "datatype": "INT8", "shape": [2, 3]}], "outputs": []},
        service_pb2.ModelMetadataResponse())
    spec = model_spec("m", metadata, model_config_pb2.ModelConfig(name="m"))
    assert spec.inputs[0].dims == (2, 3) and not spec.inputs[0].batched and spec.inputs[0].shape == (2, 3)


def test_concrete_shape_fills_dynamic_dims_and_puts_the_batch_first() -> None:
    spec = spec_of("FP32", (3, -1, 5))
    assert concrete_shape(spec) == (1, 3, 1, 5)
    assert concrete_shape(spec, batch_size=4) == (4, 3, 1, 5)
    assert concrete_shape(spec, (2, 3, 7, 5)) == (2, 3, 7, 5)
    with pytest.raises(InferInputError,
                       match=r"input INPUT0 expects FP32 \[-1, 3, -1, 5\]; the shape \[2, 4, 7, 5\]"):
        concrete_shape(spec, (2, 4, 7, 5))
    with pytest.raises(InferInputError, match="batch size must be at least 1"):
        concrete_shape(spec, batch_size=0)
    assert concrete_shape(spec_of("FP32", (-1,), batched=False)) == (1,)


# -- mismatches --------------------------------------------------------------------------------
def test_dtype_and_shape_mismatch_names_what_the_input_expects_and_what_it_got() -> None:
    spec = spec_of("FP32", (4,))
    with pytest.raises(InferInputError) as caught:
        check_tensor(spec, np.zeros((2, 3), dtype=np.int64))
    assert str(caught.value) == "input INPUT0 expects FP32 [-1, 4]; got int64 [2, 3]"
    with pytest.raises(InferInputError, match=r"expects FP32 \[-1, 4\]; got float32 \[2, 3\]$"):
        check_tensor(spec, np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(InferInputError, match=r"expects BYTES \[-1, 4\]; got int32 \[1, 4\]"):
        check_tensor(spec_of("BYTES"), np.zeros((1, 4), dtype=np.int32))


def test_npy_with_another_dtype_is_refused_before_sending() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.arange(6, dtype=np.int64).reshape(2, 3))
    spec = spec_of("FP32", (-1, 4), batched=False)
    with pytest.raises(InferInputError) as caught:
        build_tensor(spec, InputSource(SourceKind.NPY, buffer.getvalue()))
    assert str(caught.value) == "input INPUT0 expects FP32 [-1, 4]; got int64 [2, 3]"


def test_batch_over_max_batch_size_is_refused() -> None:
    with pytest.raises(InferInputError, match="batch size 5 is over the model's max_batch_size 4"):
        build_tensor(spec_of("INT32"), InputSource(SourceKind.ZEROS), batch_size=5, max_batch_size=4)


def test_build_inputs_names_unknown_inputs_and_refuses_mixed_batches() -> None:
    model = ModelSpec("m", "1", 8, (spec_of("FP32"), InputSpec("B", "INT8", (2,), True)), ())
    with pytest.raises(InferInputError, match="model 'm' has no input 'C' \\(inputs: INPUT0, B\\)"):
        build_inputs(model, {"C": InputSource(SourceKind.ZEROS)})
    with pytest.raises(InferInputError, match=r"different batch sizes \[1, 3\]"):
        build_inputs(model, {}, shapes={"B": [3, 2]})
    shapes = {k: v.shape for k, v in build_inputs(model, {}, batch_size=2).items()}
    assert shapes == {"INPUT0": (2, 4), "B": (2, 2)}


def test_optional_inputs_are_left_out_unless_named() -> None:
    model = ModelSpec("m", "1", 0, (spec_of("FP32", batched=False), InputSpec("opt", "INT8", (2,), False,
                                                                            optional=True)), ())
    assert list(build_inputs(model, {})) == ["INPUT0"]
    assert list(build_inputs(model, {"opt": InputSource(SourceKind.ONES)})) == ["INPUT0", "opt"]


def test_build_request_checks_output_names() -> None:
    model = ModelSpec("m", "1", 0, (spec_of("FP32", batched=False),),
                      (OutputSpec("y", "FP32", (4,)), OutputSpec("name", "BYTES", (1,))))
    with pytest.raises(InferInputError, match="model 'm' has no output 'z' \\(outputs: y, name\\)"):
        build_request(model, outputs=["z"])
    request = build_request(model, outputs=["y"], class_count=2, version="1")
    assert request.outputs == ("y",) and request.class_count == 2 and request.version == "1"
    assert build_request(model).outputs == ()  # every output
    assert build_request(model, class_count=3).outputs == ("y",)  # Triton classifies named outputs only
    assert request.inputs[0].datatype == "FP32" and request.inputs[0].shape == (4,)


# -- random, zeros, ones, text --------------------------------------------------------------
@pytest.mark.parametrize("datatype", DTYPES)
def test_random_is_seeded_reproducible_and_typed(datatype: str) -> None:
    spec = spec_of(datatype, (50,))
    first = build_tensor(spec, InputSource(SourceKind.RANDOM), batch_size=4, seed=7)
    again = build_tensor(spec, InputSource(SourceKind.RANDOM), batch_size=4, seed=7)
    other = build_tensor(spec, InputSource(SourceKind.RANDOM), batch_size=4, seed=8)
    assert first.shape == (4, 50) and first.dtype == NUMPY_DTYPES[datatype]
    assert first.tolist() == again.tolist()
    assert first.tolist() != other.tolist()
    assert len(set(first.flat)) > 1


@pytest.mark.parametrize("datatype", INTS)
def test_random_integers_span_the_dtype_range(datatype: str) -> None:
    data = random_tensor(spec_of(datatype), (4000,), seed=1)
    info = np.iinfo(NUMPY_DTYPES[datatype])
    assert info.min <= data.min() and data.max() <= info.max
    # Both halves of the range are used (a generator stuck near 0 would fail).
    middle = info.min / 2 + info.max / 2
    assert (data.astype(np.float64) < middle).any() and (data.astype(np.float64) > middle).any()


@pytest.mark.parametrize("datatype", FLOATS)
def test_random_floats_stay_in_the_documented_range(datatype: str) -> None:
    data = random_tensor(spec_of(datatype), (4000,), seed=1).astype(np.float64)
    low, high = FLOAT_RANDOM_RANGE
    assert low <= data.min() < low + 0.1 and high - 0.1 < data.max() <= high
    assert np.isfinite(data).all()


def test_a_negative_seed_is_refused() -> None:
    with pytest.raises(InferInputError, match="the seed must be 0 or more, got -1"):
        build_tensor(spec_of("FP32"), InputSource(SourceKind.RANDOM), seed=-1)


def test_random_bool_and_bytes() -> None:
    flags = random_tensor(spec_of("BOOL"), (200,))
    assert flags.dtype == np.bool_ and flags.any() and not flags.all()
    words = random_tensor(spec_of("BYTES"), (3, 2))
    assert words.shape == (3, 2) and all(isinstance(w, bytes) and len(w) == 8 for w in words.flat)


def test_random_does_not_depend_on_the_order_of_the_inputs() -> None:
    a, b = InputSpec("a", "FP32", (3,), True), InputSpec("b", "FP32", (3,), True)
    forward = build_inputs(ModelSpec("m", "", 4, (a, b), ()), {}, seed=3)
    backward = build_inputs(ModelSpec("m", "", 4, (b, a), ()), {}, seed=3)
    assert forward["a"].tolist() == backward["a"].tolist()
    assert forward["a"].tolist() != forward["b"].tolist()


@pytest.mark.parametrize("datatype", DTYPES)
@pytest.mark.parametrize("kind", [SourceKind.ZEROS, SourceKind.ONES])
def test_zeros_and_ones_for_every_dtype(datatype: str, kind: SourceKind) -> None:
    data = build_tensor(spec_of(datatype, (2, -1)), InputSource(kind), shape=(3, 2, 5))
    assert data.shape == (3, 2, 5) and data.dtype == NUMPY_DTYPES[datatype]
    expected: object = 0 if kind is SourceKind.ZEROS else 1
    if datatype == "BYTES":
        expected = b"" if kind is SourceKind.ZEROS else b"1"
    assert all(v == expected for v in data.flat)


def test_text_fills_a_bytes_input_and_is_refused_elsewhere() -> None:
    data = build_tensor(spec_of("BYTES", (1,)), InputSource(SourceKind.TEXT, "héllo wörld"), batch_size=2)
    assert data.shape == (2, 1) and data.dtype == np.object_
    assert list(data.flat) == ["héllo wörld".encode()] * 2
    with pytest.raises(InferInputError, match="text is only for BYTES inputs"):
        build_tensor(spec_of("FP32"), InputSource(SourceKind.TEXT, "x"))


# -- JSON ----------------------------------------------------------------------------------------
JSON_VALUES = {
    "BOOL": [[True, False]], "INT8": [[-128, 127]], "INT16": [[-32768, 32767]],
    "INT32": [[-2**31, 2**31 - 1]], "INT64": [[-2**63, 2**63 - 1]], "UINT8": [[0, 255]],
    "UINT16": [[0, 65535]], "UINT32": [[0, 2**32 - 1]], "UINT64": [[0, 2**64 - 1]],
    "FP16": [[0.5, -2.0]], "BF16": [[1.5, -0.25]], "FP32": [[0.1, 3.0]], "FP64": [[0.1, 1e300]],
    "BYTES": [["a", "ünï"]],
}


@pytest.mark.parametrize("datatype", DTYPES)
def test_json_nested_and_flat_with_shape_for_every_dtype(datatype: str) -> None:
    spec = spec_of(datatype, (2,))
    nested = json_tensor(spec, json.dumps(JSON_VALUES[datatype]))
    flat = json_tensor(spec, json.dumps({"shape": [1, 2], "data": JSON_VALUES[datatype][0]}))
    assert nested.shape == flat.shape == (1, 2) and nested.dtype == NUMPY_DTYPES[datatype]
    assert nested.tolist() == flat.tolist()
    check_tensor(spec, nested)
    expected = [v.encode() if isinstance(v, str) else v for v in JSON_VALUES[datatype][0]]
    if datatype == "FP32":
        expected = [float(np.float32(v)) for v in expected]
    assert nested.tolist()[0] == expected


@pytest.mark.parametrize(
    ("datatype", "document", "message"),
    [
        ("INT8", "[128]", "128 is not a int8 \\(range -128..127\\)"),
        ("UINT8", "[-1]", "-1 is not a uint8"),
        ("INT32", "[1.5]", "1.5 is not a int32"),
        ("BOOL", "[1, 0]", "non-booleans"),
        ("FP32", '["1"]', "non-numbers"),
        ("FP32", "[true]", "non-numbers"),
        ("BYTES", "[1]", "non-strings"),
        ("FP16", "[1e6]", "over FP16's range"),
        ("FP32", "[1e39]", "over FP32's range"),
        ("FP32", "[[1, 2], [3]]", "ragged"),
        ("FP32", "{not json", "not JSON"),
        ("FP32", '{"shape": [2, 2], "data": [1, 2, 3]}', "3 values do not fill shape \\[2, 2\\]"),
        ("FP32", '{"datatype": "INT8", "data": [1]}', "the JSON says INT8"),
        ("FP32", '{"shape": [1]}', 'needs "data"'),
    ],
)
def test_json_that_does_not_fit_the_dtype_is_refused(datatype: str, document: str, message: str) -> None:
    with pytest.raises(InferInputError, match=message):
        json_tensor(spec_of(datatype, (-1,)), document)


def test_json_int_accepts_integral_floats() -> None:
    assert json_tensor(spec_of("INT64", (2,)), "[[1.0, 2]]").tolist() == [[1, 2]]


# -- .npy --------------------------------------------------------------------------------------
def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize("datatype", [d for d in DTYPES if d != "BYTES"])
def test_npy_round_trips_every_numeric_dtype(datatype: str) -> None:
    array = random_tensor(spec_of(datatype, (3,)), (2, 3), seed=5)
    loaded = build_tensor(spec_of(datatype, (3,)), InputSource(SourceKind.NPY, npy(array)))
    assert loaded.dtype == array.dtype and loaded.tolist() == array.tolist()


def test_npy_strings_become_bytes_and_bf16_is_cut_to_its_precision() -> None:
    words = build_tensor(spec_of("BYTES", (2,)), InputSource(SourceKind.NPY, npy(np.array([["ab", "ç"]]))))
    assert list(words.flat) == [b"ab", "ç".encode()]
    values = npy_tensor(spec_of("BF16"), npy(np.array([[1.0 + 2**-10, 2, 3, 4]], dtype=np.float32)))
    assert values.tolist() == [[1.0, 2.0, 3.0, 4.0]]


def test_npy_that_is_not_a_npy_file_or_is_a_pickle_is_refused() -> None:
    with pytest.raises(InferInputError, match=r"not a readable \.npy file"):
        npy_tensor(spec_of("FP32"), b"not numpy")
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InferInputError, match=r"not a readable \.npy file"):
        npy_tensor(spec_of("BYTES"), pickled.getvalue())


# -- images ------------------------------------------------------------------------------------
RGB = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3) * 3  # H=4, W=6, distinct values


def test_image_laid_out_nchw_from_the_dims() -> None:
    data = image_tensor(spec_of("FP32", (3, 4, 6)), png(RGB, "RGB"))
    assert data.shape == (1, 3, 4, 6) and data.dtype == np.float32
    assert np.array_equal(data[0], np.moveaxis(RGB, -1, 0).astype(np.float32))


def test_image_laid_out_nhwc_from_the_dims() -> None:
    data = image_tensor(spec_of("UINT8", (4, 6, 3)), png(RGB, "RGB"))
    assert data.shape == (1, 4, 6, 3) and data.dtype == np.uint8 and np.array_equal(data[0], RGB)


def test_the_config_format_decides_when_the_dims_are_ambiguous() -> None:
    square = np.arange(3 * 3 * 3, dtype=np.uint8).reshape(3, 3, 3) * 9
    nchw = image_tensor(spec_of("UINT8", (3, 3, 3), format="FORMAT_NCHW"), png(square, "RGB"))
    nhwc = image_tensor(spec_of("UINT8", (3, 3, 3), format="FORMAT_NHWC"), png(square, "RGB"))
    assert np.array_equal(nhwc[0], square) and np.array_equal(nchw[0], np.moveaxis(square, -1, 0))
    assert image_layout(spec_of("UINT8", (3, 3, 3), format="FORMAT_NCHW")).channels_first


def test_image_is_resized_to_the_input_and_converted_to_its_channels() -> None:
    data = image_tensor(spec_of("UINT8", (8, 8)), png(RGB, "RGB"))  # grayscale [H, W]
    assert data.shape == (1, 8, 8)
    gray = image_tensor(spec_of("FP32", (1, 2, 3)), png(RGB, "RGB"), batch_size=2)
    assert gray.shape == (2, 1, 2, 3) and np.array_equal(gray[0], gray[1])


def test_dynamic_image_dims_take_the_chosen_shape_else_the_image_size() -> None:
    own = image_tensor(spec_of("FP32", (3, -1, -1)), png(RGB, "RGB"))
    assert own.shape == (1, 3, 4, 6)
    chosen = build_tensor(spec_of("FP32", (3, -1, -1)), InputSource(SourceKind.IMAGE, png(RGB, "RGB")),
                          shape=(2, 3, 8, 12))
    assert chosen.shape == (2, 3, 8, 12)


def test_image_normalisation_choices() -> None:
    spec = spec_of("FP32", (4, 6, 3))
    unit = image_tensor(spec, png(RGB, "RGB"), Normalize.UNIT)
    assert np.allclose(unit[0], RGB / 255.0)
    imagenet = image_tensor(spec, png(RGB, "RGB"), Normalize.IMAGENET)
    expected = (RGB / 255.0 - np.array(IMAGENET_MEAN)) / np.array(IMAGENET_STD)
    assert np.allclose(imagenet[0], expected, atol=1e-6)
    with pytest.raises(InferInputError, match="ImageNet mean/std normalisation needs 3 channels"):
        image_tensor(spec_of("FP32", (4, 6)), png(RGB, "RGB"), Normalize.IMAGENET)
    with pytest.raises(InferInputError, match="needs a float input"):
        image_tensor(spec_of("UINT8", (4, 6, 3)), png(RGB, "RGB"), Normalize.UNIT)


@pytest.mark.parametrize("datatype", NUMERIC)
def test_image_pixels_in_every_numeric_dtype(datatype: str) -> None:
    spec = spec_of(datatype, (4, 6, 3))
    if datatype == "INT8":
        with pytest.raises(InferInputError, match=r"pixels 0\.\.255 do not fit int8"):
            image_tensor(spec, png(RGB, "RGB"))
        return
    data = image_tensor(spec, png(RGB, "RGB"))
    assert data.dtype == NUMPY_DTYPES[datatype]
    assert np.array_equal(data[0].astype(np.float64), RGB.astype(np.float64))  # 0..255 exact in each


def test_images_that_cannot_be_read_or_laid_out_are_refused() -> None:
    with pytest.raises(InferInputError, match="not an image Pillow can read"):
        image_tensor(spec_of("FP32", (3, 4, 6)), b"\x89PNG but not really")
    with pytest.raises(InferInputError, match="an image needs dims"):
        image_tensor(spec_of("FP32", (10,)), png(RGB, "RGB"))
    with pytest.raises(InferInputError, match="1, 3 or 4 channels, not 5"):
        image_tensor(spec_of("FP32", (5, 4, 6), format="FORMAT_NCHW"), png(RGB, "RGB"))
    with pytest.raises(InferInputError, match="an image becomes a number tensor"):
        image_tensor(spec_of("BOOL", (4, 6, 3)), png(RGB, "RGB"))


def test_image_like_outputs_become_displayable_pixels() -> None:
    chw = np.moveaxis(RGB, -1, 0)[np.newaxis].astype(np.float32) / 255.0  # [1, 3, 4, 6] in 0..1
    wide = np.repeat(np.repeat(chw, 2, axis=2), 2, axis=3)  # [1, 3, 8, 12]
    shown = output_image(wide)
    assert shown is not None and shown.shape == (8, 12, 3) and shown.dtype == np.uint8
    assert np.array_equal(shown[::2, ::2], RGB)
    gray = output_image(np.full((1, 1, 16, 16), 300, dtype=np.int32))
    assert gray is not None and gray.shape == (16, 16) and (gray == 255).all()
    assert output_image(np.zeros((1, 10), dtype=np.float32)) is None  # class scores
    assert output_image(np.zeros((4, 4), dtype=np.float32)) is None  # too small
    assert output_image(np.zeros((16, 16, 5), dtype=np.float32)) is None  # 5 channels
    assert output_image(np.array([b"x"], dtype=object)) is None


# -- size limits ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [SourceKind.NPY, SourceKind.IMAGE, SourceKind.JSON])
def test_uploads_over_the_limit_are_refused_before_decoding(kind: SourceKind) -> None:
    with pytest.raises(InputTooLargeError, match=r"over the limit of 33\.6 MB"):
        build_tensor(spec_of("FP32"), InputSource(kind, b"\0" * (MAX_UPLOAD_BYTES + 1)))


def test_a_huge_generated_tensor_is_refused_before_allocating() -> None:
    with pytest.raises(InputTooLargeError, match=r"input INPUT0 of shape \[1, 1000000000\] is 4000.0 MB"):
        build_tensor(spec_of("FP32", (-1,)), InputSource(SourceKind.ZEROS), shape=(1, 10**9))


def test_local_files_are_size_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.npy"
    with big.open("wb") as handle:
        handle.truncate(MAX_UPLOAD_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(InputTooLargeError, match=r"big\.npy\) is 33,554,433 bytes, more than 32\.0 MiB"):
        read_local_file(str(big))
    with pytest.raises(InferInputError, match="cannot read"):
        read_local_file(str(tmp_path / "missing.png"))


# -- BF16 ----------------------------------------------------------------------------------------
def test_bf16_values_are_what_tritonclient_sends() -> None:
    values = build_tensor(spec_of("BF16", (6,)), InputSource(SourceKind.RANDOM), seed=2)
    assert values.dtype == np.float32
    assert not (values.view(np.uint32) & 0xFFFF).any()  # only bfloat16 bits are set
    sent = serialize_bf16_tensor(values).item()
    assert deserialize_bf16_tensor(sent).reshape(values.shape).tolist() == values.tolist()  # lossless
    assert wire_bytes(Tensor("x", "BF16", values)) == sent
    assert to_bf16(np.array([1.0 + 2**-9, -3.99], dtype=np.float32)).tolist() == [1.0, -3.984375]


def test_bf16_goes_through_the_facades_inputs_on_both_transports() -> None:
    values = to_bf16(np.array([[0.5, 1.5]], dtype=np.float32))
    http_input, = _infer_inputs(httpclient, [Tensor("x", "BF16", values)])
    grpc_input, = _infer_inputs(grpcclient, [Tensor("x", "BF16", values)])
    expected = wire_bytes(Tensor("x", "BF16", values))
    assert http_input._get_binary_data() == grpc_input._get_content() == expected
    assert grpc_input._get_tensor().datatype == "BF16" and list(grpc_input._get_tensor().shape) == [1, 2]


# -- the facade's request pieces -------------------------------------------------------------
@pytest.mark.parametrize("datatype", DTYPES)
def test_binary_layout_matches_tritonclient_for_every_dtype(datatype: str) -> None:
    data = random_tensor(spec_of(datatype, (3,)), (2, 3), seed=4)
    tensor = Tensor("x", datatype, data)
    http_input, = _infer_inputs(httpclient, [tensor])
    grpc_input, = _infer_inputs(grpcclient, [tensor])
    assert http_input._get_binary_data() == grpc_input._get_content() == wire_bytes(tensor)
    assert http_input.datatype() == datatype and http_input.shape() == [2, 3]


def test_requested_outputs_carry_the_class_count_on_both_transports() -> None:
    assert _requested_outputs(httpclient, [], 3) is None
    http_out, = _requested_outputs(httpclient, ["y"], 3)  # type: ignore[misc]
    assert http_out._get_tensor() == {"name": "y", "parameters": {"classification": 3, "binary_data": True}}
    grpc_out, = _requested_outputs(grpcclient, ["y"], 3)  # type: ignore[misc]
    assert grpc_out._get_tensor().parameters["classification"].int64_param == 3


def test_facade_infer_failures_leave_as_triton_errors() -> None:
    """The translation table covers infer too: tritonclient's own refusal (a dtype it cannot
    serialize, before any byte is sent) and a closed port, on both transports."""
    wrong = Tensor("x", "FP32", np.zeros(2, dtype=np.int64))
    for url in ("http://127.0.0.1:9", "grpc://127.0.0.1:9"):
        with TritonClient(url, timeout_s=2) as client:
            with pytest.raises(TritonRequestError, match=r"infer with 'm': .*expected FP32"):
                client.infer("m", [wrong])
            with pytest.raises(TritonUnreachableError, match="infer with 'm'"):
                client.infer("m", [Tensor("x", "FP32", np.zeros(2, dtype=np.float32))])


# -- sources ---------------------------------------------------------------------------------
def test_input_source_parse() -> None:
    assert InputSource.parse("zeros").kind is SourceKind.ZEROS
    assert InputSource.parse("json:[1, 2]") == InputSource(SourceKind.JSON, "[1, 2]")
    assert InputSource.parse("text:a=b:c") == InputSource(SourceKind.TEXT, "a=b:c")
    files = {"x.npy": b"N", "cat.png": b"P"}
    assert InputSource.parse("@x.npy", files.__getitem__) == InputSource(SourceKind.NPY, b"N")
    assert InputSource.parse("@cat.png", files.__getitem__) == InputSource(SourceKind.IMAGE, b"P")
    with pytest.raises(InferInputError, match="unknown input source 'nonsense': use random, zeros"):
        InputSource.parse("nonsense")


def test_cli_shape_flags() -> None:
    assert cli_infer._shapes(["a=1,3,224,224", "b=2"]) == {"a": [1, 3, 224, 224], "b": [2]}
    for bad in ("a", "a=1,x", "a="):
        with pytest.raises(InferInputError, match="give NAME=D1,D2"):
            cli_infer._shapes([bad])


def test_cli_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "m", "--url", "htp:/nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("geadmin: error: ") and err.count("\n") == 1


# -- top-k and labels -------------------------------------------------------------------------
def test_top_k_per_batch_item_with_labels() -> None:
    scores = Tensor("p", "FP32", np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]], dtype=np.float32))
    rows = top_k(scores, 2, ["cat", "dog", "eel"])
    assert [[(c.index, c.label) for c in row] for row in rows] == [[(1, "dog"), (2, "eel")],
                                                                   [(0, "cat"), (2, "eel")]]
    assert rows[0][0].score == pytest.approx(0.7)
    ints = Tensor("p", "INT8", np.array([3, 9, 1], dtype=np.int8))
    assert [c.index for c in top_k(ints, 5)[0]] == [1, 0, 2]  # k over the class count: all of them
    with pytest.raises(InferInputError, match="top-k needs scores"):
        top_k(Tensor("s", "BYTES", np.array([b"a"], dtype=object)), 1)


def test_classification_extension_strings_are_parsed() -> None:
    data = np.array([[b"0.9:3:three", b"0.05:1"]], dtype=object)
    row, = parse_classification(Tensor("p", "BYTES", data))
    assert [(c.score, c.index, c.label) for c in row] == [(0.9, 3, "three"), (0.05, 1, "")]


def test_top_k_of_an_empty_batch_and_bad_classification_strings() -> None:
    assert top_k(Tensor("p", "FP32", np.zeros((0, 10), dtype=np.float32)), 3) == []
    assert [c.index for c in top_k(Tensor("p", "FP32", np.array([[[0.1], [0.9]]], "f4")), 1)[0]] == [1]
    with pytest.raises(InferInputError, match=r"'0\.9' is not Triton's"):
        parse_classification(Tensor("p", "BYTES", np.array([b"0.9"], dtype=object)))
    with pytest.raises(InferInputError, match="not a classification"):
        parse_classification(Tensor("p", "FP32", np.array([0.9], "f4")))


def test_labels_come_from_the_models_directory(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "labels.txt").write_text("zero\none\n")
    assert read_labels(tmp_path, "m", OutputSpec("p", "FP32", (2,), "labels.txt")) == ["zero", "one"]
    assert read_labels(tmp_path, "m", OutputSpec("p", "FP32", (2,))) == []
    with pytest.raises(RepositoryError, match="cannot read the labels of output p"):
        read_labels(tmp_path, "m", OutputSpec("p", "FP32", (2,), "missing.txt"))


def test_records_turn_bytes_into_text_or_base64() -> None:
    record = tensor_record(Tensor("t", "BYTES", np.array([b"ok", b"\xff"], dtype=object)))
    assert record == {"name": "t", "datatype": "BYTES", "shape": [2], "data": ["ok", {"base64": "/w=="}]}
    assert plain_values(np.array([[1.5, 2]], dtype=np.float16)) == [1.5, 2.0]


# -- snippets -------------------------------------------------------------------------------------
def classifier_request(batch: int = 1, datatype: str = "FP32") -> InferRequest:
    spec = ModelSpec("clf", "", 32, (InputSpec("features", datatype, (64,), True),),
                     (OutputSpec("probabilities", "FP32", (10,)),))
    return build_request(spec, batch_size=batch, seed=1)


def curl_body(command: str, files: dict[str, bytes]) -> bytes:
    words = shlex.split(command)
    data = words[words.index("--data-binary") + 1]
    return files[data[1:]] if data.startswith("@") else data.encode()


def test_curl_inlines_a_small_json_body_with_the_exact_values() -> None:
    request = classifier_request()
    snippet = curl_command("http://127.0.0.1:8000", request)
    assert not snippet.files
    words = shlex.split(snippet.text)
    assert words[:6] == ["curl", "-sS", "--fail-with-body", "-X", "POST",
                         "http://127.0.0.1:8000/v2/models/clf/infer"]
    body = json.loads(curl_body(snippet.text, {}))
    sent, = body["inputs"]
    assert sent["shape"] == [1, 64] and sent["datatype"] == "FP32"
    assert np.array(sent["data"], dtype=np.float32).tolist() == request.inputs[0].data.ravel().tolist()


def test_curl_writes_a_large_body_to_request_json() -> None:
    snippet = curl_command("http://h:8000", classifier_request(batch=32))
    assert set(snippet.files) == {JSON_BODY_FILE} and f"@{JSON_BODY_FILE}" in snippet.text
    assert json.loads(snippet.files[JSON_BODY_FILE])["inputs"][0]["shape"] == [32, 64]


def test_curl_sends_fp16_as_binary_with_the_header_length() -> None:
    request = classifier_request(datatype="FP16")
    snippet = curl_command("http://h:8000", request, output_types={"probabilities": "FP16"})
    body = snippet.files[BINARY_BODY_FILE]
    length = int(snippet.text.split("Inference-Header-Content-Length: ")[1].split("'")[0])
    header = json.loads(body[:length])
    assert header["inputs"][0]["parameters"] == {"binary_data_size": 128}
    assert header["outputs"] == [{"name": "probabilities", "parameters": {"binary_data": True}}]
    assert body[length:] == request.inputs[0].data.astype("<f2").tobytes()


def test_curl_needs_the_http_endpoint_and_names_the_version() -> None:
    with pytest.raises(InferInputError, match="curl needs Triton's HTTP endpoint"):
        curl_command("grpc://h:8001", classifier_request())
    request = InferRequest("clf", classifier_request().inputs, ("probabilities",), 3, "2")
    snippet = curl_command("http://h:8000", request)
    assert "/v2/models/clf/versions/2/infer" in snippet.text
    assert json.loads(curl_body(snippet.text, {}))["outputs"] == [
        {"name": "probabilities", "parameters": {"binary_data": False, "classification": 3}}]


def test_parse_http_response_reads_json_and_binary_outputs() -> None:
    fp16 = np.array([1.5, -2], dtype="<f2").tobytes()
    words = (2).to_bytes(4, "little") + b"ok"
    header = {"outputs": [
        {"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]},
        {"name": "b", "datatype": "FP16", "shape": [2], "parameters": {"binary_data_size": 4}},
        {"name": "c", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 6}},
        {"name": "d", "datatype": "BF16", "shape": [1], "parameters": {"binary_data_size": 2}}]}
    body = json.dumps(header).encode() + fp16 + words + wire_bytes(Tensor("d", "BF16", np.array([1.5], "f4")))
    records = parse_http_response(body)
    assert [r["data"] for r in records] == [[1, 2], [1.5, -2.0], ["ok"], [1.5]]
    with pytest.raises(InferInputError, match="Triton answered with an error: nope"):
        parse_http_response(b'{"error": "nope"}')


def test_python_snippet_carries_the_exact_tensors() -> None:
    inputs = (spec_of("INT64", (3,)), InputSpec("t", "BYTES", (1,), True))
    request = build_request(ModelSpec("m", "", 4, inputs, ()), seed=9)
    snippet = python_snippet("grpc://127.0.0.1:8001", request)
    assert "import tritonclient.grpc as triton" in snippet.text and "'127.0.0.1:8001'" in snippet.text
    compile(snippet.text, "snippet.py", "exec")
    namespace: dict[str, object] = {}
    line = next(li for li in snippet.text.splitlines() if li.startswith("INPUTS = "))
    exec(line, {"json": json}, namespace)  # the data line alone: no client is made
    specs = namespace["INPUTS"]
    assert isinstance(specs, list)
    raw = np.frombuffer(__import__("base64").b64decode(specs[0]["raw"]), dtype=specs[0]["numpy"])
    assert raw.tolist() == request.inputs[0].data.ravel().tolist()
    large = python_snippet("http://h:8000", classifier_request(batch=32))
    assert PY_INPUTS_FILE in large.files and f"open({PY_INPUTS_FILE!r})" in large.text


# -- what the playground page needs from the core ----------------------------------------------
def test_only_the_sources_that_fit_the_dtype_are_offered() -> None:
    base = [SourceKind.RANDOM, SourceKind.ZEROS, SourceKind.ONES, SourceKind.JSON, SourceKind.NPY]
    assert source_kinds(spec_of("BYTES", (1,))) == (*base, SourceKind.TEXT)
    assert source_kinds(spec_of("BOOL", (8, 8))) == tuple(base)
    assert source_kinds(spec_of("UINT8", (8, 8))) == (*base, SourceKind.IMAGE)
    assert source_kinds(spec_of("FP32", (3, 224, 224))) == (*base, SourceKind.IMAGE)
    assert source_kinds(spec_of("FP32", (64,))) == tuple(base)  # no room for an image
    assert source_kinds(spec_of("FP32", (5, 5, 5))) == tuple(base)  # 5 channels is no image


def test_the_shape_picker_fills_the_dynamic_dims_and_the_batch() -> None:
    spec = spec_of("FP32", (3, -1, -1))
    assert dynamic_dims(spec) == (1, 2)
    assert picked_shape(spec, (20, 30), batch_size=4) == (4, 3, 20, 30)
    assert picked_shape(spec_of("FP32", (-1,), batched=False), (7,)) == (7,)
    assert picked_shape(spec_of("FP32", (64,)), ()) == (1, 64)
    with pytest.raises(InferInputError, match="has 2 dynamic dims, got 1 sizes"):
        picked_shape(spec, (20,))
    with pytest.raises(InferInputError, match=r"at least 1, got \[3, 0, 30\]"):
        picked_shape(spec, (0, 30))
    with pytest.raises(InferInputError, match="batch size must be at least 1"):
        picked_shape(spec, (1, 1), batch_size=0)


def test_top_k_plan_reads_labels_from_the_repository_else_asks_triton(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "labels.txt").write_text("no\nyes\n")
    spec = ModelSpec("m", "1", 0, (spec_of("FP32", batched=False),),
                     (OutputSpec("p", "FP32", (2,), "labels.txt"), OutputSpec("q", "FP32", (2,))))
    assert top_k_plan(spec, 0) == TopKPlan()
    assert top_k_plan(spec, 2, repository=tmp_path) == TopKPlan(2, {"p": ["no", "yes"]}, 0)
    assert top_k_plan(spec, 2) == TopKPlan(2, {}, 2)  # Triton's classification extension
    assert top_k_plan(spec, 2, ["q"]) == TopKPlan(2, {}, 0)  # no labels wanted: rank locally
    with pytest.raises(InferInputError, match="top-k must be 1 or more"):
        top_k_plan(spec, -1)


def test_rank_outputs_skips_what_cannot_be_ranked_and_reads_triton_classes() -> None:
    scores = Tensor("p", "FP32", np.array([[0.2, 0.8]], dtype=np.float32))
    text = Tensor("t", "BYTES", np.array([[b"x"]], dtype=object))
    result = InferResult("m", "1", "http", (scores, text), 1.0, None)
    ranked = rank_outputs(result, TopKPlan(1, {"p": ["no", "yes"]}))
    assert list(ranked) == ["p"] and [(c.index, c.label) for c in ranked["p"][0]] == [(1, "yes")]
    assert rank_outputs(result, TopKPlan()) == {}
    classified = InferResult("m", "1", "http", (Tensor("p", "BYTES", np.array([[b"0.8:1:yes"]], object)),),
                             1.0, None)
    assert rank_outputs(classified, TopKPlan(1, {}, 1))["p"][0][0].label == "yes"


def test_tensor_rows_are_one_row_per_batch_item_with_plain_values() -> None:
    assert tensor_rows(Tensor("p", "FP32", np.array([[1, 2], [3, 4]], dtype=np.float32))) == [[1.0, 2.0],
                                                                                             [3.0, 4.0]]
    assert tensor_rows(Tensor("t", "BYTES", np.array([b"a", b"\xff"], dtype=object))) == [
        ["a", {"base64": "/w=="}]]
    assert tensor_rows(Tensor("e", "FP32", np.zeros((0, 3), dtype=np.float32))) == []


def test_input_fix_names_the_limit_for_oversize_input() -> None:
    assert "limit is 33.6 MB" in input_fix(InputTooLargeError("too big"))
    assert "random, zeros, ones" in input_fix(InferInputError("bad shape"))


@pytest.mark.parametrize("shape", [[True, 0], [0, 2**70], [0] * 64])
def test_a_json_shape_numpy_cannot_use_is_an_input_error_not_a_traceback(shape: list[object]) -> None:
    """Found by the property test: `true` as a size, a size past numpy's limit, too many dims."""
    with pytest.raises(InferInputError):
        json_tensor(spec_of("FP32", dims=(-1,)), json.dumps({"shape": shape, "data": []}))
