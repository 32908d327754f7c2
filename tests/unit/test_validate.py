"""The config validator, rule by rule: for every rule a valid case (the rule is silent) and an
invalid case (the rule fires, with its path, severity and line), plus the promise that no
text, however broken, makes the validator raise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geadmin.errors import RepositoryError
from geadmin.repository.validate import (
    RULES,
    SCHEMA_RULES,
    Finding,
    Severity,
    rule_catalogue,
    summarize,
    validate_model,
    validate_path,
    validate_text,
)
from tests.support.configs import BASE, ENSEMBLE, STEP
from tests.support.hypothesis_profiles import examples
from tests.support.samples import copy_samples

Change = Callable[[Path], None]


def text(old: str, new: str) -> Change:
    def apply(model: Path) -> None:
        config = model / "config.pbtxt"
        assert old in config.read_text(), (old, config.read_text())
        config.write_text(config.read_text().replace(old, new, 1))
    return apply


def append(extra: str) -> Change:
    def apply(model: Path) -> None:
        config = model / "config.pbtxt"
        config.write_text(config.read_text() + extra + "\n")
    return apply


def param(key: str, value: str) -> Change:
    return append(f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}')


def touch(relative: str, directory: bool = False) -> Change:
    def apply(model: Path) -> None:
        target = model / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if directory else target.write_text("x")
    return apply


def remove(relative: str) -> Change:
    return lambda model: (model / relative).unlink()


def both(*changes: Change) -> Change:
    def apply(model: Path) -> None:
        for change in changes:
            change(model)
    return apply


def as_python(model: Path) -> None:
    text('backend: "npu_ge"', 'backend: "python"')(model)
    remove("1/model.om")(model)
    touch("1/model.py")(model)


def as_ensemble(model: Path) -> None:
    (model / "config.pbtxt").write_text(ENSEMBLE)
    remove("1/model.om")(model)


def in_an_ensemble(model: Path) -> None:
    """`m` becomes a step of ensemble `e` (max_batch_size 8) in the same repository."""
    ensemble = model.parent / "e"
    ensemble.mkdir()
    config = ENSEMBLE.replace('name: "m"', 'name: "e"').replace('"step"', '"m"')
    (ensemble / "config.pbtxt").write_text(config)


def nothing(model: Path) -> None:
    pass


@dataclass(frozen=True)
class Case:
    valid: Change
    invalid: Change
    path: str
    line: int | None = None


CASES: dict[str, Case] = {
    "schema.syntax": Case(nothing, append("version_policy { latest { num_versions: 1 }"),
                          "version_policy", 8),
    "schema.unknown_field": Case(nothing, text("dims: [4] }]\noutput", "dim: [4] }]\noutput"), "input[0]", 4),
    "schema.bad_enum": Case(nothing, text("TYPE_FP32", "TYPE_FP23"), "input[0].data_type", 4),
    "schema.unreadable": Case(nothing, remove("config.pbtxt"), ""),
    "triton.name_mismatch": Case(text('name: "m"', ""), text('name: "m"', 'name: "n"'), "name", 1),
    "triton.backend_missing": Case(nothing, text('backend: "npu_ge"', ""), ""),
    "triton.backend_guessed": Case(nothing, both(text('backend: "npu_ge"', ""), touch("1/model.onnx")), ""),
    "triton.platform_unknown": Case(nothing, text('backend: "npu_ge"', 'platform: "ascend_om"'),
                                    "platform", 2),
    "triton.label_file_outside": Case(
        both(touch("labels.txt"),
             text("dims: [4] }]\ninstance", 'dims: [4], label_filename: "labels.txt" }]\ninstance')),
        text("dims: [4] }]\ninstance", 'dims: [4], label_filename: "../../etc/passwd" }]\ninstance'),
        "output[0].label_filename", 5),
    "triton.max_batch_size": Case(text("max_batch_size: 8", "max_batch_size: 16"),
                                  text("max_batch_size: 8", "max_batch_size: -1"), "max_batch_size", 3),
    "triton.tensor_incomplete": Case(nothing, text('"x", data_type: TYPE_FP32, ', '"x", '),
                                     "input[0].data_type", 4),
    "triton.dims_invalid": Case(nothing, text("dims: [4] }]\noutput", "dims: [0] }]\noutput"),
                                "input[0].dims", 4),
    "triton.dims_batch": Case(text("dims: [4] }]\noutput", "dims: [2, 4] }]\noutput"),
                              text("dims: [4] }]\noutput", "dims: [8, 4] }]\noutput"), "input[0].dims", 4),
    "triton.batching_unbatched": Case(nothing, text("max_batch_size: 8", "max_batch_size: 0"),
                                      "dynamic_batching", 7),
    "triton.preferred_batch_size": Case(text("2000", "2000 preferred_batch_size: [8]"),
                                        text("2000", "2000 preferred_batch_size: [4, 16]"),
                                        "dynamic_batching.preferred_batch_size", 7),
    "triton.instance_count": Case(text("count: 1", "count: 2"), text("count: 1", "count: -1"),
                                  "instance_group[0].count", 6),
    "triton.ensemble_instances": Case(as_ensemble, both(as_ensemble, append("instance_group [{ count: 1 }]")),
                                      "instance_group", 12),
    "triton.version_policy": Case(append("version_policy { latest { num_versions: 1 } }"),
                                  append("version_policy { latest { num_versions: 0 } }"),
                                  "version_policy.latest", 8),
    "triton.version_missing": Case(append("version_policy { specific { versions: [1] } }"),
                                   append("version_policy { specific { versions: [1, 2] } }"),
                                   "version_policy.specific.versions", 8),
    "triton.no_version": Case(append("version_policy { all {} }"),
                              append("version_policy { specific { versions: [3] } }"), "version_policy", 8),
    "triton.version_dir_ignored": Case(touch("0", directory=True), touch("02", directory=True), "02/"),
    "triton.model_file": Case(as_python, both(as_python, remove("1/model.py")), "1/model.py"),
    "ensemble.step_model": Case(as_ensemble, both(as_ensemble, text('"step"', '"stpe"')),
                                "ensemble_scheduling.step[0].model_name", 7),
    "ensemble.step_tensor": Case(as_ensemble, both(as_ensemble, text('key: "x"', 'key: "z"')),
                                 'ensemble_scheduling.step[0].input_map["z"]', 9),
    "ensemble.unmapped": Case(as_ensemble, both(as_ensemble, text('value: "IN"', 'value: "IN2"')),
                              "input[0]", 4),
    "ensemble.dtype": Case(as_ensemble, both(as_ensemble, text('"IN", data_type: TYPE_FP32',
                                                               '"IN", data_type: TYPE_FP16')),
                           'ensemble_scheduling.step[0].input_map["x"]', 9),
    "ensemble.member_max_batch_size": Case(as_ensemble, both(as_ensemble, text("max_batch_size: 8",
                                                                               "max_batch_size: 16")),
                                           "max_batch_size", 3),
    "ensemble.tensor_shape": Case(as_ensemble, both(as_ensemble, text("dims: [4] }]\noutput",
                                                                      "dims: [5] }]\noutput")),
                                  'ensemble_scheduling.step[0].input_map["x"]', 9),
    "ensemble.member_change": Case(in_an_ensemble, both(in_an_ensemble, text("max_batch_size: 8",
                                                                              "max_batch_size: 4")),
                                   "max_batch_size", 3),
    "npu_ge.platform": Case(nothing, text('backend: "npu_ge"', 'platform: "graph_executor"'), "platform", 2),
    "npu_ge.deprecated_key": Case(param("device_ids", "0"), param("DEVICE_ID", "0"),
                                  'parameters["DEVICE_ID"]', 8),
    "npu_ge.device_ids_syntax": Case(param("device_ids", " 0 "), param("device_ids", "0-1"),
                                     'parameters["device_ids"]', 8),
    "npu_ge.device_ids_duplicate": Case(param("device_ids", "0"), param("device_ids", "1,1"),
                                        'parameters["device_ids"]', 8),
    "npu_ge.device_ids_unused": Case(both(text("count: 1", "count: 4"), param("device_ids", "0,1")),
                                     param("device_ids", "0,1"), 'parameters["device_ids"]', 8),
    "npu_ge.engine_value": Case(param("engine", " OM "), param("engine", "mindspore"),
                                'parameters["engine"]', 8),
    "npu_ge.host_path_value": Case(both(param("execute_timeout_ms", " 250 "), param("copy_overlap", "off")),
                                   param("execute_timeout_ms", "1.5s"),
                                   'parameters["execute_timeout_ms"]', 8),
    "npu_ge.parameter_ignored": Case(nothing, param("ge.exec.precision_mode", "force_fp16"),
                                     'parameters["ge.exec.precision_mode"]', 8),
    "npu_ge.parameter_rejected": Case(
        both(param("engine", "ge_graph"), param("session.ge.exec.x", "1"), touch("1/model.onnx")),
        both(param("engine", "ge_graph"), param("precision", "fp16"), touch("1/model.onnx")),
        'parameters["precision"]', 9),
    "npu_ge.static_model": Case(nothing, param("static_model", "true"), 'parameters["static_model"]', 8),
    "npu_ge.ge_graph_build": Case(nothing, both(append('default_model_filename: "model.onnx"'),
                                                touch("1/model.onnx")), "default_model_filename", 8),
    "npu_ge.model_filename": Case(append('default_model_filename: "model.om"'),
                                  append('default_model_filename: "../model.om"'),
                                  "default_model_filename", 8),
    "npu_ge.model_file": Case(nothing, both(remove("1/model.om"), touch("1/model.savedmodel")), "1/model.om"),
    "npu_ge.dims_dynamic": Case(nothing, text("dims: [4] }]\nout", "dims: [-1] }]\nout"), "input[0].dims", 4),
    "npu_ge.dims_gears": Case(nothing, both(text("max_batch_size: 8", "max_batch_size: 0"),
                                            text("dims: [4] }]\nout", "dims: [1, -1] }]\nout")),
                              "input[0].dims", 4),
    "npu_ge.string_tensor": Case(nothing, text("TYPE_FP32", "TYPE_STRING"), "input[0].data_type", 4),
    "npu_ge.reshape": Case(nothing, text("dims: [4] }]\nout", "dims: [4] reshape { shape: [2, 2] } }]\nout"),
                           "input[0].reshape", 4),
    "npu_ge.optional_input": Case(nothing, text("dims: [4] }]\nout", "dims: [4], optional: true }]\nout"),
                                  "input[0].optional", 4),
    "npu_ge.tensors": Case(nothing, text('output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]',
                                         'output [{ name: "y", data_type: TYPE_FP32, dims: [4] }, '
                                         '{ name: "y", data_type: TYPE_FP32, dims: [4] }]'), "output[0]", 5),
    "npu_ge.tensors_completed": Case(
        nothing, text('output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]\n', ""), "output"),
    "npu_ge.kind_gpu": Case(text("KIND_CPU", "KIND_MODEL"), text("KIND_CPU", "KIND_GPU"),
                            "instance_group[0].kind", 6),
}


def make(repo: Path, change: Change) -> Path:
    for name, config in (("m", BASE), ("step", STEP)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
        (repo / name / "1" / "model.om").write_text("om")
    change(repo / "m")
    return repo / "m"


def test_every_rule_has_a_case_and_every_case_a_rule() -> None:
    assert set(CASES) == set(rule_catalogue()) == set(RULES) | set(SCHEMA_RULES)


def test_the_base_configs_have_no_findings(tmp_path: Path) -> None:
    assert validate_model(make(tmp_path / "npu", nothing)).findings == []
    assert validate_model(make(tmp_path / "ensemble", as_ensemble)).findings == []


def test_minus_one_without_batching_is_a_gear_warning_not_an_error(tmp_path: Path) -> None:
    """npu_ge serves -1 besides the batch for .om files with dims/image size gears (max_batch_size
    0); only the .om can tell, so the validator warns instead of predicting a failed load."""
    unbatched = both(text("max_batch_size: 8", "max_batch_size: 0"),
                     text("dynamic_batching { max_queue_delay_microseconds: 2000 }\n", ""),
                     text("dims: [4] }]\nout", "dims: [1, -1] }]\nout"))
    findings = validate_model(make(tmp_path, unbatched)).findings
    assert [(f.rule, f.severity) for f in findings] == [("npu_ge.dims_gears", Severity.WARNING)]


@pytest.mark.parametrize("rule", CASES)
def test_valid_case_does_not_fire_the_rule(rule: str, tmp_path: Path) -> None:
    findings = validate_model(make(tmp_path, CASES[rule].valid)).findings
    assert [f for f in findings if f.rule == rule] == []
    if rule not in ("npu_ge.ge_graph_build", "npu_ge.parameter_rejected"):  # these valid cases need ge_graph
        assert [f for f in findings if f.severity is not Severity.INFO] == [], [str(f) for f in findings]


@pytest.mark.parametrize("rule", CASES)
def test_invalid_case_fires_the_rule_with_its_path_severity_and_line(rule: str, tmp_path: Path) -> None:
    model = make(tmp_path, CASES[rule].invalid)
    findings = validate_model(model).findings
    fired = [f for f in findings if f.rule == rule]
    assert fired, [str(f) for f in findings]
    finding = fired[0]
    assert finding.path == CASES[rule].path
    assert finding.severity.value == rule_catalogue()[rule][0]
    assert finding.line == CASES[rule].line
    assert finding.file == str(model / "config.pbtxt")
    assert finding.message and finding.fix


def test_fix_hints_name_the_exact_replacement(tmp_path: Path) -> None:
    def fix(rule: str) -> str:
        findings = validate_model(make(tmp_path / rule, CASES[rule].invalid)).findings
        return next(f.fix for f in findings if f.rule == rule)
    assert fix("npu_ge.platform") == 'replace `platform: "graph_executor"` with `backend: "npu_ge"`'
    assert fix("npu_ge.deprecated_key") == "rename the key to 'device_ids'"
    assert fix("schema.unknown_field") == "did you mean dims?"
    assert fix("schema.bad_enum") == "did you mean TYPE_FP32?"
    assert fix("ensemble.step_model") == "did you mean step?"
    assert fix("npu_ge.device_ids_unused").startswith("set instance_group count to 2")


def test_a_model_file_of_another_framework_is_named_as_the_likely_mistake(tmp_path: Path) -> None:
    findings = validate_model(make(tmp_path, CASES["npu_ge.model_file"].invalid)).findings
    (finding,) = [f for f in findings if f.rule == "npu_ge.model_file"]
    assert "model.savedmodel (a TensorFlow SavedModel)" in finding.message and "likely" in finding.message


def test_deprecated_key_next_to_its_modern_key_is_reported_as_ignored() -> None:
    findings = validate_text(BASE + 'parameters { key: "EXECUTOR_TYPE" value { string_value: "ge" } }\n'
                             'parameters { key: "engine" value { string_value: "acl_om" } }\n')
    (finding,) = [f for f in findings if f.rule == "npu_ge.deprecated_key"]
    assert "ignores it here, because 'engine' is also set" in finding.message


def test_schema_errors_carry_the_parsers_line_and_column_without_repeating_the_line() -> None:
    (finding,) = validate_text(BASE.replace("TYPE_FP32", "TYPE_FOO", 1))
    assert (finding.rule, finding.line, finding.column) == ("schema.bad_enum", 4, 32)
    assert finding.message == 'does not parse: Enum type "inference.DataType" has no value named TYPE_FOO.'
    assert str(finding) == f"config.pbtxt:4:32: error [schema.bad_enum] input[0].data_type: {finding.message}"


def test_the_sample_repository_is_clean(tmp_path: Path) -> None:
    reports = validate_path(copy_samples(tmp_path / "repo"))
    assert [r.name for r in reports] == ["digits_classifier", "digits_pipeline", "digits_postprocess",
                                         "digits_preprocess", "text_normalize"]
    assert all(r.findings == [] for r in reports), [str(f) for r in reports for f in r.findings]
    assert summarize(reports)["headline"] == "OK: 5 models, no errors or warnings"


def test_paths_a_file_a_model_a_repository_and_nothing(tmp_path: Path) -> None:
    model = make(tmp_path / "repo", nothing)
    assert [r.name for r in validate_path(model / "config.pbtxt")] == ["m"]
    assert [r.name for r in validate_path(model)] == ["m"]
    assert [r.name for r in validate_path(tmp_path / "repo")] == ["m", "step"]
    with pytest.raises(RepositoryError, match="does not exist"):
        validate_path(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RepositoryError, match="neither a model directory"):
        validate_path(tmp_path / "empty")


def test_findings_are_frozen_and_serializable() -> None:
    finding = Finding("r", Severity.WARNING, "p", "m", "f", 1, 2, "c")
    with pytest.raises(AttributeError):
        finding.line = 3  # type: ignore[misc]
    assert finding.to_dict() == {"rule": "r", "severity": "warning", "path": "p", "line": 1, "column": 2,
                                 "message": "m", "fix": "f", "file": "c"}


# -- never raises --------------------------------------------------------------------------
FRAGMENTS = [*BASE.split(), "{", "}", "[", "]", ":", ",", '"', "#", "\n", "-1", "0", "1e99", "TYPE_FOO",
             'parameters { key: "device_ids" value { string_value: "', '" } }',
             "ensemble_scheduling { step [{", 'model_name: "step"', 'input_map { key: "x" value: "IN" }',
             "version_policy { specific { versions: [",
             'platform: "ensemble"', 'platform: "graph_executor"', "count: -5", "dims: [-2, 0]", "\\", "'"]


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(FRAGMENTS), max_size=40).map(" ".join)))
def test_the_validator_never_raises_on_any_text(tmp_path: Path, source: str) -> None:
    findings = validate_text(source, tmp_path / "m")
    assert all(isinstance(f, Finding) and f.rule in rule_catalogue() for f in findings)
    assert all(f.line is None or f.line >= 1 for f in findings)


def test_an_onnx_only_version_directory_is_ge_graph_as_the_backend_picks_it(tmp_path: Path) -> None:
    # What repositories of the older GE backend hold: 1/model.onnx, no default_model_filename.
    model = make(tmp_path / "onnx", both(remove("1/model.om"), touch("1/model.onnx")))
    findings = validate_model(model).findings
    assert [f.rule for f in findings if f.severity is Severity.ERROR] == [], [str(f) for f in findings]
    (info,) = [f for f in findings if f.rule == "npu_ge.ge_graph_build"]
    assert info.severity is Severity.INFO
    assert "1/model.onnx and no model.om" in info.message and "picks engine 'ge_graph'" in info.message
    assert "model.onnx needs the ge_graph engine, which this build lacks" in info.message
    # A single ONNX file of another name is picked the same way (the older backend took any *.onnx).
    named = make(tmp_path / "named", both(remove("1/model.om"), touch("1/resnet50.onnx")))
    assert "1/resnet50.onnx and no model.om" in next(
        f.message for f in validate_model(named).findings if f.rule == "npu_ge.ge_graph_build")
    # model.om wins over model.onnx, as in the backend.
    both_files = make(tmp_path / "both", touch("1/model.onnx"))
    assert validate_model(both_files).findings == []


def test_several_onnx_files_and_no_model_om_is_the_backends_error(tmp_path: Path) -> None:
    model = make(tmp_path, both(remove("1/model.om"), touch("1/a.onnx"), touch("1/b.onnx")))
    (finding,) = [f for f in validate_model(model).findings if f.rule == "npu_ge.model_file"]
    assert finding.severity is Severity.ERROR
    assert "but 2 ONNX files (a.onnx, b.onnx)" in finding.message
    assert finding.fix == 'set default_model_filename: "a.onnx" (or the one to serve)'


def test_older_backend_parameters_are_ignored_with_a_warning_by_either_engine(tmp_path: Path) -> None:
    # The older GE backend's own example configs carry static_model / profiling on ONNX models.
    model = make(tmp_path, both(param("engine", "ge_graph"), param("profiling", "dynamic"),
                                param("static_model", "1"), touch("1/model.onnx")))
    findings = validate_model(model).findings
    assert [f.rule for f in findings if f.severity is Severity.ERROR] == [], [str(f) for f in findings]
    ignored = sorted(f.path for f in findings if f.rule == "npu_ge.parameter_ignored")
    assert ignored == ['parameters["profiling"]', 'parameters["static_model"]']


def test_an_onnx_model_without_tensors_is_completed_at_load_not_an_error(tmp_path: Path) -> None:
    bare = both(remove("1/model.om"), touch("1/model.onnx"),
                text('output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]\n', ""))
    findings = validate_model(make(tmp_path, bare)).findings
    assert [f.rule for f in findings if f.severity is Severity.ERROR] == [], [str(f) for f in findings]
    (completed,) = [f for f in findings if f.rule == "npu_ge.tensors_completed"]
    assert "completes them from model.onnx (the ONNX graph's inputs and outputs)" in completed.message
