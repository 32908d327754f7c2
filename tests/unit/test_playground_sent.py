"""What the Playground shows of a request: an uploaded image as it was sent (resized, laid out
and normalised by image_tensor, turned back into pixels) and the outputs in the model's order
(the last test against the real tritonserver serving the sample digits_postprocess)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from geadmin.ops.infer.images import Normalize, image_tensor, sent_image
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.request import build_request, in_model_order, prepare, send
from geadmin.ops.infer.spec import InputSpec
from geadmin.triton.client import Tensor, TritonClient


def png(width: int, height: int, mode: str = "RGB") -> bytes:
    rng = np.random.default_rng(7)
    shape = (height, width, 3) if mode == "RGB" else (height, width)
    image = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def resized(data: bytes, mode: str, width: int, height: int) -> np.ndarray:
    """What Pillow makes of the upload at the input's size (image_tensor shrinks with BOX)."""
    image = Image.open(io.BytesIO(data)).convert(mode)
    return np.asarray(image.resize((width, height), Image.Resampling.BOX))


def test_a_grayscale_upload_is_shown_at_the_inputs_size() -> None:
    spec = InputSpec("image", "UINT8", (8, 8), True)  # digits_preprocess
    data = png(64, 48, "L")
    pixels = sent_image(spec, image_tensor(spec, data, batch_size=2))
    assert pixels is not None and pixels.shape == (8, 8) and pixels.dtype == np.uint8
    assert np.array_equal(pixels, np.rint(resized(data, "L", 8, 8)))


@pytest.mark.parametrize("normalize", list(Normalize))
def test_a_chw_float_upload_is_shown_as_the_pixels_it_was_made_of(normalize: Normalize) -> None:
    spec = InputSpec("input", "FP32", (3, 16, 24), True, format="FORMAT_NCHW")
    data = png(100, 60)
    pixels = sent_image(spec, image_tensor(spec, data, normalize), normalize)
    assert pixels is not None and pixels.shape == (16, 24, 3)
    expected = resized(data, "RGB", 24, 16).astype(int)
    assert np.abs(pixels.astype(int) - expected).max() <= 1  # float round trip of the normalisation


def test_an_input_that_is_no_image_has_no_picture() -> None:
    assert sent_image(InputSpec("features", "FP32", (64,), True), np.zeros((1, 64), np.float32)) is None


def test_outputs_follow_the_models_order() -> None:
    def tensor(name: str) -> Tensor:
        return Tensor(name, "FP32", np.zeros(1, np.float32))

    answered = [tensor("score"), tensor("extra"), tensor("label_name"), tensor("label")]
    ordered = in_model_order(answered, ("label", "score", "label_name"))
    assert [t.name for t in ordered] == ["label", "score", "label_name", "extra"]


def test_a_real_response_comes_back_in_the_configs_order(triton_server) -> None:
    client = TritonClient(triton_server.http_url)
    spec = prepare(client, "digits_postprocess")
    names = [o.name for o in spec.outputs]
    assert names == ["label", "score", "label_name"]
    request = build_request(spec, {"probabilities": InputSource(SourceKind.RANDOM)})
    assert request.output_order == tuple(names)
    for order in (("label_name", "label", "score"), ("score", "label_name", "label")):
        result = send(client, build_request(spec, outputs=order), statistics=False)
        assert [t.name for t in result.outputs] == [n for n in names if n in order]
