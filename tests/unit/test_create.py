"""Creating a model from a template, without Triton (load=False): every refusal leaves the
repository exactly as it was, a failure after staging leaves no directory, and a created
model is whole, validated, in the config history and in the audit log."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.errors import CreateRefusedError, RepositoryError, TemplateError
from geadmin.ops.models import create
from geadmin.ops.models.create import CreateOutcome, create_model
from geadmin.repository import atomic, revisions, templates
from geadmin.repository.templates import Params, TensorSpec
from geadmin.repository.validate import Severity
from tests.support.auth import auth_as

OM = b"\x00an offline model\x00"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "existing" / "1").mkdir(parents=True)
    (root / "existing" / "config.pbtxt").write_text('name: "existing"\nbackend: "python"\n')
    (root / "existing" / "1" / "model.py").write_text("# mine\n")
    return root


def snapshot(*roots: Path) -> dict[str, str]:
    """Every path below `roots` (hidden ones and symlinks too) -> what it is / its content hash."""
    seen: dict[str, str] = {}
    for root in roots:
        for directory, dirs, files in os.walk(root, followlinks=False):
            for entry in [*dirs, *files]:
                path = Path(directory) / entry
                if path.is_symlink():
                    seen[str(path)] = f"-> {os.readlink(path)}"
                elif path.is_dir():
                    seen[str(path)] = "dir"
                else:
                    seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def make(repo: Path, name: str = "new_model", template: str = "npu_ge_om",
         files: dict[str, bytes] | None = None, **kwargs: object) -> create.CreateResult:
    given = {"1/model.om": OM} if files is None else files
    return create_model(None, repo, name, template, kwargs.pop("params", None), given,  # type: ignore[arg-type]
                        load=False, auth=auth_as("ann"), **kwargs)  # type: ignore[arg-type]


def refused(repo: Path, outside: Path, error: type[Exception], match: str, **kwargs: object) -> None:
    before = snapshot(repo, outside)
    with pytest.raises(error, match=match):
        make(repo, **kwargs)  # type: ignore[arg-type]
    assert snapshot(repo, outside) == before, "a refusal must write nothing at all"
    assert not [p for p in repo.iterdir() if p.name.startswith(create.STAGING_PREFIX)]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep.txt").write_text("not yours\n")
    return path


@pytest.mark.parametrize("relative", ["../evil.om", "1/../../evil.om", "1/../../../outside/keep.txt"])
def test_dot_dot_in_a_file_name_is_refused_and_nothing_is_written(repo: Path, outside: Path,
                                                                  relative: str) -> None:
    refused(repo, outside, RepositoryError, "'..' would leave the model directory",
            files={"1/model.om": OM, relative: b"x"})


def test_an_absolute_file_name_is_refused(repo: Path, outside: Path) -> None:
    refused(repo, outside, RepositoryError, "absolute paths are not allowed",
            files={"1/model.om": OM, str(outside / "keep.txt"): b"overwritten?"})


def test_a_backslash_in_a_file_name_is_refused(repo: Path, outside: Path) -> None:
    refused(repo, outside, RepositoryError, "backslash", files={"1\\model.om": OM})


def test_a_symlink_in_the_repository_at_the_new_name_is_refused(repo: Path, outside: Path) -> None:
    (repo / "linked").symlink_to(outside, target_is_directory=True)
    refused(repo, outside, RepositoryError, "symbolic link", name="linked")
    (repo / "dangling").symlink_to(outside / "nothing_here")
    refused(repo, outside, RepositoryError, "symbolic link", name="dangling")
    assert not (outside / "nothing_here").exists() and not (outside / "1").exists()


def test_an_oversize_file_is_refused_before_anything_is_written(repo: Path, outside: Path) -> None:
    refused(repo, outside, RepositoryError, "over the upload limit of 100 bytes",
            files={"1/model.om": b"x" * 101}, limit_bytes=100)


def test_a_file_at_the_limit_is_accepted(repo: Path) -> None:
    result = make(repo, files={"1/model.om": b"x" * 100}, limit_bytes=100)
    assert (repo / "new_model" / "1" / "model.om").read_bytes() == b"x" * 100 and result.ok


def test_an_existing_model_directory_is_refused_and_left_untouched(repo: Path, outside: Path) -> None:
    refused(repo, outside, CreateRefusedError, "already exists", name="existing")
    (repo / "a_file").write_text("x")
    refused(repo, outside, CreateRefusedError, "already exists", name="a_file")


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "../escape", "", "two words"])
def test_a_bad_model_name_is_refused(repo: Path, outside: Path, name: str) -> None:
    refused(repo, outside, TemplateError, "refused model name", name=name)


def test_uploading_config_pbtxt_or_the_same_file_twice_is_refused(repo: Path, outside: Path) -> None:
    refused(repo, outside, CreateRefusedError, "the template writes config.pbtxt",
            files={"1/model.om": OM, "config.pbtxt": b"name: 'x'"})
    refused(repo, outside, CreateRefusedError, "two files name '1/model.om'",
            files={"1/model.om": OM, "1//model.om": OM})


@pytest.mark.parametrize("files", [{"1": b"x"}, {"1/model.om": OM, "1/extra": b"x", "1/extra/w.bin": b"y"}])
def test_a_path_that_is_also_a_directory_is_refused(repo: Path, outside: Path,
                                                    files: dict[str, bytes]) -> None:
    refused(repo, outside, CreateRefusedError, "it is a directory of the new model", files=files)


def test_a_config_with_validation_errors_is_refused_with_its_findings(repo: Path, outside: Path) -> None:
    before = snapshot(repo, outside)
    with pytest.raises(CreateRefusedError, match="would not load") as caught:
        make(repo, files={})  # an .om template without its .om
    assert [(f.rule, f.path) for f in caught.value.findings if f.severity is Severity.ERROR] == [
        ("npu_ge.model_file", "1/model.om")]
    assert "npu_ge.model_file" in str(caught.value) and "fix:" in str(caught.value)
    assert create.STAGING_PREFIX not in str(caught.value)  # paths as they would be, not the staging ones
    assert snapshot(repo, outside) == before
    with pytest.raises(CreateRefusedError, match=r"npu_ge\.dims_dynamic"):
        make(repo, params=Params(inputs=(TensorSpec("x", "FP32", (-1, 4)),)))
    assert snapshot(repo, outside) == before


def test_the_identity_template_refuses_outputs_unlike_its_inputs_unless_model_py_is_uploaded(
    repo: Path, outside: Path
) -> None:
    params = Params(outputs=(TensorSpec("OUTPUT0", "INT32", (2,)),))
    refused(repo, outside, TemplateError, "identity", template="python", files={}, params=params)
    result = make(repo, template="python", files={"1/model.py": b"# my own\n"}, params=params)
    assert (repo / "new_model" / "1" / "model.py").read_bytes() == b"# my own\n" and result.ok


def test_a_failure_after_staging_leaves_no_directory(repo: Path, outside: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(source: Path, destination: Path) -> None:
        assert (source / "1" / "model.om").read_bytes() == OM  # it failed after staging everything
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(create, "rename_noreplace", no_space)
    refused(repo, outside, RepositoryError, "No space left on device.*nothing was created")


def test_an_unexpected_failure_while_validating_leaves_no_directory(repo: Path, outside: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(directory: Path) -> None:
        raise RuntimeError("validator bug")

    monkeypatch.setattr(create, "validate_model", broken)
    refused(repo, outside, RuntimeError, "validator bug")


def test_the_final_rename_never_replaces_what_appeared_meanwhile(tmp_path: Path) -> None:
    source, destination = tmp_path / "staged", tmp_path / "raced"
    source.mkdir()
    destination.mkdir()  # empty: a plain rename(2) would silently replace it
    with pytest.raises(FileExistsError):
        atomic.rename_noreplace(source, destination)
    assert source.is_dir() and destination.is_dir()


def test_a_created_model_is_whole_in_the_history_and_audited(repo: Path, home: Path) -> None:
    result = make(repo, params=Params(max_batch_size=4, device_ids=(0, 1)))
    directory = repo / "new_model"
    assert result.outcome is CreateOutcome.CREATED and result.ok and result.directory == directory
    assert sorted(str(p.relative_to(directory)) for p in directory.rglob("*")) == [
        "1", "1/model.om", "config.pbtxt"]
    assert (directory / "1" / "model.om").read_bytes() == OM
    config = (directory / "config.pbtxt").read_bytes()
    assert config == templates.render_config("npu_ge_om", "new_model",
                                             Params(max_batch_size=4, device_ids=(0, 1))).encode()
    assert [f.severity for f in result.findings if f.severity is Severity.ERROR] == []
    assert not [p for p in repo.iterdir() if p.name.startswith(".")]  # the staging dir is gone
    assert oct(directory.stat().st_mode & 0o755) == oct(0o755)  # readable by a Triton of another user
    (revision,) = revisions.history(repo, "new_model")
    assert (revision.number, revision.data, revision.who) == (1, config, "ann")
    assert result.revision == 1
    (row, started) = audit.query(action="create")  # the outcome, after the row written before staging
    assert (started.model, started.result, started.who) == ("new_model", "started", "ann")
    assert (row.model, row.result, row.who, row.origin) == ("new_model", "ok", "ann", "dashboard")
    assert '+name: "new_model"' in row.diff and "template npu_ge_om" in row.message
    assert "not loaded" in result.message and result.load_state is None


def test_refusals_are_audited(repo: Path) -> None:
    with pytest.raises(CreateRefusedError):
        make(repo, name="existing")
    (row,) = audit.query(action="create")
    assert (row.model, row.result) == ("existing", "refused") and "already exists" in row.message


def test_next_steps_name_what_to_fix() -> None:
    assert "findings" in create.next_step(CreateRefusedError("x", findings=(object(),)))  # type: ignore[arg-type]
    assert "name" in create.next_step(RepositoryError("x"))


def test_the_new_model_is_made_durable_by_the_one_directory_fsync(repo: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(create, "fsync_directory", synced.append)  # geadmin.repository.atomic's
    make(repo)
    assert synced == [repo]

    def disk_error(directory: Path) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(create, "fsync_directory", disk_error)
    with pytest.raises(RepositoryError, match=r"created .*other_model, but the disk did not confirm it"):
        make(repo, name="other_model")
    assert (repo / "other_model" / "config.pbtxt").is_file()  # renamed: said, not denied
