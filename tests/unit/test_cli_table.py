"""One table layout for the CLI (geadmin.cli.common.format_table): every command's table goes
through it, and no command keeps a padding loop of its own."""

from __future__ import annotations

import re
from pathlib import Path

from geadmin.cli.common import format_table

CLI = Path(__file__).resolve().parents[2] / "geadmin" / "cli"


def test_text_columns_are_left_aligned_two_spaces_apart_without_trailing_spaces() -> None:
    rows = [("NAME", "STATE", "REASON"), ("resnet", "READY", ""), ("a", "UNAVAILABLE", "no file")]
    text = format_table(rows)
    assert text.split("\n") == ["NAME    STATE        REASON",
                                "resnet  READY",
                                "a       UNAVAILABLE  no file"]


def test_figures_are_right_aligned_and_cells_need_not_be_strings() -> None:
    text = format_table([("load", "infer/s"), (1, 812.5), (16, "2954.8")], right=True)
    assert text.split("\n") == ["load  infer/s", "   1    812.5", "  16   2954.8"]


def test_no_rows_is_no_text() -> None:
    assert format_table([]) == ""
    assert format_table([("ONLY", "HEADER")]) == "ONLY  HEADER"


def test_no_cli_module_pads_columns_itself() -> None:
    padding = re.compile(r"\.(ljust|rjust)\(")
    found = [f"{path.name}:{n}" for path in sorted(CLI.glob("*.py")) if path.name != "common.py"
             for n, line in enumerate(path.read_text().splitlines(), start=1) if padding.search(line)]
    assert found == [], "tables are drawn by geadmin.cli.common.format_table"
