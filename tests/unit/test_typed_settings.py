"""Settings are read through typed module constants, so a misspelt name or a wrong type fails
mypy instead of passing as a string key; test hooks are no settings."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from geadmin import settings, test_hooks
from geadmin.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _mypy(tmp_path: Path, code: str) -> str:
    """mypy's report on `code`, checked like the product (strict options of pyproject.toml)."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(code))
    stdout, stderr, _ = mypy_api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--follow-imports=silent", str(snippet)])
    return stdout + stderr


def test_a_misspelt_or_mistyped_setting_fails_mypy(tmp_path: Path) -> None:
    report = _mypy(tmp_path, """\
        from geadmin import settings

        port: int = settings.HTTP_PORT.get()
        url: str | None = settings.PROMETHEUS_URL.get()
        typo = settings.HTTP_PROT.get()
        wrong: str = settings.SAMPLE_INTERVAL_S.get()
        old = settings.get("HTTP_PORT")
        kind = settings.port("htpp")
        """)
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert any(':5: error: Module has no attribute "HTTP_PROT"' in line for line in errors), report
    assert any(":6: error: Incompatible types in assignment" in line and '"float"' in line
               for line in errors), report
    assert any(':7: error: Module has no attribute "get"' in line for line in errors), report
    assert any(":8: error:" in line and "port" in line for line in errors), report
    assert not any(":3: error" in line or ":4: error" in line for line in errors), report


def test_every_setting_is_the_module_constant_of_its_name() -> None:
    for name, setting in settings.SETTINGS.items():
        assert getattr(settings, name) is setting, f"settings.{name} is not the {name} of SETTINGS"
    constants = {n for n, v in vars(settings).items() if isinstance(v, settings.Setting)}
    assert constants == set(settings.SETTINGS)


def test_a_defaulted_setting_is_never_none_and_a_flag_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    for setting in settings.SETTINGS.values():
        monkeypatch.delenv(setting.env_name, raising=False)
        if isinstance(setting, settings.Defaulted):
            assert setting.default is not None and setting.get() is not None, setting.name
    assert settings.HTTP_PORT.get() == 8000 and settings.HTTP_PORT.get(9000) == 9000
    monkeypatch.setenv("GEADMIN_HTTP_PORT", "8100")
    assert settings.port("http") == 8100 and settings.port("http", 9000) == 9000
    monkeypatch.setenv("GEADMIN_HTTP_PORT", "eighty")
    with pytest.raises(ConfigError, match="GEADMIN_HTTP_PORT must be a port number, got 'eighty'"):
        settings.HTTP_PORT.get()
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", "k3y")
    assert settings.ADMIN_KEY.shown() == "set" and settings.ADMIN_KEY.get() == "k3y"


def test_no_code_indexes_the_settings_table_by_a_name() -> None:
    """`SETTINGS["NAME"]` is a string key mypy cannot check: the constant is the way in."""
    for folder in ("geadmin", "pages", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                        and node.value.attr == "SETTINGS" and isinstance(node.slice, ast.Constant)):
                    raise AssertionError(f"{path}:{node.lineno}: use settings.{node.slice.value}")


def test_test_hooks_are_no_settings_and_are_documented_for_developers() -> None:
    reference = (ROOT / "docs" / "reference" / "settings.md").read_text()
    development = (ROOT / "docs" / "development.md").read_text()
    for hook in test_hooks.HOOKS:
        assert hook.removeprefix(settings.PREFIX) not in settings.SETTINGS
        assert hook not in reference, f"{hook} is a test hook: not in the settings reference"
        assert f"`{hook}`" in development, f"{hook} is missing from docs/development.md"


@pytest.mark.parametrize("step", ["apply.written", "rollout.changed.1"])
def test_the_fault_point_kills_only_at_its_step(step: str) -> None:
    script = ("from geadmin import test_hooks\n"
              "test_hooks.fault_point('apply.started')\n"
              f"test_hooks.fault_point({step!r})\n"
              "print('survived')\n")
    env = {**os.environ, test_hooks.FAULT_POINT: step}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            check=False, timeout=60)
    assert killed.returncode == -9 and "survived" not in killed.stdout
    env.pop(test_hooks.FAULT_POINT)
    alive = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           check=False, timeout=60)
    assert alive.returncode == 0 and "survived" in alive.stdout
