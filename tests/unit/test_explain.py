"""Explainer pieces that need no server: log parsing, the log source, layout checks, summaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.explain import (
    Explanation,
    LogLine,
    Serving,
    explanation_dict,
    layout_problems,
    model_log_lines,
    parse_log_line,
)
from geadmin.logsource import LocalLogFile, log_source_from_env
from tests.conftest import copy_samples

POLL_FAILED = ('E1202 15:32:37.818934 7152 model_repository_manager.cc:1460] "Poll failed for model '
               "directory 'digits_classifier': unexpected platform type 'graph_executor' for "
               'digits_classifier"')
INIT_FAILED = ('E1202 15:33:03.426784 7152 model_lifecycle.cc:642] "failed to load \'text_normalize\' '
               'version 1: Internal: RuntimeError: boom\\n\\nAt:\\n  /tmp/x/1/model.py(4): initialize\\n"')


def test_parse_default_format_unescapes_the_message() -> None:
    line = parse_log_line(INIT_FAILED)
    assert line.severity == "E"
    assert line.message.startswith(
        "failed to load 'text_normalize' version 1: Internal: RuntimeError: boom\n")


def test_parse_iso8601_format() -> None:
    line = parse_log_line('2024-12-02T15:32:37Z W 7152 backend_model.cc:10] "slow start for m"')
    assert (line.severity, line.message) == ("W", "slow start for m")


def test_unformatted_line_is_kept_verbatim() -> None:
    line = parse_log_line("Error: Failed to initialize NVML")
    assert line.severity == "" and line.message == "Error: Failed to initialize NVML"


def test_model_lines_match_the_name_and_its_instances_only() -> None:
    text = "\n".join([
        POLL_FAILED,
        'I1202 15:33:03.0 7152 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: '
        'digits_classifier_0_1 (CPU device 0)"',
        'I1202 15:33:03.0 7152 model_lifecycle.cc:472] "loading: digits_classifier_v2:1"',
        'E1202 15:33:03.0 7152 model_lifecycle.cc:642] "failed to load \'digits\'"',
    ])
    lines = model_log_lines(text, "digits_classifier")
    assert len(lines) == 2
    assert "digits_classifier_v2" not in "".join(line.raw for line in lines)


def test_log_reason_prefers_errors_and_cuts_the_traceback() -> None:
    explanation = Explanation("text_normalize", "api said no",
                              log_lines=(parse_log_line('W1 1 1 a.cc:1] "text_normalize warn"'),
                                         parse_log_line(INIT_FAILED)))
    assert explanation.log_reason == ("failed to load 'text_normalize' version 1: Internal: "
                                      "RuntimeError: boom")
    assert explanation.reason == explanation.log_reason


def test_reason_falls_back_to_layout_then_api() -> None:
    layout = ("no config.pbtxt in /r/m",)
    assert Explanation("m", "api", layout_problems=layout).reason == layout[0]
    assert Explanation("m", "api").reason == "api"


def test_summary_says_what_serves_and_where_the_log_is() -> None:
    explanation = Explanation("m", "failed to poll", log_lines=(parse_log_line(POLL_FAILED),),
                              serving=Serving.PREVIOUS, serving_version="3", log_description="log file /x")
    text = explanation.summary()
    assert text.splitlines()[0].startswith("load of 'm' failed: Poll failed")
    assert "Triton answered: failed to poll" in text
    assert "version 3 (the previously loaded one) is still serving" in text
    assert "Triton log (log file /x)" in text
    no_log = Explanation("m", "x", serving=Serving.UNKNOWN, serving_error="timed out").summary()
    assert "GEADMIN_TRITON_LOG" in no_log
    assert "could not check whether the model is serving: timed out" in no_log
    assert explanation_dict(explanation)["serving"] == "PREVIOUS"


def test_local_log_file_reads_only_what_was_written_after_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    path.write_text("old line about m\n")
    log = LocalLogFile(path)
    cursor = log.cursor()
    with path.open("a") as file:
        file.write("new line about m\n")
    assert log.read_since(cursor) == "new line about m\n"
    path.write_text("rotated\n")  # truncated: read from the start
    assert log.read_since(cursor) == "rotated\n"


def test_local_log_file_is_bounded_and_tolerates_a_missing_file(tmp_path: Path) -> None:
    log = LocalLogFile(tmp_path / "missing.log", max_bytes=10)
    cursor = log.cursor()
    assert cursor.offset == 0 and log.read_since(cursor) == ""
    (tmp_path / "missing.log").write_text("x" * 100)
    assert log.read_since(cursor) == "x" * 10


def test_log_source_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GEADMIN_TRITON_LOG", raising=False)
    assert log_source_from_env() is None
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(tmp_path / "t.log"))
    source = log_source_from_env()
    assert isinstance(source, LocalLogFile) and source.path == tmp_path / "t.log"


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
    assert "does not parse" in problem and "1:" in problem


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
    assert any('backend: "npu_ge"' in p for p in problems)
    assert any("version 2" in p for p in problems)


def test_npu_ge_accepts_any_of_its_model_files(repo: Path) -> None:
    model = repo / "ascend"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "ascend"\nbackend: "npu_ge"\n')
    assert "model.om or model.onnx or model.pb" in layout_problems(repo, "ascend")[0]
    (model / "1" / "model.om").write_bytes(b"om")
    assert layout_problems(repo, "ascend") == []


def test_logline_is_a_value() -> None:
    assert parse_log_line(POLL_FAILED) == LogLine("E", parse_log_line(POLL_FAILED).message, POLL_FAILED)


def test_names_that_leave_the_repository_are_refused(tmp_path: Path) -> None:
    from geadmin.explain import layout_problems
    from geadmin.models import disk_config

    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "config.pbtxt").write_text('name: "outside" backend: "python"')
    repository = tmp_path / "repo"
    repository.mkdir()
    for name in ("../outside", "/etc", ".."):
        assert layout_problems(repository, name) == [
            f"{name!r} is not a model name (one directory name, without '/' or '..')"]
        assert disk_config(repository, name) is None


def test_an_unreadable_model_directory_is_a_problem_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geadmin.explain import layout_problems

    model = tmp_path / "m"
    (model / "²").mkdir(parents=True)  # isdigit() but not int()
    (model / "config.pbtxt").write_text('name: "m" backend: "python"')
    assert layout_problems(tmp_path, "m") == [f"no version directory in {model} (e.g. {model / '1'})"]

    def denied(self: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)  # tests run as root, which reads anything
    assert layout_problems(tmp_path, "m") == [f"cannot read {model}: Permission denied"]
