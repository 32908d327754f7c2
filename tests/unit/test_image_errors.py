"""An upload that is no image says why in words, not with Pillow's
"cannot identify image file <_io.BytesIO object at 0x...>" (ISSUE32)."""

from __future__ import annotations

import pytest

from geadmin.errors import InferInputError
from geadmin.ops.infer.images import image_size, open_image


@pytest.mark.parametrize("read", [image_size, open_image])
def test_bytes_that_are_no_image_say_so_without_a_python_object(read: object) -> None:
    with pytest.raises(InferInputError) as raised:
        read(b"this is a text file, not a picture", "input image")  # type: ignore[operator]
    message = str(raised.value)
    assert message == ("input image: not an image Pillow can read (its first bytes match no image format "
                       "Pillow knows: PNG, JPEG, BMP, GIF, TIFF, WebP, ...)")
    assert "object at 0x" not in message and "BytesIO" not in message


def test_a_truncated_png_names_the_decoders_reason() -> None:
    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dIHDR" + b"\x00\x00\x00\x10\x00\x00\x00\x10\x08\x02"
    with pytest.raises(InferInputError) as raised:
        open_image(header, "input image")
    assert "object at 0x" not in str(raised.value) and "not an image Pillow can read (" in str(raised.value)
