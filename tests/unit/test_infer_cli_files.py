"""`geadmin infer --print-curl / --print-python` write the files their command reads
(request.json, request.bin, request_inputs.json) in the current directory: never through a
link left at the name (the old write followed it and overwrote its target), a directory or
anything else there is refused, a regular file there (the previous run's) is replaced, and a
directory that cannot be written in is one line with the path and the fix, exit 2 — not an
internal error (exit 70)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geadmin.cli import infer as cli_infer
from geadmin.cli.main import main
from geadmin.errors import InferInputError
from geadmin.ops.infer.snippets import Snippet
from geadmin.ops.infer.spec import InputSpec, ModelSpec, OutputSpec
from tests.support.apptest import isolate

DIGITS = ModelSpec("digits_classifier", "1", 32, (InputSpec("features", "FP32", (64,), True),),
                   (OutputSpec("probabilities", "FP32", (10,)),))
CURL = ["infer", "digits_classifier", "--url", "http://127.0.0.1:9", "--batch-size", "32", "--print-curl"]
PYTHON = [*CURL[:-1], "--print-python"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The model's spec without a server: what is tested is the writing of the files."""
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setattr(cli_infer, "prepare", lambda client, model: DIGITS)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("geadmin: note:")]
    assert len(lines) == 1 and lines[0].startswith("geadmin: error: "), err
    return lines[0]


def test_the_files_are_written_beside_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(CURL) == 0
    assert Path("request.json").is_file() and "@request.json" in capsys.readouterr().out
    assert main(PYTHON) == 0
    assert Path("request_inputs.json").is_file()
    assert not [p.name for p in Path().iterdir() if p.name.startswith(".")], "a temporary file was left"


def test_a_link_at_the_name_is_refused_and_its_target_left_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    Path("request.json").symlink_to(victim)
    assert main(CURL) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{Path.cwd() / 'request.json'} is a symbolic link" in line and "remove it" in line
    assert victim.read_text() == "precious\n" and Path("request.json").is_symlink()


def test_a_dangling_link_at_the_name_creates_nothing_where_it_points(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("request.json").symlink_to(tmp_path / "planted.json")
    assert main(CURL) == 2
    one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "planted.json").exists()


def test_a_directory_at_the_name_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    Path("request.json").mkdir()
    assert main(CURL) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{Path.cwd() / 'request.json'} is a directory" in line
    assert Path("request.json").is_dir() and not list(Path("request.json").iterdir())


def test_the_previous_runs_file_is_replaced_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    Path("request.json").write_text("old")
    assert main(CURL) == 0
    assert Path("request.json").read_text().startswith('{"inputs"')
    assert f"wrote {Path.cwd() / 'request.json'}, replacing the file there" in capsys.readouterr().err


def test_a_directory_that_cannot_be_written_is_one_line_with_the_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    here = Path.cwd()
    os.rmdir(here)  # the current directory is gone: every create in it fails (root ignores modes)
    assert main(CURL) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "cannot write request.json: the current directory is gone" in line
    assert "run the command in a directory you can write" in line


def test_the_writer_refuses_a_link_left_after_a_good_write(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "target"
    target.mkdir()
    cli_infer._write_files(Snippet("curl", {"request.json": b"{}"}), target)
    assert (target / "request.json").read_bytes() == b"{}"
    written = target / "request.json"
    assert capsys.readouterr().err == f"geadmin: note: wrote {written} (the command reads it)\n"
    (target / "request.json").unlink()
    (target / "request.json").symlink_to(victim)
    with pytest.raises(InferInputError, match="is a symbolic link"):
        cli_infer._write_files(Snippet("curl", {"request.json": b"{}"}), target)
    assert victim.read_text() == "precious\n"


def test_a_write_the_system_refuses_names_the_path_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(path: object, flags: int, mode: int = 0o777) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    target = tmp_path / "target"
    target.mkdir()
    monkeypatch.setattr(os, "open", denied)  # root ignores modes: the refusal a user would get
    with pytest.raises(InferInputError) as raised:
        cli_infer._write_files(Snippet("curl", {"request.bin": b"x"}), target)
    assert str(raised.value) == (f"cannot write {target / 'request.bin'}: Permission denied: this user "
                                 f"(uid {os.geteuid()}) may not write in {target}: fix its owner or mode")
    assert not list(target.iterdir())
