"""Every package of geadmin names each of its modules and subpackages in its docstring, one line
each (`name.py` or `name/` at the start of a line), so the docstring is the package's map."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

GEADMIN = Path(__file__).resolve().parents[2] / "geadmin"


def packages(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("__init__.py") if "samples" not in p.parts)


def unnamed(package: Path) -> list[str]:
    """The modules and subpackages of `package` its docstring does not name in a line."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    named = set(re.findall(r"^\s*-\s*([A-Za-z_][\w/.]*)", doc, flags=re.M))
    named |= {part for line in named for part in line.split("/") if part}
    children = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    children += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()]
    return sorted(c for c in children if c not in named and c.rstrip("/") not in named)


@pytest.mark.parametrize("package", packages(GEADMIN), ids=lambda p: str(p.relative_to(GEADMIN.parent)))
def test_package_docstring_names_each_module(package: Path) -> None:
    missing = unnamed(package)
    assert not missing, (f"{package.relative_to(GEADMIN.parent)}/__init__.py's docstring does not name "
                         f"{', '.join(missing)}: add a line `- name.py  what it is for`")


def test_the_check_finds_a_module_left_out(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A package.\n\n- a.py   named\n"""\n')
    (pkg / "a.py").write_text("")
    (pkg / "b.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text('"""Sub."""\n')
    assert unnamed(pkg) == ["b.py", "sub/"]
    (pkg / "__init__.py").write_text('"""A package.\n\n- a.py   named\n- b.py  too\n- sub/  and this\n"""\n')
    assert unnamed(pkg) == []
