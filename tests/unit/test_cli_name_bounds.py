"""Names and numbers from argv that no database, URL or Triton takes are refused before
anything is written or sent: a file or model name that is not UTF-8 (argv bytes arrive as lone
surrogates), a revision number beyond SQLite's integers. Usage errors, never exit 70."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.repository.layout import is_model_name

NOWHERE = "http://127.0.0.1:1"
NOT_UTF8 = "m\udcff"  # what Python makes of the argv bytes b"m\xff"
HUGE = "99999999999999999999"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_a_model_name_that_is_not_utf8_is_not_a_model_name() -> None:
    assert not is_model_name(NOT_UTF8) and is_model_name("m_ÿ")


def test_create_refuses_an_upload_name_that_is_not_utf8_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "hi.bin").write_text("hi")
    code, err = run(capsys, "models", "create", "m3", "--template", "python", "--no-load", "--repository",
                    str(repo), "--url", NOWHERE, "--file", f"1/\udcff.bin={tmp_path / 'hi.bin'}")
    assert code == ExitCode.FAILED, err
    assert "is not valid UTF-8" in err.splitlines()[0], err
    assert list(repo.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ("config", "history", NOT_UTF8),
    ("models", "load", NOT_UTF8, "--url", NOWHERE),
    ("models", "create", NOT_UTF8, "--template", "python", "--url", NOWHERE),
    ("config", "apply", NOT_UTF8, "-", "--url", NOWHERE),
], ids=["history", "load", "create", "apply"])
def test_a_model_name_argument_that_is_not_utf8_is_a_usage_error(
        argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, *argv)
    assert code == ExitCode.USAGE, err
    assert "is not valid UTF-8" in err, err


@pytest.mark.parametrize("argv", [
    ("config", "rollback", "M", HUGE, "--url", NOWHERE),
    ("config", "history", "M", "--show", HUGE),
    ("config", "history", "M", "--show", "0"),
], ids=["rollback", "show", "show_zero"])
def test_a_revision_number_beyond_what_is_kept_is_a_usage_error(
        argv: tuple[str, ...], capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    code, err = run(capsys, *argv, "--repository", str(tmp_path))
    assert code == ExitCode.USAGE, err
    assert "revision" in err, err
