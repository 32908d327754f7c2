"""Numeric flags read one way (geadmin.cli.common.number_argument): "not a <noun>" for what is
not a number, "<rule>, got <text>" for one out of range, and no command keeps a parser of
its own that converts and range-checks by hand."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.cli.bundle import megabytes
from geadmin.cli.common import port_number, positive_seconds
from geadmin.cli.models import _byte_count

CLI = Path(__file__).resolve().parents[2] / "geadmin" / "cli"


@pytest.mark.parametrize(("parse", "text", "expected"), [
    (positive_seconds, "2.5", 2.5),
    (port_number, "8000", 8000),
    (megabytes, "0", 0.0),
    (_byte_count, "1", 1),
])
def test_a_number_in_range_is_returned_as_its_type(parse: Callable[[str], object], text: str,
                                                   expected: object) -> None:
    value = parse(text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("parse", "text", "message"), [
    (positive_seconds, "soon", "not a number of seconds: 'soon'"),
    (positive_seconds, "-1", "seconds must be more than 0, got -1"),
    (positive_seconds, "nan", "seconds must be more than 0, got nan"),
    (positive_seconds, "inf", "seconds must be more than 0, got inf"),
    (port_number, "80.5", "not a port number: '80.5'"),
    (port_number, "99999", "a port is between 1 and 65535, got 99999"),
    (megabytes, "lots", "not a number of megabytes: 'lots'"),
    (megabytes, "-0.5", "megabytes must be 0 or more, got -0.5"),
    (megabytes, "nan", "megabytes must be 0 or more, got nan"),
    (_byte_count, "1e3", "not a number of bytes: '1e3'"),
    (_byte_count, "0", "the upload limit must be at least 1 byte, got 0"),
])
def test_a_bad_number_is_one_argparse_error_naming_what_was_given(
        parse: Callable[[str], object], text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        parse(text)
    assert str(raised.value) == message


def test_no_command_converts_and_range_checks_a_flag_by_hand() -> None:
    """A function outside common.py that raises ArgumentTypeError after an int()/float() is a
    second copy of number_argument."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            inside = list(ast.walk(node))
            names = {n.func.id for n in inside if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            raises = any(isinstance(n, ast.Attribute) and n.attr == "ArgumentTypeError" for n in inside)
            if raises and names & {"int", "float"}:
                found.append(f"{path.name}:{node.lineno} {node.name}")
    assert found == []
