"""Repository layout checks and the config.pbtxt reader (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.errors import ConfigParseError, RepositoryError
from geadmin.repository.layout import layout_problems, read_model_config
from geadmin.repository.modelconfig import parse_pbtxt
from tests.support.samples import copy_samples


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "repo")


def test_sample_repository_has_no_layout_problems(repo: Path) -> None:
    for name in ("digits_classifier", "digits_pipeline", "text_normalize"):
        assert layout_problems(repo, name) == [], name


def test_missing_directory_suggests_a_close_name(repo: Path) -> None:
    (problem,) = layout_problems(repo, "text_normalise")
    assert problem.startswith("no model directory") and "did you mean 'text_normalize'" in problem


def test_missing_config_and_unparsable_config(repo: Path) -> None:
    (repo / "text_normalize" / "config.pbtxt").unlink()
    assert layout_problems(repo, "text_normalize") == [f"no config.pbtxt in {repo / 'text_normalize'}"]
    (repo / "digits_classifier" / "config.pbtxt").write_text("max_batch_size: banana\n")
    (problem,) = layout_problems(repo, "digits_classifier")
    assert "does not parse: line 1, column 17:" in problem and "banana" in problem


def test_missing_version_directory_and_model_file(repo: Path) -> None:
    (repo / "text_normalize" / "1" / "model.py").unlink()
    (problem,) = layout_problems(repo, "text_normalize")
    assert problem.startswith("no model.py in") and "'python' backend" in problem
    for child in (repo / "text_normalize" / "1").iterdir():
        if child.is_file():
            child.unlink()
    (repo / "text_normalize" / "1").rmdir()
    assert layout_problems(repo, "text_normalize")[0].startswith("no version directory")


def test_wrong_name_graph_executor_and_specific_versions(repo: Path) -> None:
    config = repo / "digits_classifier" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "digits_classifier"', 'name: "other"')
                      .replace('backend: "python"', 'platform: "graph_executor"')
                      + "version_policy { specific { versions: [ 1, 2 ] } }\n")
    problems = layout_problems(repo, "digits_classifier")
    assert any("name: 'other'" in p for p in problems)
    assert any('replace it with backend: "npu_ge"' in p for p in problems)
    assert any("version 2" in p for p in problems)


def test_npu_ge_accepts_any_of_its_model_files(repo: Path) -> None:
    model = repo / "ascend"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "ascend"\nbackend: "npu_ge"\n')
    assert "model.om or model.onnx or model.pb" in layout_problems(repo, "ascend")[0]
    (model / "1" / "model.om").write_bytes(b"om")
    assert layout_problems(repo, "ascend") == []


def test_graph_executor_names_the_fix_and_the_files_that_are_there(repo: Path) -> None:
    model = repo / "resnet"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.graphdef").write_bytes(b"tf")
    (model / "config.pbtxt").write_text('name: "resnet"\nplatform: "graph_executor"\n')
    platform, files = layout_problems(repo, "resnet")
    assert 'replace it with backend: "npu_ge"' in platform
    assert "no model.om or model.onnx or model.pb" in files and "it holds model.graphdef" in files


def test_parse_errors_carry_the_parsers_line_and_column() -> None:
    text = 'name: "m"\ninput [{ name: "x" data_type: TYPE_FOO dims: [1] }]\n'
    with pytest.raises(ConfigParseError) as caught:
        parse_pbtxt(text, "m/config.pbtxt")
    assert (caught.value.line, caught.value.column) == (2, 31)
    message = str(caught.value)
    assert message.startswith("m/config.pbtxt does not parse: line 2, column 31: ")
    assert message.endswith('Enum type "inference.DataType" has no value named TYPE_FOO.')


def test_a_config_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_bytes(b"name: \xff")
    with pytest.raises(RepositoryError, match="is not UTF-8"):
        read_model_config(tmp_path, "m")


def test_names_that_leave_the_repository_are_refused(tmp_path: Path) -> None:

    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "config.pbtxt").write_text('name: "outside" backend: "python"')
    repository = tmp_path / "repo"
    repository.mkdir()
    for name in ("../outside", "/etc", ".."):
        assert layout_problems(repository, name) == [
            f"{name!r} is not a model name (one directory name, without '/' or '..')"]
        with pytest.raises(RepositoryError, match="not a model name"):
            read_model_config(repository, name)


def test_an_unreadable_model_directory_is_a_problem_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m"
    (model / "²").mkdir(parents=True)  # isdigit() but not int()
    (model / "config.pbtxt").write_text('name: "m" backend: "python"')
    assert layout_problems(tmp_path, "m") == [f"no version directory in {model} (e.g. {model / '1'})"]

    def denied(self: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)  # tests run as root, which reads anything
    assert layout_problems(tmp_path, "m") == [f"cannot read {model}: Permission denied"]
