"""Templates for a new model directory: the config text (with comments that say what each
part means), the version directory, and the model file each one expects.

| template      | backend  | engine   | model file     | provided by the template          |
|---------------|----------|----------|----------------|-----------------------------------|
| `npu_ge_om`   | npu_ge   | acl_om   | `1/model.om`   | nothing: upload the ATC output    |
| `npu_ge_onnx` | npu_ge   | ge_graph | `1/model.onnx` | nothing: upload the ONNX graph    |
| `python`      | python   |          | `1/model.py`   | an identity `model.py` (CPU)      |

`Params` holds the knobs (max_batch_size, inputs, outputs, device_ids); `render_config`
turns a template and its params into config.pbtxt text, checked by the real protobuf
parser before it is returned. Every rendered config passes `validate_model` without errors
once its model file is present (tests/unit/test_templates.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf import text_encoding
from tritonclient.grpc import model_config_pb2

from geadmin.errors import TemplateError
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository.modelconfig import parse_pbtxt

VERSION = "1"
MAX_NAME = 128
MODEL_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}")
MAX_TENSORS = 64
MAX_BATCH_SIZE = 1 << 20

@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # Triton's name without TYPE_: FP32, INT64, UINT8, STRING, ...
    dims: tuple[int, ...]

    @property
    def data_type(self) -> str:
        return f"TYPE_{self.dtype}"

    def spec(self) -> str:
        """The `NAME:DTYPE:DIMS` form `parse_tensor` reads."""
        return f"{self.name}:{self.dtype}:{','.join(map(str, self.dims))}"


@dataclass(frozen=True)
class Params:
    """The knobs of a template; `None` means the template's default."""

    max_batch_size: int = 8
    inputs: tuple[TensorSpec, ...] | None = None
    outputs: tuple[TensorSpec, ...] | None = None
    device_ids: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Template:
    id: str
    title: str
    description: str
    backend: str
    model_file: str  # relative to the model directory, e.g. "1/model.om"
    model_file_help: str  # what to upload there
    inputs: tuple[TensorSpec, ...]  # defaults
    outputs: tuple[TensorSpec, ...]
    engine: str = ""  # npu_ge engine ("" for other backends)
    provided: dict[str, bytes] = field(default_factory=dict)  # files the template writes itself

    @property
    def uses_devices(self) -> bool:
        return self.backend == npu_ge.BACKEND

    @property
    def version_dir(self) -> str:
        return VERSION


class TemplateId(str, enum.Enum):
    NPU_GE_OM = "npu_ge_om"
    NPU_GE_ONNX = "npu_ge_onnx"
    PYTHON = "python"


IDENTITY_MODEL_PY = b'''"""Identity model (geadmin's python template): output i returns input i unchanged.

Replace this file with your own model. Triton's python backend calls `execute` with a
batch of requests and expects one response per request, in order.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.pairs = [(i["name"], o["name"]) for i, o in zip(config["input"], config["output"])]

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = [pb_utils.Tensor(out, pb_utils.get_input_tensor_by_name(request, inp).as_numpy())
                       for inp, out in self.pairs]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''

TEMPLATES: dict[str, Template] = {t.id: t for t in (
    Template(
        TemplateId.NPU_GE_OM.value, "npu_ge — offline model (.om)",
        "An ATC-compiled .om run on Ascend NPUs through ACL (npu_ge engine acl_om).",
        npu_ge.BACKEND, f"{VERSION}/model.om",
        "the .om file ATC wrote (atc --framework=5 --output=model ...)",
        (TensorSpec("x", "FP32", (3, 224, 224)),), (TensorSpec("y", "FP32", (1000,)),), engine=npu_ge.ACL_OM),
    Template(
        TemplateId.NPU_GE_ONNX.value, "npu_ge — ONNX compiled by GE at load",
        "An ONNX graph compiled online by GE (npu_ge engine ge_graph; needs npu_ge built with CANN).",
        npu_ge.BACKEND, f"{VERSION}/model.onnx", "the ONNX file",
        (TensorSpec("x", "FP32", (3, 224, 224)),), (TensorSpec("y", "FP32", (1000,)),),
        engine=npu_ge.GE_GRAPH),
    Template(
        TemplateId.PYTHON.value, "python — identity model (CPU)",
        "A Python-backend model; the template's model.py returns each input as the output at the same "
        "position, so it loads and answers on any Triton.",
        "python", f"{VERSION}/model.py", "optional, the template writes an identity model.py",
        (TensorSpec("INPUT0", "FP32", (4,)),), (TensorSpec("OUTPUT0", "FP32", (4,)),),
        provided={f"{VERSION}/model.py": IDENTITY_MODEL_PY}),
)}


def template(template_id: str) -> Template:
    try:
        return TEMPLATES[template_id]
    except KeyError as exc:
        raise TemplateError(f"no template {template_id!r}: use one of {', '.join(TEMPLATES)}") from exc


# -- parsing the knobs (CLI flags and form fields) -----------------------------------------
DTYPES = tuple(model_config_pb2.DataType.Name(value).removeprefix("TYPE_")
               for value in model_config_pb2.DataType.values() if value != model_config_pb2.TYPE_INVALID)


def parse_tensor(text: str) -> TensorSpec:
    """`NAME:DTYPE:DIMS`, e.g. `x:FP32:3,224,224` (dims without the batch dimension)."""
    name, sep, rest = text.strip().rpartition(":")
    name, sep2, dtype = name.rpartition(":")
    dims_text = rest
    if not (sep and sep2):
        raise TemplateError(f"tensor {text!r}: expected NAME:DTYPE:DIMS, e.g. x:FP32:3,224,224")
    return TensorSpec(name.strip(), _dtype(dtype, text), parse_dims(dims_text, text))


def parse_tensors(lines: str | Sequence[str]) -> tuple[TensorSpec, ...]:
    """One tensor per line (or per item); blank lines are skipped."""
    items = lines.splitlines() if isinstance(lines, str) else list(lines)
    return tuple(parse_tensor(item) for item in items if item.strip())


def _dtype(text: str, where: str) -> str:
    dtype = text.strip().upper().removeprefix("TYPE_")
    if dtype not in DTYPES:
        raise TemplateError(f"tensor {where!r}: data type {text.strip()!r} is not one of {', '.join(DTYPES)}")
    return dtype


def parse_dims(text: str, where: str = "") -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("[", "").replace("]", "").split(",") if d.strip())
    except ValueError as exc:
        raise TemplateError(f"tensor {where or text!r}: dims {text!r} are not integers separated by "
                            "commas, e.g. 3,224,224") from exc
    if not dims:
        raise TemplateError(f"tensor {where or text!r}: no dims; give at least one, e.g. 4")
    return dims


def parse_device_ids(text: str) -> tuple[int, ...]:
    """`0,1` -> (0, 1), read the way the npu_ge backend reads parameter device_ids."""
    ids = npu_ge.parse_device_ids(text)
    if ids is None:
        raise TemplateError(f"device ids {text!r}: expected NPU ids separated by commas, e.g. 0,1")
    return ids


# -- rendering ---------------------------------------------------------------------------
def _quote(text: str) -> str:
    return '"' + text_encoding.CEscape(text, as_utf8=True) + '"'


def _tensor_lines(tensors: Sequence[TensorSpec]) -> str:
    return ",\n".join(f"  {{ name: {_quote(t.name)}, data_type: {t.data_type}, "
                      f"dims: [ {', '.join(map(str, t.dims))} ] }}" for t in tensors)


def _check(tpl: Template, name: str, params: Params) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    inputs = tpl.inputs if params.inputs is None else params.inputs
    outputs = tpl.outputs if params.outputs is None else params.outputs
    if not 0 <= params.max_batch_size <= MAX_BATCH_SIZE:
        raise TemplateError(f"max_batch_size {params.max_batch_size}: use 0 (no batching) up to "
                            f"{MAX_BATCH_SIZE}")
    if not inputs or not outputs or len(inputs) + len(outputs) > MAX_TENSORS:
        raise TemplateError(f"{name!r} needs at least one input and one output (and at most {MAX_TENSORS} "
                            "tensors in all)")
    if tpl.uses_devices and not params.device_ids:
        raise TemplateError("give at least one NPU id in device_ids, e.g. 0")
    for tensor in (*inputs, *outputs):
        if not tensor.name.strip():
            raise TemplateError("every input and output needs a name")
        if tensor.dtype not in DTYPES:
            raise TemplateError(f"tensor {tensor.name!r}: data type {tensor.dtype!r} is not one of "
                                f"{', '.join(DTYPES)}")
    return inputs, outputs


def identity_problem(template_id: str, params: Params) -> str:
    """Why the python template's identity model.py cannot serve these tensors ("" when it can);
    it does not matter when the user uploads a model.py of their own."""
    tpl = template(template_id)
    if f"{VERSION}/model.py" not in tpl.provided:
        return ""
    inputs = tpl.inputs if params.inputs is None else params.inputs
    outputs = tpl.outputs if params.outputs is None else params.outputs
    if [(t.dtype, t.dims) for t in inputs] == [(t.dtype, t.dims) for t in outputs]:
        return ""
    return ("the python template's model.py is an identity: give as many outputs as inputs, each with the "
            "data type and dims of its input — or upload your own model.py")


def check_model_name(name: str) -> None:
    """A name for a new model: one directory name Triton accepts, that no hidden or staging
    directory can have — letters, digits, '_', '-', '.', not starting with '.' or '-'."""
    if not MODEL_NAME.fullmatch(name):
        raise TemplateError(
            f"refused model name {name!r}: use 1 to {MAX_NAME} letters, digits, underscores, hyphens and "
            "dots, starting with a letter, a digit or an underscore (no slash, no '..', no leading dot)")
    # In words, not quoted symbols: pages show this as Markdown, where '_' ... '_' turns italic.


def render_config(template_id: str, name: str, params: Params | None = None) -> str:
    """config.pbtxt text for `name` from a template (`TemplateError` on bad knobs)."""
    tpl, params = template(template_id), params or Params()
    check_model_name(name)
    inputs, outputs = _check(tpl, name, params)
    mbs = params.max_batch_size
    lines = [f"# {name} — {tpl.title} (geadmin template {tpl.id}).",
             f"# Model file: {tpl.model_file}: {tpl.model_file_help}.",
             *_HEADERS[tpl.id],
             f"name: {_quote(name)}",
             f"backend: {_quote(tpl.backend)}",
             "# The largest batch Triton sends (0: no batching); dims below exclude the batch dimension.",
             *(("# For an .om: at most its largest gear (atc --dynamic_batch_size) or its static batch.",)
               if tpl.engine == npu_ge.ACL_OM else ()),
             f"max_batch_size: {mbs}",
             "input [", _tensor_lines(inputs), "]",
             "output [", _tensor_lines(outputs), "]"]
    lines += _instances(tpl, params)
    if mbs > 0:
        lines += ["# Triton's dynamic batcher groups requests into batches of up to max_batch_size.",
                  "dynamic_batching { max_queue_delay_microseconds: 1000 }"]
    if tpl.uses_devices:
        lines += ["# acl_om runs a .om through ACL; ge_graph compiles an ONNX graph with GE.",
                  f"parameters {{ key: \"engine\" value {{ string_value: {_quote(tpl.engine)} }} }}",
                  *_ENGINE_OPTIONS[tpl.engine]]
    text = "\n".join(lines) + "\n"
    parse_pbtxt(text, f"the {tpl.id} template's config")  # a bug here must not reach the disk
    return text


def _instances(tpl: Template, params: Params) -> list[str]:
    if not tpl.uses_devices:
        return ["# One instance on the CPU; raise count for more parallel executions.",
                "instance_group [ { count: 1, kind: KIND_CPU } ]"]
    ids = ",".join(map(str, params.device_ids))
    return ["# One instance per NPU: instance i runs on device_ids[i % n]. KIND_CPU (or KIND_MODEL),",
            "# never KIND_GPU: the NPUs come from parameter device_ids, not from Triton's GPU list.",
            f"instance_group [ {{ count: {len(params.device_ids)}, kind: KIND_CPU }} ]",
            f"parameters {{ key: \"device_ids\" value {{ string_value: {_quote(ids)} }} }}"]


_HEADERS: dict[str, tuple[str, ...]] = {
    TemplateId.NPU_GE_OM.value: (
        "# At load, npu_ge checks every input and output below against what model.om declares",
        "# (names, data types, dims, batch gears) and names each mismatch (\"expected X, got Y\").",
        "# Only the batch dimension may be dynamic; .om models have no TYPE_STRING tensors."),
    TemplateId.NPU_GE_ONNX.value: (
        "# GE compiles the graph when the model loads, for a fixed batch of max_batch_size rows.",
        "# This needs npu_ge built against the CANN toolkit (NPU_GE_WITH_GE_GRAPH=ON); other builds",
        "# serve .om only: convert with ATC to model.om and use the npu_ge_om template instead."),
    TemplateId.PYTHON.value: (
        "# Runs in Triton's python backend on the CPU. The template's 1/model.py is an identity",
        "# (output i = input i, so each output needs its input's data type and dims)."),
}
_ENGINE_OPTIONS: dict[str, tuple[str, ...]] = {
    npu_ge.ACL_OM: (),
    npu_ge.GE_GRAPH: (
        "# GE options for this model: ge.* (global), session.<key>, graph.<key>. Any other key fails",
        "# the load with engine ge_graph. For example:",
        "# parameters { key: \"ge.exec.precision_mode\" value { string_value: \"allow_fp32_to_fp16\" } }"),
    "": (),
}


def expected_files(template_id: str) -> tuple[str, ...]:
    """Model-directory paths the template's config needs besides config.pbtxt."""
    return (template(template_id).model_file,)


def provided_files(template_id: str) -> dict[str, bytes]:
    """Files the template writes itself (an upload of the same path replaces them)."""
    return dict(template(template_id).provided)
