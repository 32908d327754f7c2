"""What the npu_ge backend (backend_src/) accepts in a model config: the one table, and the
checks of a config against it.

Read from the backend itself: `ParseParameters`, `ParseDeviceIds`, `ParseEngine`,
`ParseModelConfig` and `ResolveModelFile` — the engine a version directory with model.onnx
(or one *.onnx) and no model.om gets (src/model_config.cc), the acl_om warning for other keys
(src/model_state.cc), `BuildGeOptions` — the `ge.*` / `session.*` / `graph.*` scopes
(src/ge_graph_engine.cc) — and `BindConfigToModel` (src/model_binding.cc). When the backend
changes, this module changes with it: tests/backend/test_validator_agreement.py loads every
check's invalid case into the real backend, so an error here is an error there.

This module holds the table (`PARAMETERS`, scopes, engine spellings) and the readers the
backend's own parsing mirrors (`parse_device_ids`, `engine_of`, `resolved_file`, ...);
`geadmin.repository.npu_ge_checks` holds the checks of a config against them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig as Config

from geadmin.repository.layout import ASCEND_PLATFORMS

BACKEND = "npu_ge"
ACL_OM, GE_GRAPH = "acl_om", "ge_graph"


@dataclass(frozen=True)
class Parameter:
    key: str
    meaning: str
    alias_of: str = ""  # a deprecated spelling of this key
    legacy: bool = False  # read by the older Ascend GE backend, not by this one


PARAMETERS: dict[str, Parameter] = {p.key: p for p in (
    Parameter("device_ids", "NPUs for the instances, e.g. '0,1'; instance i runs on device_ids[i % n]"),
    Parameter("engine", "acl_om (a .om run through ACL) or ge_graph (ONNX compiled by GE at load); "
              "default: ge_graph when default_model_filename does not end in .om, else acl_om"),
    Parameter("execute_timeout_ms", "acl_om: milliseconds an execute may take before the instance "
              "abandons it, rebuilds its stream and fails the batch (default 60000)"),
    Parameter("copy_overlap", "acl_om: 'true' (default) copies batch N+1 in while batch N executes "
              "(two buffer sets per instance); 'false' uses one set"),
    Parameter("DEVICE_ID", "older spelling of device_ids", alias_of="device_ids"),
    Parameter("EXECUTOR_TYPE", "older spelling of engine", alias_of="engine"),
    Parameter("static_model", "older GE backend: the model has fixed shapes; npu_ge reads the batch "
              "shape (static, or ATC gears) from the model itself", legacy=True),
    Parameter("device_exec_blocks", "older GE backend: its own execution pool; npu_ge runs one stream "
              "per instance (set instance_group count instead)", legacy=True),
    Parameter("profiling", "older GE backend: GE profiling", legacy=True),
    Parameter("dump_graph", "older GE backend: dump the compiled graph", legacy=True),
    Parameter("dump_data", "older GE backend: dump tensors", legacy=True),
)}
# ge_graph only: what a key with this prefix configures. session./graph. need a key after the dot.
SCOPES: dict[str, str] = {"ge.": "global GE option", "session.": "GE session option",
                          "graph.": "GE graph option"}
ENGINE_SPELLINGS: dict[str, str] = {
    "acl_om": ACL_OM, "om": ACL_OM, "acl": ACL_OM, "offline": ACL_OM,
    "ge_graph": GE_GRAPH, "ge": GE_GRAPH, "graph": GE_GRAPH, "online": GE_GRAPH,
}
DEFAULT_MODEL_FILE = {ACL_OM: "model.om", GE_GRAPH: "model.onnx"}
# Platforms older Ascend guides write, and the backend that replaces them.
PLATFORM_REPLACEMENTS: Mapping[str, str] = ASCEND_PLATFORMS
# Files of other frameworks: found where npu_ge's file should be, they name the likely mistake.
OTHER_FRAMEWORK_FILES: dict[str, str] = {
    "model.graphdef": "a TensorFlow GraphDef", "model.savedmodel": "a TensorFlow SavedModel",
    "model.pt": "a PyTorch TorchScript file", "model.plan": "a TensorRT engine",
    "model.py": "a Python-backend model", "model.xml": "an OpenVINO model",
    "model.onnx": "an ONNX model (engine ge_graph)", "model.om": "an ATC offline model (engine acl_om)",
    "model.pb": "a TensorFlow/GE graph (engine ge_graph)",
}
TRIM = " \t\n"  # what the backend's Trim() strips

Issue = tuple[str, str, str]  # (path, message, fix)
Versions = Mapping[int, Path]  # the version directories the config's policy selects
Check = Callable[[Config, Versions], Iterable[Issue]]


def is_npu_ge(config: model_config_pb2.ModelConfig) -> bool:
    return config.backend == BACKEND or (not config.backend and config.platform in PLATFORM_REPLACEMENTS)


def parse_device_ids(text: str) -> tuple[int, ...] | None:
    """As the backend reads `device_ids`: comma-separated decimal ids; None if it rejects it."""
    ids = []
    for item in (part.strip(TRIM) for part in text.split(",")):
        if not item or len(item) >= 10 or any(c not in "0123456789" for c in item):
            return None
        ids.append(int(item))
    return tuple(ids)


def parse_engine(text: str) -> str | None:
    return ENGINE_SPELLINGS.get(text.strip(TRIM).lower())


def string_parameters(config: model_config_pb2.ModelConfig) -> dict[str, str]:
    return {key: value.string_value for key, value in config.parameters.items()}


def effective(params: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """(the key the backend reads, its value) for `device_ids` or `engine`: the modern key wins."""
    alias = next(p.key for p in PARAMETERS.values() if p.alias_of == key)
    for name in (key, alias):
        if name in params:
            return name, params[name]
    return None


def engine_of(config: model_config_pb2.ModelConfig) -> str:
    chosen = effective(string_parameters(config), "engine")
    engine = parse_engine(chosen[1]) if chosen else None
    if engine:
        return engine
    name = config.default_model_filename
    return GE_GRAPH if name and not name.endswith(".om") else ACL_OM


def model_filename(config: model_config_pb2.ModelConfig) -> str:
    return config.default_model_filename or DEFAULT_MODEL_FILE[engine_of(config)]


def onnx_candidates(directory: Path) -> list[str]:
    """The ONNX files the backend would pick from in a version directory (`ResolveModelFile`):
    model.onnx if present, else every *.onnx, sorted."""
    if (directory / "model.onnx").is_file():
        return ["model.onnx"]
    return sorted(p.name for p in directory.glob("*.onnx") if p.is_file())


def resolved_file(config: model_config_pb2.ModelConfig, directory: Path) -> tuple[str, str]:
    """(engine, model file) the backend uses for this version directory: with neither `engine`
    (or EXECUTOR_TYPE) nor default_model_filename set and no model.om, a single ONNX file
    there means engine ge_graph, as repositories of the older GE backend expect."""
    chosen = effective(string_parameters(config), "engine")
    if (chosen and parse_engine(chosen[1])) or config.default_model_filename \
            or (directory / "model.om").is_file():
        return engine_of(config), model_filename(config)
    onnx = onnx_candidates(directory)
    return (GE_GRAPH, onnx[0]) if len(onnx) == 1 else (engine_of(config), model_filename(config))


def engine_for(config: model_config_pb2.ModelConfig, versions: Versions) -> str:
    """The engine the backend picks, given the selected version directories."""
    if any(resolved_file(config, d)[0] == GE_GRAPH for d in versions.values()):
        return GE_GRAPH
    return engine_of(config)


def scope_of(key: str) -> str | None:
    if key.startswith("ge."):
        return SCOPES["ge."]
    scoped = (what for prefix, what in SCOPES.items() if key.startswith(prefix) and len(key) > len(prefix))
    return next(scoped, None)


def instance_count(config: model_config_pb2.ModelConfig) -> int:
    """Instances Triton creates: a count below 1 means its default, 1 (and no group means one)."""
    return sum(max(group.count, 1) for group in config.instance_group) or 1
