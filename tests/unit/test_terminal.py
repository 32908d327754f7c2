"""What the CLI prints is shown, never obeyed (geadmin.cli.terminal): control characters and
bidirectional overrides that others wrote (a model directory's name, a model's exception
text) reach the operator's terminal as escapes, on stdout and on stderr, error lines included;
geadmin's own clear-screen still clears."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from geadmin.cli import terminal
from geadmin.cli.main import main

RED = "\x1b[31m"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example\x1b\\OK\x1b]8;;\x1b\\"


@pytest.mark.parametrize(("text", "shown"), [
    ("plain text, 80 ms\n", "plain text, 80 ms\n"),
    (f"{RED}DOWN", "\\x1b[31mDOWN"),
    (TITLE, "\\x1b]0;pwned\\x07"),
    ("DOWN\rOK  ", "DOWN\\x0dOK  "),  # a bare carriage return would print OK over DOWN
    ("a,b\r\n", "a,b\r\n"),  # the csv module's row end passes
    ("\x9b31m", "\\x9b31m"),  # the one-byte CSI of C1
    ("abc\u202edcba", "abc\\u202edcba"),  # right-to-left override
    ("tab\tand ünïcödé ✓", "tab\tand ünïcödé ✓"),
])
def test_control_characters_are_escaped_and_text_passes(text: str, shown: str) -> None:
    assert terminal.visible(text) == shown


def test_a_model_directory_named_with_escapes_is_shown_as_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / f"m{RED}x"
    (directory / "1").mkdir(parents=True)
    (directory / "config.pbtxt").write_text(f'name: "m{LINK}"\nbackend: "python"\n')
    main(["config", "validate", str(directory)])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "m\\x1b[31mx" in out


def test_an_error_line_is_filtered_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "validate", f"/nonexistent/{TITLE}"]) != 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\\x1b]0;pwned\\x07" in out + err


def test_streams_are_put_back_and_geadmins_own_control_passes() -> None:
    raw = io.StringIO()
    saved = sys.stdout
    sys.stdout = raw
    try:
        with terminal.shown_not_obeyed():
            terminal.control("\x1b[H\x1b[2J")
            print(f"{RED}x")
        assert sys.stdout is raw
    finally:
        sys.stdout = saved
    assert raw.getvalue() == "\x1b[H\x1b[2J\\x1b[31mx\n"


def test_a_table_measures_a_cell_as_the_terminal_shows_it() -> None:
    from geadmin.cli.common import format_table
    table = format_table([["NAME", "STATE"], [f"m{RED}x", "READY"], ["other", "READY"]]).splitlines()
    assert table[1] == "m\\x1b[31mx  READY" and table[2].index("READY") == table[1].index("READY")
