"""Files a user names are read through one bounded reader: never more than the limit + 1
bytes, nothing that is not a regular file (a device says 0 bytes in `stat` and never ends),
and a config over the 4 MiB a config can be is refused before it is decoded or validated.
Each face (infer, models create, config apply) refuses with the path, the limit and the fix."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.errors import InferInputError, InputTooLargeError, RepositoryError
from geadmin.ops.infer.spec import MAX_UPLOAD_BYTES, read_local_file
from geadmin.ops.models import change_plan
from geadmin.repository.bounded import read_bounded, read_stream
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES
from tests.support.samples import copy_samples

NOWHERE = "http://127.0.0.1:1"


def test_a_device_is_refused_before_a_byte_is_read_naming_the_path_and_the_limit() -> None:
    with pytest.raises(RepositoryError, match=r"^--file x: /dev/zero is not a regular file .* at most "
                                              r"1.0 KiB; copy it to a file"):
        read_bounded("/dev/zero", 1024, what="--file x", fix="copy it to a file")


def test_a_directory_is_refused_like_a_device_and_its_handle_closed(tmp_path: Path) -> None:
    """`config apply M /tmp`, `infer --input x=@.`: fdopen of a directory raised IsADirectoryError
    before the check (exit 70), and leaked the descriptor."""
    import os

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(RepositoryError, match=rf"^--file x: {tmp_path} is not a regular file"):
            read_bounded(tmp_path, 1024, what="--file x", fix="name a file")
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_regular_file_over_the_limit_is_refused_from_what_was_read(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 1025)
    with pytest.raises(InputTooLargeError, match=r"more than 1.0 KiB, the most geadmin reads: shorten it"):
        read_bounded(big, 1024, what="the file", fix="shorten it", error=InferInputError,
                     too_large=InputTooLargeError)
    assert read_bounded(big, 1025, what="the file", fix="") == b"x" * 1025


def test_a_stream_is_read_up_to_the_limit_only() -> None:
    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            buffer[:] = b"\0" * len(buffer)
            return len(buffer)
    with pytest.raises(RepositoryError, match=r"stdin is more than 4\.0 MiB"):
        read_stream(io.BufferedReader(Endless()), MAX_CONFIG_BYTES, what="stdin", fix="")


def test_an_infer_input_file_that_is_a_device_is_an_input_error() -> None:
    with pytest.raises(InferInputError, match=r"/dev/null is not a regular file .* at most 32.0 MiB"):
        read_local_file("/dev/null")


def test_an_infer_input_file_over_the_upload_limit_is_too_large(tmp_path: Path) -> None:
    big = tmp_path / "big.npy"
    with big.open("wb") as handle:
        handle.truncate(MAX_UPLOAD_BYTES + 1)
    with pytest.raises(InputTooLargeError, match=r"more than 32\.0 MiB"):
        read_local_file(str(big))


def test_models_create_refuses_a_device_as_a_model_file_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    code = main(["models", "create", "zz", "--template", "npu_ge_om", "--file", "1/model.om=/dev/null",
                 "--no-load", "--repository", str(repo), "--url", NOWHERE])
    err = capsys.readouterr().err
    assert code == ExitCode.FAILED, err
    assert "/dev/null is not a regular file" in err and "1.0 GiB" in err, err
    assert not (repo / "zz").exists()


@pytest.mark.parametrize("size", [0, MAX_CONFIG_BYTES + 1])
def test_config_apply_refuses_a_device_or_a_file_over_4_mib_before_reading_it_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], size: int) -> None:
    repo = copy_samples(tmp_path / "repo")
    source = "/dev/null"
    if size:
        big = tmp_path / "big.pbtxt"
        with big.open("wb") as handle:
            handle.truncate(size)
        source = str(big)
    code = main(["config", "apply", "digits_classifier", source, "--repository", str(repo),
                 "--url", NOWHERE, "--yes"])
    err = capsys.readouterr().err
    assert code == ExitCode.FAILED, err
    expected = "is 4,194,305 bytes, more than 4.0 MiB" if size else "/dev/null is not a regular file"
    assert expected in err.splitlines()[0], err


def test_a_config_change_over_4_mib_is_refused_before_it_is_decoded_or_validated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = copy_samples(tmp_path / "repo")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("validated a config over the limit")
    monkeypatch.setattr(change_plan, "validate_text", never)
    client: Any = type("Client", (), {"url": NOWHERE})()
    with pytest.raises(RepositoryError, match="more than a config can be"):
        change_plan.plan_change(client, repo, "digits_classifier", new=b"#" * (MAX_CONFIG_BYTES + 1))
