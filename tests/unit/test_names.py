"""One name per idea: no class name is defined twice in `geadmin/` and `pages/`, so an import
of `Verdict` or `Action` means one thing wherever it is read. A models repository is exempt:
Triton's python backend requires every model.py to define `TritonPythonModel`."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A directory of this name holds Triton models (geadmin/samples/model_repository/): their
# model.py files must each define TritonPythonModel, the name Triton's python backend looks up.
MODELS_REPOSITORY = "model_repository"


def class_definitions(roots: list[Path]) -> dict[str, list[str]]:
    """Class name -> `path:line` of every definition (nested classes included) under the roots,
    files in a models repository left out."""
    found: dict[str, list[str]] = defaultdict(list)
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if MODELS_REPOSITORY in path.relative_to(root).parts:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def defined_twice(roots: list[Path]) -> dict[str, list[str]]:
    return {name: places for name, places in sorted(class_definitions(roots).items()) if len(places) > 1}


def test_no_class_name_is_defined_twice_in_geadmin_and_pages() -> None:
    twice = defined_twice([ROOT / "geadmin", ROOT / "pages"])
    assert twice == {}, "one name, several ideas: rename so each says its own:\n" + "\n".join(
        f"  {name}: {', '.join(places)}" for name, places in twice.items())


def test_the_check_finds_a_planted_duplicate_across_packages_and_nested(tmp_path: Path) -> None:
    """The same check over a planted tree: a name in two packages, a nested class reusing a
    top-level name, and the models repository's TritonPythonModel twice (exempt)."""
    files = {
        "core/ops/models/actions.py": "import enum\n\nclass Action(enum.Enum):\n    LOAD = 'load'\n",
        "core/access/roles.py": "class Role:\n    pass\n\n\nclass Action:\n    pass\n",
        "core/diagnose/verdict.py": "class Holder:\n    class Role:\n        pass\n",
        "core/samples/model_repository/a/1/model.py": "class TritonPythonModel:\n    pass\n",
        "core/samples/model_repository/b/1/model.py": "class TritonPythonModel:\n    pass\n",
        "faces/page.py": "class Unique:\n    pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    twice = defined_twice([tmp_path / "core", tmp_path / "faces"])
    assert twice == {
        "Action": ["core/access/roles.py:5", "core/ops/models/actions.py:3"],
        "Role": ["core/access/roles.py:1", "core/diagnose/verdict.py:2"],
    }
    (tmp_path / "core/access/roles.py").write_text("class Role:\n    pass\n\n\nclass GuardedAction:\n"
                                                   "    pass\n")
    (tmp_path / "core/diagnose/verdict.py").write_text("class Holder:\n    class VerdictRule:\n"
                                                       "        pass\n")
    assert defined_twice([tmp_path / "core", tmp_path / "faces"]) == {}
