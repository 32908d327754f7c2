"""Test-inference values numpy or UTF-8 cannot take are an InferInputError naming the input
and the value, never an OverflowError or a UnicodeEncodeError: a JSON integer too large for a
float, a lone surrogate (JSON "\\ud800", or argv bytes that are not UTF-8) for a BYTES input."""

from __future__ import annotations

import pytest

from geadmin.errors import InferInputError
from geadmin.ops.infer.inputs import json_tensor, text_tensor
from geadmin.ops.infer.spec import InputSpec

HUGE = "9" * 400


def spec_of(datatype: str) -> InputSpec:
    return InputSpec("INPUT0", datatype, (-1,), False)


@pytest.mark.parametrize("datatype", ["FP32", "FP64", "FP16", "BF16"])
def test_a_json_integer_too_large_for_a_float_input_is_an_input_error_naming_it(datatype: str) -> None:
    with pytest.raises(InferInputError, match=r"^input INPUT0 expects .*; 9{20}.*\(400 digits\) is over"):
        json_tensor(spec_of(datatype), f"[1, {HUGE}]")


def test_a_lone_surrogate_in_json_for_a_bytes_input_is_an_input_error_naming_it() -> None:
    with pytest.raises(InferInputError, match=r"^input INPUT0: '\\ud800' is not valid Unicode text"):
        json_tensor(spec_of("BYTES"), '[["ok"], ["\\ud800"]]')


def test_text_that_is_not_utf8_for_a_bytes_input_is_an_input_error_naming_it() -> None:
    with pytest.raises(InferInputError, match=r"^input INPUT0: 'a\\udcffb' is not valid Unicode text"):
        text_tensor(spec_of("BYTES"), "a\udcffb", (1,))
