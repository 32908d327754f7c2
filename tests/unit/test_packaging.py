"""pyproject.toml lists geadmin's packages by hand (the dashboard's pages are mapped in beside
them): a package left out of the list would be missing from the wheel and the image."""
from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 backport, as geadmin.access.users reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def listed_packages(pyproject: Path) -> set[str]:
    return set(tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"])


def packages_on_disk(root: Path) -> set[str]:
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "geadmin").rglob("__init__.py")
             if "samples" not in p.parts}
    found |= {"geadmin_dashboard." + ".".join(p.parent.relative_to(root).parts)
              for p in (root / "pages").rglob("__init__.py")}
    return found


def test_every_package_on_disk_is_listed_in_pyproject() -> None:
    missing = packages_on_disk(ROOT) - listed_packages(ROOT / "pyproject.toml")
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_the_check_finds_a_package_left_out(tmp_path: Path) -> None:
    (tmp_path / "geadmin" / "ops" / "new").mkdir(parents=True)
    for d in ("geadmin", "geadmin/ops", "geadmin/ops/new"):
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackages = ["geadmin", "geadmin.ops"]\n')
    assert packages_on_disk(tmp_path) - listed_packages(tmp_path / "pyproject.toml") == {
        "geadmin.ops.new", "geadmin_dashboard.pages"}
