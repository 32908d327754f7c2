"""One error tree: every exception class geadmin defines lives in the package geadmin/errors/
(one module per family), `geadmin.errors` exports each, and the tree drawn in the package's
docstring lists every GeAdminError subclass, under its real parent, and nothing else."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import geadmin
from geadmin import errors
from geadmin.errors import GeAdminError

CORE = Path(errors.__file__).parents[1]
# One drawn line: the tree's indent and branch, then the class name.
EXCEPTION_BASE = re.compile(r"(Error|Exception|Exit|Interrupt|Warning)$")
DRAWN = re.compile(r"^(?P<indent>[ │]*(?:├── |└── )?)(?P<name>[A-Z]\w*Error)\b")


def drawn_tree(docstring: str) -> dict[str, str | None]:
    """Class name -> the name drawn as its parent (None for the root), read from the box drawing."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (depth, name) of the current branch
    for line in docstring.splitlines():
        match = DRAWN.match(line.strip("\n")[4:] if line.startswith("    ") else line)
        if not match:
            continue
        depth = len(match["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        name = match["name"]
        assert name not in parents, f"{name} is drawn twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def in_errors_package(module_name: str) -> bool:
    return module_name == errors.__name__ or module_name.startswith(errors.__name__ + ".")


def family_modules() -> list[object]:
    """The modules of the package geadmin.errors, one per family."""
    return [importlib.import_module(info.name)
            for info in pkgutil.iter_modules(errors.__path__, errors.__name__ + ".")]


def defined_tree() -> dict[str, str | None]:
    """Every GeAdminError subclass defined in the family modules -> its direct GeAdminError parent."""
    found: dict[str, str | None] = {}
    for module in family_modules():
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, GeAdminError) and cls.__module__ == module.__name__:
                bases = [b.__name__ for b in cls.__bases__ if issubclass(b, GeAdminError)]
                found[name] = bases[0] if bases else None
    return found


def test_the_package_exports_every_class_of_its_families() -> None:
    """`from geadmin.errors import X` works for every class defined in a family module."""
    missing = sorted(name for name in defined_tree() if getattr(errors, name, None) is None)
    assert missing == [], "defined in geadmin/errors/ but not exported by geadmin.errors"
    assert sorted(errors.__all__) == sorted(n for n, v in vars(errors).items()
                                            if (inspect.isclass(v) and in_errors_package(v.__module__))
                                            or n == "ExplanationT")


def test_the_drawing_lists_every_error_under_its_parent_and_nothing_else() -> None:
    drawn, defined = drawn_tree(errors.__doc__ or ""), defined_tree()
    assert sorted(set(defined) - set(drawn)) == [], "defined in geadmin/errors/ but missing from the drawing"
    assert sorted(set(drawn) - set(defined)) == [], "drawn in geadmin/errors/__init__.py but not defined"
    wrong = {name: (drawn[name], parent) for name, parent in defined.items() if drawn[name] != parent}
    assert wrong == {}, "drawn under the wrong parent: {name: (drawn, real)}"


def test_every_exception_class_is_defined_in_the_errors_package() -> None:
    """Every module of geadmin imported: no class deriving from BaseException is defined
    outside the package geadmin.errors, whatever its name or base. The pages (they need streamlit) by
    their source: no class whose base names an exception."""
    elsewhere = []
    for module_info in pkgutil.walk_packages(geadmin.__path__, "geadmin."):
        if ".samples" in module_info.name or module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        elsewhere += [f"{module.__name__}.{name}" for name, cls in vars(module).items()
                      if inspect.isclass(cls) and issubclass(cls, BaseException)
                      and cls.__module__ == module.__name__ and not in_errors_package(module.__name__)]
    for path in sorted((CORE.parent / "pages").rglob("*.py")):
        elsewhere += [f"{path.relative_to(CORE.parent)}:{node.lineno} {node.name}"
                      for node in ast.walk(ast.parse(path.read_text(), str(path)))
                      if isinstance(node, ast.ClassDef)
                      and any(EXCEPTION_BASE.search(ast.unparse(base)) for base in node.bases)]
    assert elsewhere == [], "exception classes outside geadmin/errors/:\n" + "\n".join(elsewhere)


def test_the_reader_finds_a_planted_omission_and_a_wrong_parent() -> None:
    """The drawing reader on a small tree: a child under the wrong parent, a missing class."""
    planted = "\n".join([
        "    GeAdminError",
        "    ├── StackError              the stack",
        "    │   └── PortInUseError          a port",
        "    └── TritonError             talking to Triton",
        "        ├── TritonTimeoutError      too slow",
        "        │   └── ExplainedLoadTimeoutError   with clues",
        "        └── ForbiddenError          restricted",
    ])
    assert drawn_tree(planted) == {
        "GeAdminError": None, "StackError": "GeAdminError", "PortInUseError": "StackError",
        "TritonError": "GeAdminError", "TritonTimeoutError": "TritonError",
        "ExplainedLoadTimeoutError": "TritonTimeoutError", "ForbiddenError": "TritonError"}
    moved = planted.replace("    │   └── PortInUseError          a port\n", "")
    moved = moved.replace("        └── ForbiddenError", "        │   └── ForbiddenError")
    tree = drawn_tree(moved)
    assert "PortInUseError" not in tree and tree["ForbiddenError"] == "TritonTimeoutError"
