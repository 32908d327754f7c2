"""The validator on an ensemble's steps: a step model name that is no model name (a NUL, a
path leaving the repository) is an error and never a path geadmin opens; a step that asks for
a version its model does not have is an error naming the versions it has (Triton refuses the
ensemble: "depends on 'step' whose required version 7 is not loaded")."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.repository.validate import Finding, Severity, validate_text
from tests.support.configs import ENSEMBLE, STEP


def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name, config in (("m", ENSEMBLE), ("step", STEP)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    (repo / "step" / "1" / "model.om").write_text("om")
    return repo


def errors(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.severity is Severity.ERROR]


def test_a_step_model_name_with_a_nul_is_a_validation_error_not_a_crash(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    text = ENSEMBLE.replace('model_name: "step"', 'model_name: "st\\000ep"')
    findings = validate_text(text, repo / "m")
    (finding,) = errors(findings, "ensemble.step_model")
    assert finding.path == "ensemble_scheduling.step[0].model_name"
    assert "is not a model name" in finding.message


@pytest.mark.parametrize("name", ["../outside", "../../outside", ".", "..", "a/b"])
def test_a_step_model_name_that_leaves_the_repository_is_an_error_and_is_never_read(
        tmp_path: Path, name: str) -> None:
    repo = repository(tmp_path)
    outside = tmp_path / "outside"  # a config that would make step_tensor speak, were it read
    outside.mkdir()
    (outside / "config.pbtxt").write_text(STEP.replace('name: "x"', 'name: "secret_tensor"'))
    findings = validate_text(ENSEMBLE.replace('"step"', f'"{name}"'), repo / "m")
    (finding,) = errors(findings, "ensemble.step_model")
    assert "is not a model name" in finding.message, finding.message
    assert not any("secret_tensor" in f.message for f in findings), [str(f) for f in findings]


def test_a_step_version_the_step_model_does_not_have_is_an_error_naming_the_versions_it_has(
        tmp_path: Path) -> None:
    repo = repository(tmp_path)
    findings = validate_text(ENSEMBLE.replace("model_version: -1", "model_version: 7"), repo / "m")
    (finding,) = errors(findings, "ensemble.step_model")
    assert finding.path == "ensemble_scheduling.step[0].model_version"
    assert "version 7" in finding.message and "[1]" in finding.message, finding.message
    assert finding.line == 8


@pytest.mark.parametrize("version", ["-1", "1"])
def test_a_step_version_the_step_model_has_is_not_flagged(tmp_path: Path, version: str) -> None:
    repo = repository(tmp_path)
    findings = validate_text(ENSEMBLE.replace("model_version: -1", f"model_version: {version}"), repo / "m")
    assert errors(findings, "ensemble.step_model") == []
