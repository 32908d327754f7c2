"""The docs agree with the code: generated references fresh, every setting and command documented,
every dashboard page with its guide page and screenshot, the backend page including
backend_src/README.md, and a README short enough to read in ten minutes."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from geadmin import settings
from geadmin.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_docs = _gen_docs()


def test_generated_references_are_fresh() -> None:
    stale = [str(path.relative_to(ROOT)) for path in gen_docs.stale()]
    assert not stale, f"{stale} differ from the code: run .venv/bin/python scripts/gen_docs.py and commit"


def test_staleness_check_catches_a_setting_missing_from_the_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    planted = settings.Setting("DOCS_TEST_PLANTED", str, None, "a setting the docs do not know")
    monkeypatch.setitem(settings.SETTINGS, planted.name, planted)
    assert gen_docs.SETTINGS_PAGE in gen_docs.stale()
    assert "`GEADMIN_DOCS_TEST_PLANTED`" in gen_docs.settings_reference()


def test_staleness_check_catches_a_new_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    real = gen_docs.build_parser

    def with_planted_flag() -> argparse.ArgumentParser:
        parser = real()
        parser.add_argument("--planted-flag", help="a flag the docs do not know")
        return parser

    monkeypatch.setattr(gen_docs, "build_parser", with_planted_flag)
    assert gen_docs.CLI_PAGE in gen_docs.stale()


def test_every_setting_is_in_the_settings_reference() -> None:
    page = gen_docs.SETTINGS_PAGE.read_text()
    missing = [s.env_name for s in settings.SETTINGS.values() if f"| `{s.env_name}` |" not in page]
    assert not missing, f"docs/reference/settings.md lacks {missing}"


def test_every_command_and_flag_is_in_the_cli_reference() -> None:
    page = gen_docs.CLI_PAGE.read_text()
    for path, parser, _ in gen_docs.walk(build_parser()):
        anchor = "-".join(path)
        assert f"## {' '.join(path)} {{#{anchor}}}" in page, f"{' '.join(path)} has no section"
        section = page.split(f"{{#{anchor}}}", 1)[1].split("\n## ", 1)[0]
        names = " ".join(row.split(" | ", 1)[0] for row in section.splitlines() if row.startswith("| `"))
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert re.search(rf"[`, ]{re.escape(option)}[` ,]", names), (
                        f"{' '.join(path)} {option} is not documented")


def test_the_settings_page_says_where_the_reference_is_not_a_readme_table() -> None:
    """The stale "has no login" row lived in a README table; the reference is generated now."""
    assert "has no login" not in (DOCS / "reference" / "settings.md").read_text()
    assert "has no login" not in README.read_text()


def test_every_dashboard_page_has_a_guide_page_with_its_screenshot() -> None:
    pages = gen_docs.dashboard_pages()
    assert len(pages) >= 11, pages  # the parse of pages/app.py found the routes
    nav = MKDOCS.read_text()
    for url_path, title in pages.items():
        guide = DOCS / "guide" / f"{url_path}.md"
        assert guide.exists(), f"page {title!r} has no guide page {guide.relative_to(ROOT)}"
        assert f"guide/{url_path}.md" in nav, f"{guide.relative_to(ROOT)} is not in mkdocs.yml's nav"
        assert f"](../images/{url_path}.png)" in guide.read_text(), f"{guide.name} shows no screenshot"
        image = DOCS / "images" / f"{url_path}.png"
        assert image.exists() and image.stat().st_size > 5_000, (
            f"{image.relative_to(ROOT)} is missing: run tests/e2e/test_docs_screenshots.py and commit it")


def test_screenshots_are_only_of_pages_that_exist() -> None:
    pages = set(gen_docs.dashboard_pages())
    orphans = sorted(p.stem for p in (DOCS / "images").glob("*.png") if p.stem not in pages)
    assert not orphans, f"screenshots of pages that no longer exist: {orphans}"


def test_backend_page_includes_the_backend_readme() -> None:
    readme = (ROOT / "backend_src" / "README.md").read_text()
    assert "--8<-- [start:body]" in readme and "--8<-- [end:body]" in readme
    assert readme.index("[start:body]") < readme.index("[end:body]")
    assert '--8<-- "backend_src/README.md:body"' in (DOCS / "backend" / "internals.md").read_text()
    assert "(../docs/backend/index.md)" in readme  # its link to the docs, as GitHub renders it


def test_readme_is_short_and_keeps_the_two_commands() -> None:
    text = README.read_text()
    lines = len(text.splitlines())
    assert lines <= 200, f"README.md has {lines} lines; the rest belongs in docs/"
    for command in ("make run", "make test", "make test-fast"):
        assert f"`{command}`" in text, f"README.md no longer says {command}"


@pytest.mark.parametrize("source", [README, *sorted(DOCS.rglob("*.md"))], ids=lambda p: p.name)
def test_relative_links_point_at_files_that_exist(source: Path) -> None:
    """mkdocs --strict checks the site; this also checks README.md, which the site does not build."""
    for target in LINK.findall(source.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (source.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{source.relative_to(ROOT)} links to {target}, which does not exist"


def test_messages_point_at_docs_pages_that_exist() -> None:
    """Errors and captions that send the user to the docs name a page that exists (README
    sections moved to docs/ once; a message pointing at the README's old sections would mislead)."""
    pointer = re.compile(r"docs/[\w/.-]+\.md")
    for source in sorted([*(ROOT / "geadmin").rglob("*.py"), *(ROOT / "pages").rglob("*.py")]):
        text = source.read_text()
        where = source.relative_to(ROOT)
        assert not re.search(r"\bthe README\b|README's|\(README\b", text), f"{where} points at the README"
        for page in pointer.findall(text):
            assert (ROOT / page).exists(), f"{where} points at {page}, which does not exist"


def test_make_run_passes_geadmin_ups_flags_through_args() -> None:
    """The README tells how to give `make run` a workspace and ports; the Makefile must do it."""
    import subprocess

    shown = subprocess.run(["make", "-n", "run", "ARGS=--home /tmp/ws --http-port 18000"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert "geadmin up --home /tmp/ws --http-port 18000" in shown
    assert 'make run ARGS="' in README.read_text()
