"""The words of npu-smi output as values: what every npu-smi reader shares.

A number is a finite float or a plain decimal integer; `NA`, `N/A`, `-`, `--` and the empty
word are unknown (None), never zero. `quote` shows the first line of unrecognised output in
an error message, cut at 120 characters.
"""

from __future__ import annotations

UNKNOWN = frozenset(("na", "n/a", "-", "--", ""))
Fields = dict[str, object]  # normalized npu-smi key -> its value (or an NpuDevice field -> value)


def float_value(value: object) -> float | None:
    if not isinstance(value, str) or value.strip().lower() in UNKNOWN:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def int_value(value: object) -> int | None:
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    # no id or count has 19 digits; int() refuses thousands of digits with a ValueError
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def text_value(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip().lower() not in UNKNOWN else None


def first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def quote(text: str, limit: int = 120) -> str:
    first = first_line(text)
    if not first:
        return "(empty)"
    return repr(first if len(first) <= limit else first[:limit] + "…")
