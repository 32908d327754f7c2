from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from geadmin.errors import RepositoryError
from geadmin.stack.workspace import SAMPLE_REPOSITORY, Workspace


def test_first_use_copies_the_sample_repository(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "home")
    assert workspace.ensure() is True
    copied = sorted(p.name for p in workspace.repository.iterdir())
    assert copied == sorted(p.name for p in SAMPLE_REPOSITORY.iterdir() if p.name != "__pycache__")
    assert (workspace.repository / "digits_classifier" / "1" / "weights.npz").is_file()
    assert workspace.logs.is_dir()


def test_edits_survive_later_runs_and_the_packaged_copy_stays_pristine(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "home")
    workspace.ensure()
    config = workspace.repository / "text_normalize" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 16", "max_batch_size: 4"))
    shutil.rmtree(workspace.repository / "digits_pipeline")

    assert workspace.ensure() is False
    assert "max_batch_size: 4" in config.read_text()
    assert not (workspace.repository / "digits_pipeline").exists()
    assert "max_batch_size: 16" in (SAMPLE_REPOSITORY / "text_normalize" / "config.pbtxt").read_text()
    assert (SAMPLE_REPOSITORY / "digits_pipeline").is_dir()


def test_an_interrupted_copy_leaves_no_partial_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = Workspace(tmp_path / "home")

    def copy_then_fail(src: object, dst: Path, **kwargs: object) -> None:
        Path(dst, "half").mkdir(parents=True)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copytree", copy_then_fail)
    with pytest.raises(RepositoryError, match="No space left on device"):
        workspace.ensure()
    assert not workspace.repository.exists()
    assert [p.name for p in workspace.home.iterdir()] == ["logs"]


def test_unwritable_home_names_the_directory_and_the_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RepositoryError, match="GEADMIN_HOME"):
        Workspace(blocker / "home").ensure()


def test_rotate_keeps_the_previous_log(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    workspace.ensure()
    workspace.triton_log.write_text("run 1\n")
    workspace.rotate_triton_log()
    assert not workspace.triton_log.exists()
    assert (workspace.logs / "tritonserver.log.1").read_text() == "run 1\n"


def test_the_admin_key_is_written_through_write_secret_atomically(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from geadmin.repository.atomic import write_secret_atomically
    from geadmin.stack import workspace as workspace_module

    written: list[Path] = []

    def recorded(path: Path, data: bytes) -> None:
        written.append(path)
        write_secret_atomically(path, data)

    monkeypatch.setattr(workspace_module, "write_secret_atomically", recorded)
    workspace = Workspace(tmp_path / "home")
    key = workspace.ensure_admin_key()
    assert written == [workspace.admin_key_file]
    assert workspace.admin_key_file.read_text() == key + "\n"
    assert oct(workspace.admin_key_file.stat().st_mode & 0o777) == "0o600"
