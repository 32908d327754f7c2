"""`geadmin config validate`: exit codes, the verdict on the first line, the --json shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geadmin.cli.main import main
from geadmin.stack.processes import free_port
from tests.support.configs import BASE, STEP
from tests.support.samples import copy_samples

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


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
    assert code == EXIT_OK and lines == ["OK: 5 models, no errors or warnings"]


def test_warnings_only_exit_0_and_are_listed_with_their_fix(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    directory = model(tmp_path, "m", BASE.replace('name: "m"\n', "")
                      + 'parameters { key: "DEVICE_ID" value { string_value: "0" } }\n')
    code, lines, _ = run(capsys, str(directory))
    assert code == EXIT_OK
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
    assert code == EXIT_ERRORS
    assert lines[0] == "FAIL: 2 errors and 0 warnings; 1 of 2 models would not load"
    assert any("error [npu_ge.platform] platform:" in line for line in lines)
    assert '    fix: replace `platform: "graph_executor"` with `backend: "npu_ge"`' in lines


def test_several_paths_and_a_config_file_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = model(tmp_path, "m", BASE)
    two = model(tmp_path, "step", STEP)
    code, lines, _ = run(capsys, str(one / "config.pbtxt"), str(two))
    assert code == EXIT_OK and lines == ["OK: 2 models, no errors or warnings"]


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = model(tmp_path, "m", BASE.replace("TYPE_FP32", "TYPE_FOO", 1))
    code, lines, _ = run(capsys, str(directory), "--json")
    document = json.loads("\n".join(lines))
    assert code == EXIT_ERRORS
    assert set(document) == {"verdict", "headline", "errors", "warnings", "infos", "models_checked",
                             "models_failing", "models"}
    assert (document["verdict"], document["errors"], document["models_checked"]) == ("fail", 1, 1)
    (report,) = document["models"]
    assert report == {"name": "m", "directory": str(directory), "config": str(directory / "config.pbtxt"),
                      "findings": [report["findings"][0]]}
    assert report["findings"][0] == {
        "rule": "schema.bad_enum", "severity": "error", "path": "input[0].data_type", "line": 4, "column": 32,
        "message": 'does not parse: Enum type "inference.DataType" has no value named TYPE_FOO.',
        "fix": "did you mean TYPE_BOOL?", "file": str(directory / "config.pbtxt")}


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, str(tmp_path / "nowhere"))
    assert code == EXIT_USAGE and lines == [] and "does not exist" in err
    with pytest.raises(SystemExit) as exc:
        main(["config", "validate"])
    assert exc.value.code == EXIT_USAGE


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
    assert main(argv) == EXIT_ERRORS
    _, err = capsys.readouterr()
    first, *rest = err.splitlines()
    assert first.startswith("geadmin: error: the new config of 'digits_classifier' would not load: ")
    assert "Nothing was written" in first and any("[triton.preferred_batch_size]" in line for line in rest)
    assert main([*argv, "--json"]) == EXIT_ERRORS
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "ConfigInvalidError"
    assert [f["rule"] for f in document["findings"]] == ["triton.preferred_batch_size"]
    assert config.read_bytes() == before
