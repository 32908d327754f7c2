"""The config validator and the real npu_ge backend agree: every rule's invalid case is
loaded into the real tritonserver with npu_ge and the ACL runtime test double. A rule the
validator calls an error must fail the load; a warning must load (so the validator never
blocks a config the server takes). Triton's own rules that can be shown with an npu_ge
model are checked the same way.

Run with `-s` to see each case's load result and the server's reason, verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin.repository import npu_ge_checks
from geadmin.repository.validate import RULES, Severity, validate_model
from tests.support.npu_ge import SharedNpuServer, affine_model, double_model, load, model_ready

pytestmark = pytest.mark.integration


def edit(old: str, new: str) -> Callable[[Path], None]:
    """A case made from the valid baseline by one text replacement in its config.pbtxt."""
    def apply(model_dir: Path) -> None:
        config = model_dir / "config.pbtxt"
        text = config.read_text()
        assert old in text, (old, text)
        config.write_text(text.replace(old, new, 1))
    return apply


def add(extra: str) -> Callable[[Path], None]:
    return lambda model_dir: (model_dir / "config.pbtxt").write_text(
        (model_dir / "config.pbtxt").read_text() + extra + "\n")


def param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}'


def _om_to(name: str) -> Callable[[Path], None]:
    return lambda model_dir: (model_dir / "1" / "model.om").rename(model_dir / "1" / name)


def _two_onnx_files(model_dir: Path) -> None:
    (model_dir / "1" / "model.om").unlink()
    for name in ("a.onnx", "b.onnx"):
        (model_dir / "1" / name).write_text("onnx bytes\n")


def _dims_gears(model_dir: Path) -> None:
    """A sequence model compiled with dims gears, its length declared -1 without batching."""
    om = double_model([("x", "FP32", "1,-1")], [("y", "FP32", "1,-1", "from x scale 2 offset 1")],
                      extra=["dynamic_dims 8;16"])
    (model_dir / "1" / "model.om").write_text(om)
    config = model_dir / "config.pbtxt"
    text = config.read_text().replace("max_batch_size: 8", "max_batch_size: 0")
    text = re.sub(r"dynamic_batching \{[^}]*\}\n?", "", text)
    config.write_text(text.replace("dims: [4]", "dims: [1, -1]"))


def _no_batch(model_dir: Path) -> None:
    om = double_model([("x", "FP32", "4")], [("y", "FP32", "4", "from x scale 2 offset 1")])
    (model_dir / "1" / "model.om").write_text(om)
    edit("max_batch_size: 8", "max_batch_size: 0")(model_dir)


@dataclass(frozen=True)
class Case:
    rule: str
    change: Callable[[Path], None]
    instances: int = 1


CASES: dict[str, Case] = {
    # npu_ge errors: the backend (or Triton, for the config it is given) refuses them.
    "platform": Case("npu_ge.platform", edit('backend: "npu_ge"', 'platform: "graph_executor"')),
    "device_ids_syntax": Case("npu_ge.device_ids_syntax", add(param("device_ids", "0;1"))),
    "device_ids_empty": Case("npu_ge.device_ids_syntax", add(param("device_ids", "0,"))),
    "legacy_device_id_syntax": Case("npu_ge.device_ids_syntax", add(param("DEVICE_ID", "npu0"))),
    "engine_value": Case("npu_ge.engine_value", add(param("engine", "tensorrt"))),
    "timeout_value": Case("npu_ge.host_path_value", add(param("execute_timeout_ms", "0"))),
    "overlap_value": Case("npu_ge.host_path_value", add(param("copy_overlap", "maybe"))),
    "model_filename": Case("npu_ge.model_filename", add('default_model_filename: "sub/model.om"')),
    "model_file": Case("npu_ge.model_file", _om_to("model.graphdef")),
    "model_file_two_onnx": Case("npu_ge.model_file", _two_onnx_files),
    "dims_dynamic": Case("npu_ge.dims_dynamic", edit("dims: [4] }]\noutput", "dims: [-1] }]\noutput")),
    "string_tensor": Case("npu_ge.string_tensor", edit("TYPE_FP32", "TYPE_STRING")),
    "reshape": Case("npu_ge.reshape", edit("dims: [4] }]\noutput", "dims: [4] reshape { shape: [2, 2] } }]"
                                            "\noutput")),
    "optional_input": Case("npu_ge.optional_input", edit('name: "x", data_type: TYPE_FP32, dims: [4] }',
                                                         'name: "x", data_type: TYPE_FP32, dims: [4], '
                                                         'optional: true }')),
    "output_twice": Case("npu_ge.tensors", edit('output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]',
                                                 'output [{ name: "y", data_type: TYPE_FP32, dims: [4] }, '
                                                 '{ name: "y", data_type: TYPE_FP32, dims: [4] }]')),
    "kind_gpu": Case("npu_ge.kind_gpu", edit("KIND_CPU", "KIND_GPU")),
    "parameter_rejected": Case("npu_ge.parameter_rejected", add(param("engine", "ge_graph") + "\n"
                                                                 + param("precision", "fp16"))),
    # npu_ge warnings: the backend loads them.
    "deprecated_device_id": Case("npu_ge.deprecated_key", add(param("DEVICE_ID", "0"))),
    "deprecated_executor_type": Case("npu_ge.deprecated_key", add(param("EXECUTOR_TYPE", "acl_om"))),
    "device_ids_duplicate": Case("npu_ge.device_ids_duplicate", add(param("device_ids", "0,0")), instances=2),
    "device_ids_unused": Case("npu_ge.device_ids_unused", add(param("device_ids", "0,1"))),
    "parameter_ignored": Case("npu_ge.parameter_ignored", add(param("ge.exec.precision_mode", "force_fp16")
                                                               + "\n" + param("dump_graph", "1"))),
    "static_model_batching": Case("npu_ge.static_model", add(param("static_model", "true"))),
    "dims_gears": Case("npu_ge.dims_gears", _dims_gears),
    "no_output": Case("npu_ge.tensors_completed",
                      edit('output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]', "")),
    # Triton's own rules, shown with an npu_ge model.
    "name_mismatch": Case("triton.name_mismatch", edit('name: "name_mismatch"', 'name: "other"')),
    "platform_unknown": Case("triton.platform_unknown", edit('backend: "npu_ge"', 'platform: "ascend_om"')),
    "max_batch_size": Case("triton.max_batch_size", edit("max_batch_size: 8", "max_batch_size: -1")),
    "dims_invalid": Case("triton.dims_invalid", edit("dims: [4] }]\noutput", "dims: [0] }]\noutput")),
    "tensor_incomplete": Case("triton.tensor_incomplete", edit('name: "x", data_type: TYPE_FP32, ',
                                                               'name: "x", ')),
    "preferred_batch_size": Case("triton.preferred_batch_size", edit(
        "max_queue_delay_microseconds: 2000",
        "max_queue_delay_microseconds: 2000 preferred_batch_size: [16]")),
    "version_policy": Case("triton.version_policy", add("version_policy { latest { num_versions: 0 } }")),
    "no_version": Case("triton.no_version", add("version_policy { specific { versions: [3] } }")),
    "batching_unbatched": Case("triton.batching_unbatched", _no_batch),
    "instance_count": Case("triton.instance_count", edit("count: 1", "count: -1")),
    "version_missing": Case("triton.version_missing",
                            add("version_policy { specific { versions: [1, 2] } }")),
}


def test_every_npu_ge_error_rule_has_an_agreement_case() -> None:
    covered = {case.rule for case in CASES.values()}
    errors = {f"npu_ge.{name}" for name, (severity, _, _) in npu_ge_checks.CHECKS.items()
              if severity == "error"}
    assert errors <= covered, f"npu_ge error rules without an agreement case: {sorted(errors - covered)}"
    warnings = {f"npu_ge.{name}" for name, (severity, _, _) in npu_ge_checks.CHECKS.items()
                if severity == "warning"}
    assert warnings <= covered, f"npu_ge warnings without an agreement case: {sorted(warnings - covered)}"


def test_validator_and_backend_agree(npu_shared: SharedNpuServer) -> None:
    affine_model(npu_shared.repo, "baseline")
    for name, case in CASES.items():
        case.change(affine_model(npu_shared.repo, name, instances=case.instances))
    server = npu_shared  # auto-complete on, Triton's default

    baseline = validate_model(npu_shared.repo / "baseline").findings
    assert baseline == [], [str(f) for f in baseline]
    assert load(server.url, "baseline") == (200, "")

    disagreements = []
    for name, case in CASES.items():
        findings = validate_model(npu_shared.repo / name).findings
        fired = [f for f in findings if f.rule == case.rule]
        status, error = load(server.url, name)
        loaded = status == 200 and model_ready(server.url, name)
        reason = _log_reason(server.log(), name) if "failed to poll" in error else error.strip()
        print(f"{name:26} {case.rule:30} {RULES[case.rule].severity.value:8} load {status}: {reason[:300]}")
        if not fired:
            disagreements.append(f"{name}: the validator did not report {case.rule}: "
                                 f"{[str(f) for f in findings]}")
        elif (RULES[case.rule].severity is Severity.ERROR) == loaded:
            disagreements.append(f"{name}: {case.rule} is {RULES[case.rule].severity.value} but the load "
                                 f"{'succeeded' if loaded else 'failed'} ({reason[:300]})")
        elif loaded and any(f.severity is Severity.ERROR for f in findings):
            disagreements.append(f"{name}: loads, yet the validator reports errors: "
                                 f"{[str(f) for f in findings if f.severity is Severity.ERROR]}")
    assert not disagreements, "\n".join(disagreements)


def _log_reason(log: str, name: str) -> str:
    """The server log's line about `name` (the load API answers only 'failed to poll')."""
    about = re.compile(rf"\b{re.escape(name)}\b")
    lines = [line for line in log.splitlines() if line.startswith("E") and about.search(line)]
    return "log: " + lines[-1].split("] ", 1)[-1] if lines else "(no log line)"
