"""The layout DESIGN.md draws, enforced: imports point down the layers, settings are read
in one place, and the core never imports streamlit or the pages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from geadmin import settings

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "geadmin"
# Top-level module or subpackage of geadmin -> layer. Imports may point to the same or a lower layer.
LAYERS = {
    "__init__": 0, "errors": 0, "settings": 0, "domain": 0,
    "triton": 1, "repository": 1, "db": 1, "audit": 1,
    "diagnose": 2, "telemetry": 2, "access": 2,
    "ops": 3, "stack": 3,
    "cli": 4,
}
PAGES_LAYER = 5


def core_modules() -> list[Path]:
    return [p for p in CORE.rglob("*.py") if "samples" not in p.parts]


def layer_of(module: str) -> int:
    """`geadmin.diagnose.health` -> 2; `pages.x` -> the pages' layer."""
    parts = module.split(".")
    if parts[0] == "pages":
        return PAGES_LAYER
    assert parts[0] == "geadmin", module
    top = parts[1] if len(parts) > 1 else "__init__"
    assert top in LAYERS, f"geadmin.{top} is in no layer: add it to DESIGN.md and LAYERS"
    return LAYERS[top]


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import, including those inside functions and TYPE_CHECKING."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"geadmin.{a.name}") for a in node.names  # `from geadmin import settings`
                      if node.module == "geadmin" and (CORE / f"{a.name}.py").exists()]
    return found


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(part for part in relative.parts if part != "__init__") or "geadmin"


def test_every_core_module_has_a_layer() -> None:
    for path in core_modules():
        layer_of(module_name(path) if module_name(path) != "geadmin" else "geadmin.__init__")


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_point_down_the_layers(path: Path) -> None:
    name = module_name(path)
    own = layer_of(name if name != "geadmin" else "geadmin.__init__")
    for line, imported in imports_of(path):
        root = imported.split(".")[0]
        assert root not in ("streamlit", "pages"), f"{path}:{line} imports {imported}: geadmin never does"
        if root != "geadmin" or imported == "geadmin":
            continue
        target = layer_of(imported)
        assert target <= own, (f"{path}:{line}: {name} (layer {own}) imports {imported} (layer {target}); "
                               "imports must point down the layers")


def test_the_layer_check_itself_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from geadmin.ops.actions import run_action\n")
    ((_, imported),) = imports_of(bad)
    assert layer_of(imported) > LAYERS["triton"]


def test_pages_import_only_the_core_and_their_own_widgets() -> None:
    for path in (ROOT / "pages").rglob("*.py"):
        for line, imported in imports_of(path):
            assert not imported.startswith("geadmin.cli"), f"{path}:{line}: pages call the core, not the CLI"


def test_settings_are_read_only_in_settings_py() -> None:
    """No bare GEADMIN_* name outside settings.py: every variable has one reader."""
    bare = re.compile(r"^GEADMIN_[A-Z_]+$")
    for path in core_modules():
        if path == CORE / "settings.py":
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not bare.match(node.value), f"{where} names {node.value}: use geadmin.settings"
            if isinstance(node, ast.Attribute) and node.attr in ("getenv", "environ"):
                assert "GEADMIN" not in lines[node.lineno - 1], f"{where} reads a GEADMIN_ variable directly"


def test_every_setting_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [s.env_name for s in settings.SETTINGS.values() if f"`{s.env_name}`" not in readme]
    assert not missing, f"README's settings table lacks {missing}"
