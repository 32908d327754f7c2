"""What the CLI prints is shown, never obeyed by the operator's terminal.

Much of what it prints was written by others: model names are directory names, a failed
model's reason is its own exception text, Triton's log lines, an alert's summary. An escape
sequence in any of them would act on the terminal — recolour a DOWN line green, set the
window title, write an OSC 8 link under other text, or move the cursor back over a line
(`\\r`). So while a command runs, stdout and stderr show every control character as its
escape (`\\x1b`), and the bidirectional overrides that reorder text as theirs (`\\u202e`).
Newlines and tabs pass, and so does `\\r\\n` (the csv module ends its rows with it).

geadmin's own control sequences (`geadmin top`'s clear screen) go through `control`, which
writes past the filter. Bytes written to `.buffer` (a config revision printed with `--show`)
are the file's own and pass as they are.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text: str) -> str:
    """`text` with every control character but newline and tab (and \\r before \\n) escaped."""
    if text.isprintable() and "\r" not in text:  # the common case: nothing to look at
        return text
    out = []
    for index, char in enumerate(text):
        code = ord(char)
        if char in "\n\t" or (char == "\r" and text[index + 1:index + 2] == "\n"):
            out.append(char)
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif char in _BIDI:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class ShownNotObeyed:
    """A text stream that writes `visible(text)` to the stream it wraps; everything else
    (flush, fileno, isatty, encoding, buffer) is that stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(visible(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


@contextlib.contextmanager
def shown_not_obeyed() -> Iterator[None]:
    """stdout and stderr filtered by `visible` for the block, put back after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = ShownNotObeyed(sys.stdout)
    sys.stderr = ShownNotObeyed(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def control(sequence: str, stream: TextIO | None = None) -> None:
    """Write geadmin's own control `sequence` (not data) past the filter."""
    target = stream or sys.stdout
    target = getattr(target, "wrapped", target)
    target.write(sequence)
