"""The layout DESIGN.md draws, enforced: imports point down the layers, no import cycles (at module
and at subpackage level, counting imports inside functions and under TYPE_CHECKING), settings are
read in one place, and the core never imports streamlit or the pages."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin import settings

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "geadmin"
# Top-level module or subpackage of geadmin -> floor, as DESIGN.md and docs/development.md draw
# them. Imports may point to the same or a lower floor: fleet above stack above ops above diagnose.
LAYERS = {
    "__init__": 0, "errors": 0, "binaries": 0, "test_hooks": 0, "failure_table": 0, "disk": 0,
    "interrupts": 0,
    "domain": 1, "settings": 1, "outside": 1,
    "triton": 2, "db": 2, "migrations": 2,
    "repository": 3, "audit": 3,
    "access": 4, "telemetry": 4,
    "diagnose": 5,
    "ops": 6,
    "stack": 7,
    "fleet": 8,
    "cli": 9,
}
PAGES_LAYER = 10


@dataclass(frozen=True)
class Edge:
    """`source` imports `target` at `path`:`line` (wherever the import statement sits)."""

    source: str
    target: str
    path: Path
    line: int


def modules_of(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under a package (`pkg/__init__.py` is `pkg`)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        if "samples" in path.relative_to(package_dir).parts:
            continue
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        found[".".join(p for p in parts if p != "__init__")] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ImportFrom names (resolving `from . import x`)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, module: str = "", known: Iterable[str] = ()) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, including those inside functions, methods and
    `if TYPE_CHECKING:` blocks (ast.walk visits every statement). `from pkg import sub` names
    `pkg.sub` when that is a known module."""
    known = set(known)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, is_package)
            if not target:
                continue
            submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            if len(submodules) < len(node.names):  # some names are attributes of `target` itself
                found.append((node.lineno, target))
            found += [(node.lineno, sub) for sub in submodules]
    return found


def import_graph(package_dir: Path) -> list[Edge]:
    """Every import from one module of the package to another (self-imports left out)."""
    modules = modules_of(package_dir)
    edges = []
    for name, path in modules.items():
        for line, imported in imports_of(path, name, modules):
            target = imported
            while target and target not in modules:  # `from pkg.mod import Class` -> pkg.mod
                target = target.rpartition(".")[0]
            if target and target != name and imported.split(".")[0] == package_dir.name:
                edges.append(Edge(name, target, path, line))
    return edges


def subpackage_of(module: str) -> str:
    """`geadmin.ops.bench.load_test` -> `geadmin.ops`; `geadmin.errors` -> `geadmin.errors`."""
    return ".".join(module.split(".")[:2])


def collapse(edges: list[Edge]) -> list[Edge]:
    """The same graph with each module replaced by its top-level module or subpackage."""
    return [Edge(subpackage_of(e.source), subpackage_of(e.target), e.path, e.line) for e in edges
            if subpackage_of(e.source) != subpackage_of(e.target)]


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as the edges that close it, with their file and line) per strongly connected
    group of two or more nodes: Tarjan's algorithm, then a path back round the group."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in edges:
        graph.setdefault(e.source, {}).setdefault(e.target, e)
        graph.setdefault(e.target, {})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_a_cycle(graph, group) for group in groups]


def _a_cycle(graph: dict[str, dict[str, Edge]], group: set[str]) -> list[Edge]:
    """A shortest way from the group's first member back to itself, inside the group."""
    start = min(group)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt, edge in sorted(graph[node].items()):
                if nxt == start:
                    return paths[node] + [edge]
                if nxt in group and nxt not in paths:
                    paths[nxt] = paths[node] + [edge]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def describe(cycle: list[Edge]) -> str:
    return "\n".join(f"  {e.source} -> {e.target}  ({e.path}:{e.line})" for e in cycle)


def layer_of(module: str, layers: dict[str, int] = LAYERS, package: str = "geadmin") -> int:
    """`geadmin.diagnose.health` -> 2; `pages.x` -> the pages' layer."""
    parts = module.split(".")
    if parts[0] == "pages":
        return PAGES_LAYER
    assert parts[0] == package, module
    top = parts[1] if len(parts) > 1 else "__init__"
    assert top in layers, f"{package}.{top} is in no layer: add it to DESIGN.md and LAYERS"
    return layers[top]


def layer_violations(edges: list[Edge], layers: dict[str, int], package: str) -> list[str]:
    found, seen = [], set()
    for e in edges:
        if (e.path, e.line) in seen:  # `from pkg.high import b` names pkg.high and pkg.high.b
            continue
        own, target = layer_of(e.source, layers, package), layer_of(e.target, layers, package)
        if target > own:
            seen.add((e.path, e.line))
            found.append(f"{e.path}:{e.line}: {e.source} (layer {own}) imports {e.target} "
                         f"(layer {target}); imports must point down the layers")
    return found


def core_modules() -> list[Path]:
    return list(modules_of(CORE).values())


GRAPH = import_graph(CORE)


def test_every_core_module_has_a_layer() -> None:
    for name in modules_of(CORE):
        layer_of(name)


def test_core_imports_point_down_the_layers() -> None:
    violations = layer_violations(GRAPH, LAYERS, "geadmin")
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_streamlit_or_the_pages(path: Path) -> None:
    for line, imported in imports_of(path):
        root = imported.split(".")[0]
        assert root not in ("streamlit", "pages"), f"{path}:{line} imports {imported}: geadmin never does"


def test_no_import_cycle_between_modules() -> None:
    found = cycles(GRAPH)
    assert not found, "import cycles between modules:\n" + "\n\n".join(map(describe, found))


def test_no_import_cycle_between_subpackages() -> None:
    found = cycles(collapse(GRAPH))
    assert not found, "import cycles between subpackages:\n" + "\n\n".join(map(describe, found))


def _plant(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "fakepkg"


PLANTED = {
    "fakepkg/__init__.py": "",
    "fakepkg/errors.py": ("from typing import TYPE_CHECKING\n"
                          "if TYPE_CHECKING:\n"
                          "    from fakepkg.domain import Thing\n"),  # cycle 1, hidden under TYPE_CHECKING
    "fakepkg/domain.py": "from fakepkg.errors import Oops\n",
    "fakepkg/low/__init__.py": "",
    "fakepkg/low/a.py": ("def late():\n"
                         "    from fakepkg.high import b  # upward, and a cycle, inside a function\n"),
    "fakepkg/low/c.py": "from . import a\n",
    "fakepkg/high/__init__.py": "",
    "fakepkg/high/b.py": "from fakepkg.low.c import something\n",
}
PLANTED_LAYERS = {"__init__": 0, "errors": 0, "domain": 0, "low": 1, "high": 2}


def test_the_checks_find_a_planted_cycle_and_an_upward_import(tmp_path: Path) -> None:
    edges = import_graph(_plant(tmp_path, PLANTED))

    module_cycles = [{e.source for e in c} for c in cycles(edges)]
    assert {"fakepkg.errors", "fakepkg.domain"} in module_cycles
    assert {"fakepkg.low.a", "fakepkg.high.b", "fakepkg.low.c"} in module_cycles
    assert len(module_cycles) == 2

    package_cycles = sorted(sorted(e.source for e in c) for c in cycles(collapse(edges)))
    assert package_cycles == [["fakepkg.domain", "fakepkg.errors"], ["fakepkg.high", "fakepkg.low"]]

    violations = layer_violations(edges, PLANTED_LAYERS, "fakepkg")
    assert len(violations) == 1, violations
    assert "a.py:2: fakepkg.low.a (layer 1) imports fakepkg.high.b (layer 2)" in violations[0]


def test_the_checks_pass_the_planted_package_once_mended(tmp_path: Path) -> None:
    mended = dict(PLANTED, **{"fakepkg/errors.py": "", "fakepkg/low/a.py": "import os\n"})
    edges = import_graph(_plant(tmp_path, mended))
    assert cycles(edges) == [] and cycles(collapse(edges)) == []
    assert layer_violations(edges, PLANTED_LAYERS, "fakepkg") == []


def test_pages_import_only_the_core_and_their_own_widgets() -> None:
    for path in (ROOT / "pages").rglob("*.py"):
        for line, imported in imports_of(path):
            assert not imported.startswith("geadmin.cli"), f"{path}:{line}: pages call the core, not the CLI"


# What changes something: the guard (only a change is guarded), the audit's writers, the
# repository's and the workspace's writers (by module and name), and the Triton client's
# methods that change a server (called on whatever is not a module).
WRITERS = {
    "geadmin.access.guard": {"require"},
    "geadmin.audit": {"record", "record_action", "try_record_action"},
    "geadmin.repository.store": {"write_config", "write_model_file"},
    "geadmin.repository.revisions": {"record_revision"},
    "geadmin.repository.atomic": {"atomic_write", "write_secret_atomically"},
}
CLIENT_CHANGERS = frozenset({"load", "start_load", "unload", "update_log_settings"})


def writes_in(package_dir: Path) -> list[str]:
    """Every import or call of a writer (WRITERS) and every call of a client method that
    changes a server (CLIENT_CHANGERS) in the package."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}  # local name -> module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update({(a.asname or a.name): a.name for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    if alias.name in WRITERS.get(node.module, ()):
                        found.append(f"{path}:{node.lineno}: imports {node.module}.{alias.name}")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner, name = node.func.value, node.func.attr
            module = modules.get(owner.id) if isinstance(owner, ast.Name) else None
            if module is not None and name in WRITERS.get(module, ()):
                found.append(f"{path}:{node.lineno}: calls {module}.{name}")
            elif module is None and name in CLIENT_CHANGERS:
                found.append(f"{path}:{node.lineno}: calls .{name}() on a server")
    return [f"{line}: diagnose reads; a change belongs in ops/" for line in found]


def test_diagnose_reads_only() -> None:
    """DESIGN: diagnose/ reads (why a load failed, the verdict, drift, impact); ops/ changes."""
    found = writes_in(CORE / "diagnose")
    assert not found, "\n".join(found)


def test_the_reads_only_check_finds_a_planted_audit_write_guard_and_load(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "fakepkg/__init__.py": "",
        "fakepkg/reads.py": ("import json\nfrom geadmin import audit\n\n"
                             "def verdict(client, path, impact):\n"
                             "    config = json.load(path.open())  # a module's load: a read\n"
                             "    impact.record()  # a method named like a writer, not the audit's\n"
                             "    return client.model_config('m'), audit.query(), config\n"),
        "fakepkg/sneaky.py": ("from geadmin import audit as journal\n"
                              "from geadmin.access.guard import require\n\n"
                              "def fix(client, auth):\n"
                              "    require(auth, 'load')\n"
                              "    client.load('m')\n"
                              "    journal.record('fix', 'm', 'ok')\n"),
    })
    found = writes_in(root)
    assert [line.split(": diagnose")[0].split("sneaky.py:")[1] for line in found] == [
        "2: imports geadmin.access.guard.require", "6: calls .load() on a server",
        "7: calls geadmin.audit.record"], found


CLI_SHARED = frozenset({"common", "exit_codes", "terminal"})  # helpers every command may use
CLI_ROUTERS = frozenset({"main", "__main__", "entry"})  # they route to every command (entry: to main)


def sibling_imports(cli_dir: Path, package: str = "geadmin.cli") -> list[str]:
    """Each import of one command module by another: what two commands share lives in common.py."""
    modules = {path.stem for path in cli_dir.glob("*.py")}
    found = []
    for path in sorted(cli_dir.glob("*.py")):
        if path.stem in CLI_ROUTERS:
            continue
        for line, imported in imports_of(path, f"{package}.{path.stem}", {f"{package}.{m}" for m in modules}):
            if not imported.startswith(f"{package}."):
                continue
            command = imported.removeprefix(f"{package}.").split(".")[0]
            if command in modules and command not in CLI_SHARED and command != path.stem:
                found.append(f"{path}:{line}: imports the command module {imported}; move what both "
                             "use to cli/common.py (or the core)")
    return found


def test_no_cli_command_imports_another() -> None:
    found = sibling_imports(CORE / "cli")
    assert not found, "\n".join(found)


def test_the_sibling_check_finds_a_planted_import_of_another_command(tmp_path: Path) -> None:
    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "common.py").write_text("def shared():\n    pass\n")
    (cli / "main.py").write_text("from fake.cli import npu, top\n")  # the router may
    (cli / "npu.py").write_text("from fake.cli.common import shared\n")
    (cli / "top.py").write_text("def late():\n    from fake.cli.npu import triton_metrics\n")
    (cli / "status.py").write_text("from fake.cli import npu\n")
    found = sibling_imports(cli, "fake.cli")
    assert [line.split(": ", 1)[0].rsplit("/", 1)[1] for line in found] == ["status.py:1", "top.py:2"], found


def test_settings_are_read_only_in_settings_py() -> None:
    """No bare GEADMIN_* name outside settings.py (and test_hooks.py, the variables only tests
    set): every variable has one reader."""
    bare = re.compile(r"^GEADMIN_[A-Z_]+$")
    for path in core_modules():
        if path in (CORE / "settings.py", CORE / "test_hooks.py"):
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not bare.match(node.value), f"{where} names {node.value}: use geadmin.settings"
            if isinstance(node, ast.Attribute) and node.attr in ("getenv", "environ"):
                assert "GEADMIN" not in lines[node.lineno - 1], f"{where} reads a GEADMIN_ variable directly"


def test_every_setting_is_documented_in_the_settings_reference() -> None:
    """The reference is generated from settings.py (tests/unit/test_docs.py checks it is fresh)."""
    reference = (ROOT / "docs" / "reference" / "settings.md").read_text()
    missing = [s.env_name for s in settings.SETTINGS.values() if f"`{s.env_name}`" not in reference]
    assert not missing, f"docs/reference/settings.md lacks {missing}: run scripts/gen_docs.py"
