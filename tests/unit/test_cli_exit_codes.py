"""`geadmin`'s exit codes: a bug (any exception that is not a GeAdminError) has its own
code and asks for a report with the bundle; usage errors and geadmin's own errors keep 2."""

from __future__ import annotations

import argparse

import pytest

from geadmin.cli import main as cli_main
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import ConfigError


def _run_with(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> int:
    """`geadmin status` whose command function raises `error`."""
    def broken(args: argparse.Namespace) -> int:
        raise error

    parser = cli_main.build_parser()
    monkeypatch.setattr(cli_main, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for sub in action.choices.values():
            sub.set_defaults(func=broken)
    return cli_main.main(["status"])


def test_a_bug_gets_its_own_exit_code_and_a_report_line(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GEADMIN_DEBUG", raising=False)
    code = _run_with(monkeypatch, KeyError("servers"))
    err = capsys.readouterr().err
    assert code == ExitCode.INTERNAL and code not in (0, 1, 2, 3)
    assert "internal error: KeyError" in err
    assert "please report it" in err and "geadmin bundle" in err
    assert "Traceback" not in err


def test_a_geadmin_error_stays_a_usage_error_without_a_report_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_with(monkeypatch, ConfigError("GEADMIN_SERVERS_FILE: no such file"))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert "no such file" in err and "report" not in err


def test_a_bad_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["infer"])  # MODEL missing
    assert exited.value.code == ExitCode.USAGE
    assert "internal error" not in capsys.readouterr().err


def test_debug_shows_the_traceback_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_DEBUG", "1")
    with pytest.raises(KeyError):
        _run_with(monkeypatch, KeyError("servers"))
