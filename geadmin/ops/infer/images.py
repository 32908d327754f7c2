"""Images as test-inference tensors: decoded with Pillow, resized to the input's H/W, laid
out as CHW or HWC (the config's `format`, else the dims), normalised as chosen, cast."""

from __future__ import annotations

import enum
import io
import re
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from geadmin.errors import InferInputError, InputTooLargeError
from geadmin.ops.infer.spec import (
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_UPLOAD_BYTES,
    InputSpec,
    check_size,
    check_tensor_size,
    dtype_of,
    to_bf16,
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Normalize(str, enum.Enum):
    """How image pixels (0..255) become values."""

    NONE = "none"  # the pixel values as they are
    UNIT = "0-1"  # divided by 255
    IMAGENET = "imagenet"  # divided by 255, then (x - mean) / std per RGB channel


@dataclass(frozen=True)
class ImageLayout:
    channels_first: bool  # CHW (NCHW with the batch) or HWC
    channels: int  # 0: no channel dimension (H, W)
    height: int  # -1: keep the image's
    width: int


def image_layout(spec: InputSpec) -> ImageLayout:
    """Where H, W and C sit in the input's dims: the config's `format` when set, else the
    dimension of size 1, 3 or 4 (first or last)."""
    dims = spec.dims
    if len(dims) == 2:
        return ImageLayout(False, 0, dims[0], dims[1])
    if len(dims) != 3:
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; an image needs dims "
                              "[H, W], [C, H, W] or [H, W, C]")
    if spec.format == "FORMAT_NCHW":
        first = True
    elif spec.format == "FORMAT_NHWC":
        first = False
    else:
        first = dims[0] in (1, 3, 4) and dims[2] not in (1, 3, 4)
    channels = dims[0] if first else dims[2]
    if channels not in (1, 3, 4):
        raise InferInputError(f"input {spec.name} expects {spec.describe()}; an image needs 1, 3 or 4 "
                              f"channels, not {channels}")
    height, width = (dims[1], dims[2]) if first else (dims[0], dims[1])
    return ImageLayout(first, channels, height, width)


def image_tensor(
    spec: InputSpec,
    data: bytes,
    normalize: Normalize = Normalize.NONE,
    *,
    shape: Sequence[int] | None = None,
    batch_size: int = 1,
) -> np.ndarray:
    """Decode, resize to the input's H/W (dynamic: the chosen shape's, else the image's own),
    convert the channels, lay out as CHW or HWC, normalise, cast; repeated `batch_size` times."""
    check_size(f"image for input {spec.name}", len(data), MAX_UPLOAD_BYTES)
    layout = image_layout(spec)
    opened = open_image(data, f"input {spec.name}")
    height, width = layout.height, layout.width
    if shape is not None and len(shape) == len(spec.shape):
        item = tuple(shape)[1:] if spec.batched else tuple(shape)
        height, width = (item[1], item[2]) if layout.channels_first and layout.channels else item[:2]
        batch_size = shape[0] if spec.batched else 1
    height = opened.height if height < 0 else height
    width = opened.width if width < 0 else width
    check_tensor_size(spec, (batch_size, height, width, max(layout.channels, 1)))
    pixels = _pixels(spec, opened, {0: "L", 1: "L", 3: "RGB", 4: "RGBA"}[layout.channels], width, height)
    typed = _image_dtype(spec, _normalized(spec, pixels, normalize, layout.channels), normalize)
    if layout.channels == 1:
        typed = typed[..., np.newaxis]
    if layout.channels and layout.channels_first:
        typed = np.moveaxis(typed, -1, 0)
    if spec.batched:
        typed = np.repeat(typed[np.newaxis], batch_size, axis=0)
    return typed


# What Pillow's decoders raise on malformed files: besides its documented UnidentifiedImageError
# / OSError / ValueError / DecompressionBombError, plugins let struct, index and type errors out
# of truncated or corrupt headers (found by tests/unit/test_parser_properties.py).
DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError, SyntaxError,
                 EOFError, IndexError, KeyError, TypeError, ZeroDivisionError, struct.error)


def decode_reason(exc: BaseException) -> str:
    """Why Pillow could not read it, in words: its "cannot identify image file
    <_io.BytesIO object at 0x7f...>" names a Python object, not the cause."""
    if isinstance(exc, UnidentifiedImageError):
        return "its first bytes match no image format Pillow knows: PNG, JPEG, BMP, GIF, TIFF, WebP, ..."
    text = re.sub(r"<[\w.]+ object at 0x[0-9a-fA-F]+>", "the upload", str(exc)).strip()
    return text or type(exc).__name__


def image_size(data: bytes, what: str = "the image") -> tuple[int, int]:
    """(width, height) from the header alone: nothing is decoded."""
    try:
        with warnings.catch_warnings():  # a bomb's size is refused by our own limit, said plainly
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as header:
                return int(header.width), int(header.height)
    except DECODE_ERRORS as exc:
        raise InferInputError(f"{what}: not an image Pillow can read ({decode_reason(exc)})") from exc


def open_image(data: bytes, what: str = "the image", *, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """The decoded image, once its header shows at most `max_pixels` pixels and no side over
    MAX_IMAGE_SIDE (a small file can declare a huge image: 17 KB of PNG for 12000 x 12000,
    600 MB decoded; 120 KB for 1 x 25,000,000)."""
    width, height = image_size(data, what)
    if width * height > max_pixels:
        raise InputTooLargeError(f"{what}: the image is {width} x {height} pixels; the limit is "
                                 f"{max_pixels / 1e6:g} million pixels")
    if max(width, height) > MAX_IMAGE_SIDE:
        raise InputTooLargeError(f"{what}: the image is {width} x {height} pixels; the limit is "
                                 f"{MAX_IMAGE_SIDE} pixels a side: crop or resize it")
    if width < 1 or height < 1:
        raise InferInputError(f"{what}: the image is {width} x {height} pixels: empty")
    try:
        opened = Image.open(io.BytesIO(data))
        opened.load()
    except DECODE_ERRORS as exc:
        raise InferInputError(f"{what}: not an image Pillow can read ({decode_reason(exc)})") from exc
    return opened


def _pixels(spec: InputSpec, opened: Image.Image, mode: str, width: int, height: int) -> np.ndarray:
    """(H, W) or (H, W, C) uint8 pixels in `mode`, resized. Shrinking averages the covered
    area (exact for whole-number factors); enlarging is bilinear."""
    try:
        image = opened.convert(mode)
        if image.size != (width, height):
            shrinking = width <= image.width and height <= image.height
            resample = Image.Resampling.BOX if shrinking else Image.Resampling.BILINEAR
            image = image.resize((width, height), resample)
        return np.asarray(image, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise InferInputError(f"input {spec.name}: cannot convert the image to {mode} {width}x{height} "
                              f"({exc})") from exc


def _normalized(spec: InputSpec, pixels: np.ndarray, normalize: Normalize, channels: int) -> np.ndarray:
    """The pixels as they are (uint8) or normalised, in float64 for an FP64 input and float32
    otherwise (0..255 and the scaled values fit float32; a float64 copy of a large image was
    twice the tensor)."""
    if normalize is Normalize.NONE:
        return pixels
    work = np.dtype(np.float64 if dtype_of(spec) == np.float64 else np.float32)
    scaled = pixels.astype(work)
    np.divide(scaled, 255.0, out=scaled)
    if normalize is Normalize.UNIT:
        return scaled
    if channels != 3:
        raise InferInputError(f"input {spec.name}: ImageNet mean/std normalisation needs 3 channels (RGB), "
                              f"the input has {channels or 'none'}")
    np.subtract(scaled, np.array(IMAGENET_MEAN, dtype=work), out=scaled)
    np.divide(scaled, np.array(IMAGENET_STD, dtype=work), out=scaled)
    return scaled


def _image_dtype(spec: InputSpec, pixels: np.ndarray, normalize: Normalize) -> np.ndarray:
    dtype = dtype_of(spec)
    if dtype.kind == "f":
        typed = pixels.astype(dtype, copy=False)
        return to_bf16(typed) if spec.datatype == "BF16" else typed
    if dtype.kind in "iu" and normalize is Normalize.NONE:
        info = np.iinfo(dtype)
        if info.max < 255:
            raise InferInputError(f"input {spec.name} expects {spec.describe()}; pixels 0..255 do not fit "
                                  f"{dtype}")
        return pixels.astype(dtype, copy=False)
    raise InferInputError(f"input {spec.name} expects {spec.describe()}; an image becomes a number tensor "
                          f"(and {normalize.value} normalisation needs a float input)")


def sent_image(spec: InputSpec, data: np.ndarray, normalize: Normalize = Normalize.NONE) -> np.ndarray | None:
    """The first item of an image input's tensor as it was sent — resized, laid out, normalised
    by `image_tensor` — back as HW / HWC uint8 pixels to show; None if the input is no image."""
    try:
        layout = image_layout(spec)
    except InferInputError:
        return None
    pixels = np.asarray(data[0] if spec.batched else data).astype(np.float64)  # BF16 is held as float32
    if layout.channels and layout.channels_first:
        pixels = np.moveaxis(pixels, 0, -1)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[..., 0]
    if normalize is Normalize.IMAGENET:
        pixels = pixels * np.array(IMAGENET_STD) + np.array(IMAGENET_MEAN)
    if normalize is not Normalize.NONE:
        pixels = pixels * 255.0
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


MIN_IMAGE_SIDE = 8  # smaller outputs are shown as arrays, not images


def output_image(data: np.ndarray) -> np.ndarray | None:
    """An image-like output (first item of a batch) as HWC uint8 pixels for display, else None.

    Image-like: numeric, [H, W] or [C, H, W] / [H, W, C] with C in 1, 3, 4 and sides of at
    least MIN_IMAGE_SIDE, or [N, C, H, W] / [N, H, W, C]. Floats within 0..1 are
    scaled by 255; other values are clipped to 0..255.
    """
    if data.dtype.kind not in "iuf" or data.size == 0:
        return None
    item = data[0] if data.ndim == 4 else data
    if item.ndim == 3 and item.shape[0] in (1, 3, 4) and item.shape[2] not in (1, 3, 4):
        item = np.moveaxis(item, 0, -1)
    if item.ndim == 3 and item.shape[2] == 1:
        item = item[..., 0]
    if item.ndim not in (2, 3) or (item.ndim == 3 and item.shape[2] not in (3, 4)):
        return None
    if min(item.shape[:2]) < MIN_IMAGE_SIDE:
        return None
    values = item.astype(np.float64)
    if data.dtype.kind == "f" and values.min() >= 0.0 and values.max() <= 1.0:
        values = values * 255.0
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)
