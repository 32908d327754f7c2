"""The model templates: each rendered config passes the validator with its model file, names
the file it needs without it, and refuses knobs it cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.errors import TemplateError
from geadmin.repository import templates
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.templates import Params, TensorSpec
from geadmin.repository.validate import Severity, validate_model

EXPECTED_FILE = {"npu_ge_om": "1/model.om", "npu_ge_onnx": "1/model.onnx", "python": "1/model.py"}
KNOBS = [
    Params(),
    Params(max_batch_size=0),
    Params(max_batch_size=4, device_ids=(0, 1, 2),
           inputs=(TensorSpec("a", "FP16", (3, 8)), TensorSpec("b", "INT64", (1,))),
           outputs=(TensorSpec("c", "FP16", (3, 8)), TensorSpec("d", "INT64", (1,)))),
]


def write(directory: Path, template_id: str, params: Params, with_file: bool) -> Path:
    (directory / "1").mkdir(parents=True)
    (directory / "config.pbtxt").write_text(templates.render_config(template_id, directory.name, params))
    files = templates.provided_files(template_id)
    if with_file:
        files.setdefault(templates.expected_files(template_id)[0], b"model bytes")
    for relative, data in files.items():
        (directory / relative).write_bytes(data)
    return directory


@pytest.mark.parametrize("params", KNOBS, ids=["defaults", "unbatched", "two_tensors_three_npus"])
@pytest.mark.parametrize("template_id", list(templates.TEMPLATES))
def test_each_template_validates_without_errors_once_its_model_file_is_present(
    tmp_path: Path, template_id: str, params: Params
) -> None:
    report = validate_model(write(tmp_path / "my_model", template_id, params, with_file=True))
    assert [f for f in report.findings if f.severity is Severity.ERROR] == []
    assert [f for f in report.findings if f.severity is Severity.WARNING] == []  # none either
    assert templates.expected_files(template_id) == (EXPECTED_FILE[template_id],)


@pytest.mark.parametrize("template_id", ["npu_ge_om", "npu_ge_onnx"])
def test_npu_ge_templates_without_their_file_give_the_model_file_finding(tmp_path: Path,
                                                                         template_id: str) -> None:
    report = validate_model(write(tmp_path / "m", template_id, Params(), with_file=False))
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    assert [(f.rule, f.path) for f in errors] == [("npu_ge.model_file", EXPECTED_FILE[template_id])]
    assert "no model" in errors[0].message and "npu_ge backend" in errors[0].message


def test_the_python_template_provides_its_model_py_and_it_is_the_identity(tmp_path: Path) -> None:
    assert set(templates.provided_files("python")) == {"1/model.py"}
    assert templates.provided_files("npu_ge_om") == {} == templates.provided_files("npu_ge_onnx")
    report = validate_model(write(tmp_path / "m", "python", Params(), with_file=False))
    assert [f for f in report.findings if f.severity is Severity.ERROR] == []
    source = templates.provided_files("python")["1/model.py"].decode()
    compile(source, "model.py", "exec")  # valid Python
    assert "class TritonPythonModel" in source and "as_numpy()" in source


def test_rendered_configs_carry_the_knobs_and_comments() -> None:
    text = templates.render_config("npu_ge_om", "resnet", Params(
        max_batch_size=16, device_ids=(2, 3), inputs=(TensorSpec("in:0", "UINT8", (224, 224, 3)),)))
    config = parse_pbtxt(text)
    assert (config.name, config.backend, config.max_batch_size) == ("resnet", "npu_ge", 16)
    assert config.parameters["device_ids"].string_value == "2,3"
    assert config.parameters["engine"].string_value == "acl_om"
    assert config.instance_group[0].count == 2  # one instance per NPU
    assert (config.input[0].name, list(config.input[0].dims)) == ("in:0", [224, 224, 3])
    assert config.dynamic_batching.max_queue_delay_microseconds == 1000
    assert "# " in text and "device_ids[i % n]" in text and "KIND_GPU" in text
    onnx = parse_pbtxt(templates.render_config("npu_ge_onnx", "r", Params()))
    assert onnx.parameters["engine"].string_value == "ge_graph"
    unbatched = templates.render_config("python", "p", Params(max_batch_size=0))
    assert "max_batch_size: 0" in unbatched and "dynamic_batching" not in unbatched


def test_names_with_quotes_are_escaped_not_injected() -> None:
    text = templates.render_config("python", "p", Params(
        inputs=(TensorSpec('x" } ] output [ {', "FP32", (1,)),), outputs=(TensorSpec("y", "FP32", (1,)),)))
    config = parse_pbtxt(text)
    assert [t.name for t in config.input] == ['x" } ] output [ {'] and len(config.output) == 1


@pytest.mark.parametrize("text, tensor", [
    ("x:FP32:3,224,224", TensorSpec("x", "FP32", (3, 224, 224))),
    ("input:0:type_fp16:[1, 4]", TensorSpec("input:0", "FP16", (1, 4))),
    (" ids : INT64 : 1 ", TensorSpec("ids", "INT64", (1,))),
])
def test_tensor_specs_parse(text: str, tensor: TensorSpec) -> None:
    assert templates.parse_tensor(text) == tensor
    assert templates.parse_tensor(tensor.spec()) == tensor


@pytest.mark.parametrize("text, says", [
    ("x", "expected NAME:DTYPE:DIMS"),
    ("x:FP33:4", "data type 'FP33' is not one of"),
    ("x:FP32:4,a", "are not integers"),
    ("x:FP32:", "no dims"),
])
def test_bad_tensor_specs_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(TemplateError, match=says):
        templates.parse_tensor(text)


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "a/b", "../x", "a\\b", "-x", "a b", "x" * 129,
                                  "é"])
def test_bad_model_names_are_refused(name: str) -> None:
    with pytest.raises(TemplateError, match="refused model name"):
        templates.render_config("python", name)


@pytest.mark.parametrize("template_id, params, says", [
    ("python", Params(max_batch_size=-1), "max_batch_size -1"),
    ("python", Params(outputs=()), "at least one input and one output"),
    ("npu_ge_om", Params(device_ids=()), "at least one NPU id"),
    ("nope", Params(), "no template 'nope'"),
])
def test_bad_knobs_are_refused(template_id: str, params: Params, says: str) -> None:
    with pytest.raises(TemplateError, match=says):
        templates.render_config(template_id, "m", params)


def test_the_identity_model_needs_outputs_like_its_inputs() -> None:
    mismatch = Params(outputs=(TensorSpec("OUTPUT0", "INT32", (4,)),))
    assert "identity" in templates.identity_problem("python", mismatch)
    assert templates.identity_problem("python", Params()) == ""
    assert templates.identity_problem("npu_ge_om", mismatch) == ""


def test_device_ids_are_read_as_the_backend_reads_them() -> None:
    assert templates.parse_device_ids("0, 1,3") == (0, 1, 3)
    with pytest.raises(TemplateError, match="expected NPU ids"):
        templates.parse_device_ids("0;1")


def test_the_model_name_refusal_keeps_every_character_when_a_page_renders_it_as_markdown() -> None:
    """The New model page shows the refusal as Markdown: quoted '_' ... '_' became italics there
    ("letters, digits, '', '-'"), so the rule is written in words."""
    import markdown  # Python-Markdown: mkdocs' renderer, in the dev extra

    with pytest.raises(TemplateError) as refused:
        templates.check_model_name("a b")
    rendered = markdown.markdown(str(refused.value))
    assert "<em>" not in rendered and "<strong>" not in rendered, rendered
    assert "underscores" in str(refused.value) and "hyphens" in str(refused.value)
