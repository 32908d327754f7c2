"""Rules across models, on a copy of the sample repository: an edited member is checked against
the ensembles on disk that run it, in Triton's own words (the messages below are what Triton
2.51 logs for the same change, see tests/integration/test_consequences.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.repository import cross_model
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.validate import Severity, validate_path, validate_text
from tests.support.samples import copy_samples


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "repo")


def edited(repo: Path, model: str, old: str, new: str) -> str:
    text = (repo / model / "config.pbtxt").read_text()
    assert old in text
    return text.replace(old, new, 1)


def member_errors(repo: Path, model: str, text: str) -> list[str]:
    return [f.message for f in validate_text(text, repo / model)
            if f.rule == "ensemble.member_change" and f.severity is Severity.ERROR]


def test_the_sample_repository_has_no_cross_model_findings(repo: Path) -> None:
    rules = {"ensemble.member_change", "ensemble.member_max_batch_size", "ensemble.tensor_shape"}
    assert [str(f) for r in validate_path(repo) for f in r.findings if f.rule in rules] == []


def test_a_member_max_batch_size_below_the_ensembles_names_the_ensemble_in_tritons_words(repo: Path) -> None:
    text = edited(repo, "digits_classifier", "max_batch_size: 32", "max_batch_size: 16")
    text = text.replace("[ 8, 16 ]", "[ 8 ]")
    findings = [f for f in validate_text(text, repo / "digits_classifier")
                if f.rule == "ensemble.member_change"]
    assert len(findings) == 1
    assert findings[0].message == (
        "ensemble digits_pipeline allows maximum batch size 32, but it contains model digits_classifier "
        "which only allows maximum batch size to be 16: Triton would unload ensemble digits_pipeline")
    assert findings[0].path == "max_batch_size" and findings[0].line == 4
    assert "32" in findings[0].fix


def test_no_batching_member_in_a_batching_ensemble_is_allowed_when_shapes_agree(repo: Path) -> None:
    """Triton skips the batch-size check for max_batch_size 0 and compares the full shapes."""
    text = edited(repo, "digits_classifier", "max_batch_size: 32", "max_batch_size: 0")
    text = text.replace("dims: [ 64 ]", "dims: [ -1, 64 ]").replace("dims: [ 10 ]", "dims: [ -1, 10 ]")
    text = text.replace("dynamic_batching {\n  preferred_batch_size: [ 8, 16 ]\n  "
                        "max_queue_delay_microseconds: 1000\n}\n", "")
    assert member_errors(repo, "digits_classifier", text) == []


def test_renamed_output_type_and_shape_are_each_named(repo: Path) -> None:
    renamed = edited(repo, "digits_classifier", 'name: "probabilities"', 'name: "probs"')
    assert member_errors(repo, "digits_classifier", renamed) == [
        "in ensemble digits_pipeline, ensemble tensor probabilities is mapped from non-existing output "
        "probabilities in model digits_classifier (its outputs: probs): Triton would unload ensemble "
        "digits_pipeline"]
    (fix,) = [f.fix for f in validate_text(renamed, repo / "digits_classifier")
              if f.rule == "ensemble.member_change"]
    assert fix == ("keep the output 'probabilities' that ensemble digits_pipeline maps, or change its "
                   "output_map in digits_pipeline to the new name as well")  # the member's side
    retyped = edited(repo, "digits_classifier", "TYPE_FP32 dims: [ 10 ]", "TYPE_FP16 dims: [ 10 ]")
    [typed] = member_errors(repo, "digits_classifier", retyped)
    assert ("inconsistent data type: TYPE_FP16 is inferred from model digits_classifier while TYPE_FP32"
            in typed)
    reshaped = edited(repo, "digits_classifier", "dims: [ 64 ]", "dims: [ 32 ]")
    [shaped] = member_errors(repo, "digits_classifier", reshaped)
    assert "inconsistent shape: [-1, 64] is inferred from model digits_preprocess while [-1, 32]" in shaped
    assert [f.path for f in validate_text(reshaped, repo / "digits_classifier")
            if f.rule == "ensemble.member_change"] == ["input[0].dims"]


def test_a_change_that_keeps_the_contract_has_no_member_findings(repo: Path) -> None:
    text = edited(repo, "digits_classifier", "max_batch_size: 32", "max_batch_size: 64")
    assert member_errors(repo, "digits_classifier", text) == []


def test_nested_ensembles_are_named_as_going_down_with_the_inner_one(repo: Path) -> None:
    outer = (repo / "digits_pipeline" / "config.pbtxt").read_text().replace("digits_pipeline", "outer")
    outer = outer.split("ensemble_scheduling")[0] + (
        'ensemble_scheduling { step [ { model_name: "digits_pipeline" model_version: -1 '
        'input_map { key: "IMAGE" value: "IMAGE" } output_map [ { key: "LABEL" value: "LABEL" }, '
        '{ key: "SCORE" value: "SCORE" }, { key: "LABEL_NAME" value: "LABEL_NAME" } ] } ] }\n')
    (repo / "outer" / "1").mkdir(parents=True)
    (repo / "outer" / "config.pbtxt").write_text(outer)
    configs = cross_model.read_configs(repo)
    assert cross_model.users_of("digits_classifier", configs) == {
        "digits_pipeline": ("digits_pipeline", "digits_classifier"),
        "outer": ("outer", "digits_pipeline", "digits_classifier")}
    text = edited(repo, "digits_classifier", "max_batch_size: 32", "max_batch_size: 16").replace("8, 16", "8")
    [message] = member_errors(repo, "digits_classifier", text)
    assert message.endswith("Triton would unload ensemble digits_pipeline (and with it outer, which runs it)")


def test_ensemble_file_with_max_batch_size_above_a_member_is_an_error(repo: Path) -> None:
    text = edited(repo, "digits_pipeline", "max_batch_size: 32", "max_batch_size: 64")
    findings = [f for f in validate_text(text, repo / "digits_pipeline")
                if f.rule == "ensemble.member_max_batch_size"]
    assert {f.message.split(":")[0] for f in findings} == {
        f"ensemble digits_pipeline allows maximum batch size 64, but it contains model {m} which only "
        "allows maximum batch size to be 32"
        for m in ("digits_preprocess", "digits_classifier", "digits_postprocess")}


def test_a_backend_the_server_lacks_is_an_error_only_when_the_backends_are_known(repo: Path) -> None:
    text = edited(repo, "text_normalize", 'backend: "python"', 'backend: "pytorch"')
    rule = cross_model.BACKEND_RULE
    assert [f for f in validate_text(text, repo / "text_normalize") if f.rule == rule] == []
    backends = frozenset({"python", "npu_ge"})
    [finding] = [f for f in validate_text(text, repo / "text_normalize", backends=backends) if f.rule == rule]
    assert finding.severity is Severity.ERROR and finding.path == "backend" and finding.line == 3
    assert "'pytorch' is not installed in this server (it has: npu_ge, python)" in finding.message


def test_installed_backends_reads_a_backend_directory(tmp_path: Path) -> None:
    for name in ("python", "npu_ge"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"libtriton_{name}.so").write_text("")
    (tmp_path / "empty").mkdir()
    assert cross_model.installed_backends(tmp_path) == frozenset({"python", "npu_ge"})
    assert cross_model.installed_backends(tmp_path / "missing") == frozenset()


def test_check_ensemble_reports_every_mismatch_with_both_paths(repo: Path) -> None:
    ensemble = parse_pbtxt((repo / "digits_pipeline" / "config.pbtxt").read_text())
    members = dict(cross_model.read_configs(repo))
    members["digits_postprocess"] = parse_pbtxt(edited(repo, "digits_postprocess", "TYPE_FP32 dims: [ 10 ]",
                                                       "TYPE_FP64 dims: [ 10 ]"))
    [mismatch] = cross_model.check_ensemble(ensemble, members)
    assert (mismatch.member, mismatch.other, mismatch.kind) == ("digits_postprocess", "digits_classifier",
                                                                cross_model.Kind.DATA_TYPE)
    assert mismatch.path_in("digits_postprocess") == "input[0].data_type"
    assert mismatch.path_in("digits_classifier") == "output[0].data_type"


def test_the_refusal_of_a_member_change_says_the_ensemble_would_go_down_not_the_member(repo: Path) -> None:
    """Issue 32: 'the new config of digits_classifier would not load' — it would; its ensemble would not."""
    from geadmin.errors import ConfigInvalidError
    from geadmin.repository.validate import refuse_invalid

    member = repo / "digits_classifier"
    text = edited(repo, "digits_classifier", "max_batch_size: 32", "max_batch_size: 16")
    text = text.replace("[ 8, 16 ]", "[ 8 ]")
    with pytest.raises(ConfigInvalidError) as refused:
        refuse_invalid("digits_classifier", text, member)
    assert str(refused.value).startswith("the new config of 'digits_classifier' would take down an "
                                         "ensemble that runs it: ensemble digits_pipeline allows maximum")
    with pytest.raises(ConfigInvalidError) as broken:
        refuse_invalid("digits_classifier", text.replace("TYPE_FP32", "TYPE_FOO", 1), member)
    assert str(broken.value).startswith("the new config of 'digits_classifier' would not load: ")
