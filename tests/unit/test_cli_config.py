"""`geadmin config validate`: exit codes, the verdict on the first line, the --json shape."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.stack.processes import free_port
from tests.support.configs import BASE, STEP
from tests.support.samples import copy_samples


def model(repo: Path, name: str, config: str, files: tuple[str, ...] = ("1/model.om",)) -> Path:
    directory = repo / name
    directory.mkdir(parents=True)
    (directory / "config.pbtxt").write_text(config)
    for file in files:
        (directory / file).parent.mkdir(parents=True, exist_ok=True)
        (directory / file).write_text("om")
    return directory


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["config", "validate", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_a_clean_repository_exits_0_with_the_verdict_first(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, str(copy_samples(tmp_path / "repo")))
    assert code == ExitCode.OK and lines == ["OK: 5 models, no errors or warnings"]


def test_warnings_only_exit_0_and_are_listed_with_their_fix(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    directory = model(tmp_path, "m", BASE.replace('name: "m"\n', "")
                      + 'parameters { key: "DEVICE_ID" value { string_value: "0" } }\n')
    code, lines, _ = run(capsys, str(directory))
    assert code == ExitCode.OK
    assert lines[0] == "OK with warnings: 1 warning in 1 model, no errors"
    assert lines[1] == (f"{directory / 'config.pbtxt'}:7:1: warning [npu_ge.deprecated_key] "
                        "parameters[\"DEVICE_ID\"]: parameter 'DEVICE_ID' is deprecated, npu_ge reads it as "
                        "'device_ids'")
    assert lines[2] == "    fix: rename the key to 'device_ids'"


def test_errors_exit_1_and_the_verdict_counts_models_that_would_not_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model(tmp_path, "good", STEP.replace('"step"', '"good"'))
    model(tmp_path, "bad", BASE.replace('name: "m"', 'name: "bad"').replace("KIND_CPU", "KIND_GPU")
          .replace('backend: "npu_ge"', 'platform: "graph_executor"'))
    code, lines, _ = run(capsys, str(tmp_path))
    assert code == ExitCode.FAILED
    assert lines[0] == "FAIL: 2 errors and 0 warnings; 1 of 2 models would not load"
    assert any("error [npu_ge.platform] platform:" in line for line in lines)
    assert '    fix: replace `platform: "graph_executor"` with `backend: "npu_ge"`' in lines


def test_several_paths_and_a_config_file_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = model(tmp_path, "m", BASE)
    two = model(tmp_path, "step", STEP)
    code, lines, _ = run(capsys, str(one / "config.pbtxt"), str(two))
    assert code == ExitCode.OK and lines == ["OK: 2 models, no errors or warnings"]


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = model(tmp_path, "m", BASE.replace("TYPE_FP32", "TYPE_FOO", 1))
    code, lines, _ = run(capsys, str(directory), "--json")
    document = json.loads("\n".join(lines))
    assert code == ExitCode.FAILED
    assert set(document) == {"verdict", "headline", "errors", "warnings", "infos", "models_checked",
                             "models_failing", "models"}
    assert (document["verdict"], document["errors"], document["models_checked"]) == ("fail", 1, 1)
    (report,) = document["models"]
    assert report == {"name": "m", "directory": str(directory), "config": str(directory / "config.pbtxt"),
                      "note": "", "findings": [report["findings"][0]]}
    assert report["findings"][0] == {
        "rule": "schema.bad_enum", "severity": "error", "path": "input[0].data_type", "line": 4, "column": 32,
        "message": 'does not parse: Enum type "inference.DataType" has no value named TYPE_FOO.',
        "fix": "did you mean TYPE_BOOL?", "file": str(directory / "config.pbtxt")}


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, str(tmp_path / "nowhere"))
    assert code == ExitCode.USAGE and lines == [] and "does not exist" in err
    with pytest.raises(SystemExit) as exc:
        main(["config", "validate"])
    assert exc.value.code == ExitCode.USAGE


def test_apply_of_an_invalid_config_says_why_first_lists_findings_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    repo = copy_samples(tmp_path / "repo")
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    config = repo / "digits_classifier" / "config.pbtxt"
    before = config.read_bytes()
    bad = tmp_path / "bad.pbtxt"
    bad.write_text(before.decode().replace("preferred_batch_size: [ 8, 16 ]",
                                           "preferred_batch_size: [ 8, 64 ]"))
    url = f"http://127.0.0.1:{free_port()}"  # never reached: the validator refuses first
    argv = ["config", "apply", "digits_classifier", str(bad), "--repository", str(repo), "--url", url]
    assert main(argv) == ExitCode.FAILED
    _, err = capsys.readouterr()
    first, *rest = err.splitlines()
    assert first.startswith("geadmin: error: the new config of 'digits_classifier' would not load: ")
    assert "Nothing was written" in first and any("[triton.preferred_batch_size]" in line for line in rest)
    assert main([*argv, "--json"]) == ExitCode.FAILED
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "ConfigInvalidError"
    assert [f["rule"] for f in document["findings"]] == ["triton.preferred_batch_size"]
    assert config.read_bytes() == before


# -- a config being edited outside the repository (the incident guide's workflow) ------------
CLASSIFIER = "digits_classifier"


QUEUE_EDIT = ("max_queue_delay_microseconds: 1000", "max_queue_delay_microseconds: 2000")


def edited_copy(repo: Path, where: Path, edit: tuple[str, str] = QUEUE_EDIT) -> Path:
    """The served config copied out of the repository and edited, as the incident guide says."""
    where.parent.mkdir(parents=True, exist_ok=True)
    text = (repo / CLASSIFIER / "config.pbtxt").read_text()
    assert edit[0] in text
    where.write_text(text.replace(*edit))
    return where


@pytest.mark.parametrize("name", ["edited.pbtxt", "scratch/config.pbtxt"])
def test_an_edited_copy_outside_the_repository_is_validated_as_the_model_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """It failed with "no config.pbtxt in ..." (edited.pbtxt) and "no version directory"
    (a config.pbtxt in a scratch directory)."""
    repo = copy_samples(tmp_path / "repo")
    copy = edited_copy(repo, tmp_path / "work" / name)
    code, lines, err = run(capsys, str(copy), "--repository", str(repo))
    assert code == ExitCode.OK, (lines, err)
    assert lines == ["OK: 1 model, no errors or warnings",
                     f"validated {copy} as model '{CLASSIFIER}' of {repo} (as if it stood in "
                     f"{repo / CLASSIFIER}: its version directories, model files and the ensembles that "
                     "run it)"]


def test_a_broken_copy_fails_naming_the_field_and_the_line_of_the_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_samples(tmp_path / "repo")
    copy = edited_copy(repo, tmp_path / "edited.pbtxt", ("preferred_batch_size: [ 8, 16 ]",
                                                         "preferred_batch_size: [ 8, 64 ]"))
    code, lines, _ = run(capsys, str(copy), "--repository", str(repo))
    assert code == ExitCode.FAILED
    assert lines[0] == "FAIL: 1 error and 0 warnings; 1 of 1 model would not load"
    assert lines[2].startswith(f"{copy}:12:") and "[triton.preferred_batch_size] dynamic_batching" in lines[2]


def test_the_copy_is_held_to_its_models_directory_and_ensembles_on_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rules that need the model directory run against the one in the repository: a version
    it does not have, an output the ensemble on disk still reads."""
    repo = copy_samples(tmp_path / "repo")
    version = edited_copy(repo, tmp_path / "v.pbtxt", ("max_batch_size: 32",
                                                       "max_batch_size: 32\nversion_policy { specific "
                                                       "{ versions: [ 2 ] } }"))
    code, lines, _ = run(capsys, str(version), "--repository", str(repo))
    assert code == ExitCode.FAILED and any("version_policy" in line for line in lines), lines
    renamed = edited_copy(repo, tmp_path / "o.pbtxt", ('name: "probabilities"', 'name: "probs"'))
    code, lines, _ = run(capsys, str(renamed), "--repository", str(repo))
    assert code == ExitCode.FAILED and any("digits_pipeline" in line for line in lines), lines


def test_the_copy_finds_the_running_stacks_repository_without_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from geadmin.domain import Ports
    from geadmin.stack.workspace import StackInfo, Workspace

    repo = copy_samples(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    for name in ("GEADMIN_REPOSITORY", "GEADMIN_TRITON_URL"):
        monkeypatch.delenv(name, raising=False)
    Workspace(home).write_stack(StackInfo(  # a live `geadmin up` (this process stands in for its pid)
        pid=os.getpid(), http_url="http://127.0.0.1:28100", grpc_url="grpc://127.0.0.1:28101",
        metrics_url="http://127.0.0.1:28102/metrics", ports=Ports(28100, 28101, 28102),
        dashboard_url="", triton_log=home / "t.log", repository=repo, home=home))
    copy = edited_copy(repo, tmp_path / "edited.pbtxt")
    code, lines, _ = run(capsys, str(copy))
    assert code == ExitCode.OK and lines[1].startswith(f"validated {copy} as model '{CLASSIFIER}' of {repo} ")


def test_without_a_repository_the_copy_gets_the_text_rules_and_says_what_was_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "no-stack"))
    for name in ("GEADMIN_REPOSITORY", "GEADMIN_TRITON_URL"):
        monkeypatch.delenv(name, raising=False)
    copy = edited_copy(copy_samples(tmp_path / "repo"), tmp_path / "edited.pbtxt")
    code, lines, _ = run(capsys, str(copy))
    assert code == ExitCode.OK and lines[0] == "OK: 1 model, no errors or warnings"
    assert "no repository known (give --repository" in lines[1] and "were not checked" in lines[1]
    other = copy_samples(tmp_path / "other")
    (copy.parent / "unknown.pbtxt").write_text(copy.read_text().replace(CLASSIFIER, "not_here"))
    code, lines, _ = run(capsys, str(copy.parent / "unknown.pbtxt"), "--repository", str(other))
    assert code == ExitCode.OK and f"{other} has no model 'not_here'" in lines[1]


@pytest.mark.parametrize("given", ["abc", "", "  ", "z" * 64, "a" * 65, "0123456"])
def test_an_expect_hash_that_is_not_a_sha256_or_a_long_enough_prefix_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str) -> None:
    """`abc` read as "changed since you opened it", and an empty value turned the check off."""
    edited = tmp_path / "edited.pbtxt"
    edited.write_text('name: "m"\nbackend: "python"\n')
    with pytest.raises(SystemExit) as done:
        main(["config", "apply", "m", str(edited), "--expect-hash", given, "--url", "http://127.0.0.1:1",
              "--repository", str(tmp_path)])
    assert done.value.code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"argument --expect-hash: not a sha256: {given!r} — give the 64 hex digits" in err, err
