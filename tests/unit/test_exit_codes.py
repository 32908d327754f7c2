"""One exit-code table (geadmin/cli/exit_codes.py): every command module returns codes from it and
no number of its own, each returns exactly the codes its row of the table lists, every command is
in a row, and the reference page is printed from the table (tests/unit/test_docs.py: fresh)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

from geadmin.cli.exit_codes import BY_COMMAND, EVERY_COMMAND, ExitCode, help_text
from geadmin.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "geadmin" / "cli"
NOT_COMMANDS = {"__init__", "__main__", "common", "entry", "exit_codes", "main", "terminal"}


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def codes_used(source: str) -> set[ExitCode]:
    """Every `ExitCode.NAME` the module names."""
    return {ExitCode[node.attr] for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "ExitCode"}


def own_codes(source: str) -> list[str]:
    """What breaks the one table: a module-level `EXIT_*` constant, a `return <int>` (a code
    written as a number), an `ExitCode` class of its own."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            found += [f"line {node.lineno}: {t.id} =" for t in node.targets
                      if isinstance(t, ast.Name) and t.id.startswith("EXIT_")]
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
                and type(node.value.value) is int:
            found.append(f"line {node.lineno}: return {node.value.value}")
        elif isinstance(node, ast.ClassDef) and node.name == "ExitCode":
            found.append(f"line {node.lineno}: class ExitCode")
    return found


def test_no_command_module_keeps_codes_of_its_own() -> None:
    found = {path.name: own_codes(path.read_text()) for path in sorted(CLI.glob("*.py"))
             if path.stem != "exit_codes"}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_each_command_returns_exactly_the_codes_its_row_documents() -> None:
    modules = {path.stem for path in CLI.glob("*.py")} - NOT_COMMANDS
    assert sorted(modules) == sorted(BY_COMMAND), "a command module without a row, or the reverse"
    wrong = {}
    for module, (_, documented) in BY_COMMAND.items():
        used = codes_used((CLI / f"{module}.py").read_text()) - set(EVERY_COMMAND)
        if used != set(documented) - set(EVERY_COMMAND):
            wrong[module] = (sorted(used), sorted(documented))
    assert wrong == {}, "{module: (returned, documented)}"


def test_every_command_is_in_one_row_and_every_row_names_real_commands() -> None:
    gen_docs = _gen_docs()
    # a command is a parser that runs something: `npu` runs, and has `npu remedy` under it
    leaves = {" ".join(path[1:]) for path, parser, _ in gen_docs.walk(build_parser())
              if parser.get_default("func") is not None and len(path) > 1}
    rows = [command.strip() for commands, _ in BY_COMMAND.values() for command in commands.split(",")]
    assert sorted(set(rows) - leaves) == [], "a row names a command the parser does not have"
    assert sorted(leaves - set(rows)) == [], "a command in no row of the exit-code table"
    assert len(rows) == len(set(rows)), "a command in two rows"


def test_the_checks_catch_planted_codes_of_a_module_own() -> None:
    planted = ("EXIT_NONE = 3\n\nclass ExitCode:\n    pass\n\n"
               "def run() -> int:\n    if x:\n        return 1\n    return ExitCode.OK\n")
    assert own_codes(planted) == ["line 1: EXIT_NONE =", "line 3: class ExitCode", "line 8: return 1"]
    assert codes_used("def run():\n    return ExitCode.DEGRADED if x else ExitCode.OK\n") == {
        ExitCode.DEGRADED, ExitCode.OK}


def test_the_page_and_the_help_are_printed_from_the_table() -> None:
    gen_docs = _gen_docs()
    page = gen_docs.exit_codes_reference()
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` |" in page
    assert "3 DOWN: Triton does not answer" in help_text("status")
    assert gen_docs.EXIT_CODES_PAGE in gen_docs.pages()


def test_a_code_means_one_thing_whatever_the_command() -> None:
    """The numbers the old per-command tables gave are kept: 0 OK, 1 failed, 2 usage, 3 nothing
    answers (EXIT_NONE was 3 in fleet and 0 in alerts), 4 degraded."""
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 70, 130, 141]
    assert ExitCode["UNREACHABLE"] == 3 and ExitCode["OK"] == 0
