"""Canary for protobuf's private text-format parser, which geadmin.repository.positions subclasses
(the one module allowed to): the members it overrides or reads still exist with the shape it
expects, they still report the positions the editor relies on, nothing else in geadmin touches
them, and the installed protobuf is inside the bound pyproject.toml declares. When a protobuf
release moves them, these tests fail first and say what moved."""

from __future__ import annotations

import inspect
import re
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from google.protobuf import text_format
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from geadmin.repository import positions
from geadmin.repository.positions import locate

ROOT = Path(__file__).resolve().parents[2]
# What positions.py overrides or calls on protobuf's private parser, with the parameters it passes.
PARSER_METHODS = {
    "_ParseOrMerge": ["lines", "message"],
    "_MergeField": ["tokenizer", "message"],
    "_MergeMessageField": ["tokenizer", "message", "field"],
    "_MergeScalarField": ["tokenizer", "message", "field"],
    "ParseLines": ["lines", "message"],
}
TOKENIZER_ATTRIBUTES = ("_line", "_column", "token")
TOKENIZER_METHODS = ("NextToken", "AtEnd")
PRIVATE_USE = re.compile(r"text_format\._|\._line\b|\._column\b|\bTokenizer\b")


@pytest.mark.parametrize("name", sorted(PARSER_METHODS))
def test_the_private_parser_still_has_each_method_positions_overrides(name: str) -> None:
    parser = getattr(text_format, "_Parser", None)
    assert parser is not None, "text_format._Parser is gone: geadmin.repository.positions must be redone"
    method = getattr(parser, name, None)
    assert callable(method), f"text_format._Parser.{name} is gone"
    parameters = list(inspect.signature(method).parameters)[1:]  # without self
    assert parameters == PARSER_METHODS[name], f"_Parser.{name} now takes {parameters}"


def test_the_tokenizer_still_keeps_its_position_and_comments() -> None:
    tokenizer = text_format.Tokenizer(["name: 'x'  # note", "max_batch_size: 4"], skip_comments=False)
    for attribute in TOKENIZER_ATTRIBUTES:
        assert hasattr(tokenizer, attribute), f"Tokenizer.{attribute} is gone"
    for method in TOKENIZER_METHODS:
        assert callable(getattr(tokenizer, method, None)), f"Tokenizer.{method} is gone"
    seen = []
    while not tokenizer.AtEnd():
        seen.append((tokenizer.token, tokenizer._line, tokenizer._column))
        tokenizer.NextToken()
    assert ("# note", 0, 11) in seen and ("max_batch_size", 1, 0) in seen, seen


def test_positions_found_by_the_instrumented_parser_point_at_the_text() -> None:
    text = ('name: "m"\n'
            "max_batch_size: 8  # kept\n"
            "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 1, -1 ] } ]\n"
            'parameters { key: "device_ids" value { string_value: "0,1" } }\n')
    located = locate(text)
    assert located.error is None
    lines = text.split("\n")

    def at(path: str, needle: str) -> None:
        site = located.values[path]
        line, column = site.start
        assert lines[line][column:].startswith(needle), (path, site, lines[line])

    at("max_batch_size", "8")
    at("input[0].name", '"x"')
    at("input[0].dims[1]", "-1")
    at('parameters["device_ids"].value.string_value', '"0,1"')
    assert located.position("input[0].data_type") == (3, text.split("\n")[2].index("data_type") + 1)


def test_a_parse_error_keeps_the_parsers_line_and_column() -> None:
    text = 'name: "m"\nmax_batch_size: "eight"\n'
    located = locate(text)
    assert located.error is not None
    assert (located.error.line, located.error.column) == (2, text.split("\n")[1].index('"eight"') + 1)
    assert located.error_path == "max_batch_size"


def test_only_positions_py_touches_the_private_parser() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "geadmin").rglob("*.py"))
                 if path != Path(positions.__file__)
                 for n, line in enumerate(path.read_text().splitlines(), start=1) if PRIVATE_USE.search(line)]
    assert offenders == [], "protobuf's private text-format API used outside repository/positions.py"


def test_the_installed_protobuf_is_inside_the_declared_bound() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (declared,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "protobuf"]
    assert any(s.operator in ("<", "<=", "~=", "==") for s in declared.specifier), (
        f"protobuf has no upper bound in pyproject.toml ({declared}): a new major may move the parser")
    assert version("protobuf") in declared.specifier, f"protobuf {version('protobuf')} is outside {declared}"
