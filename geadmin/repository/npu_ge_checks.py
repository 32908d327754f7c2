"""The checks of a model config against what the npu_ge backend accepts
(`geadmin.repository.npu_ge_params` holds the table and the readers they use).

Each check returns `Issue`s (path, message, fix); geadmin.repository.validate registers them
as rules `npu_ge.<name>` with the severity of `CHECKS`. tests/backend/test_validator_agreement.py
loads every check's invalid case into the real backend, so an error here is an error there.
"""

from __future__ import annotations

from collections.abc import Iterable

from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig as Config

from geadmin.repository.npu_ge_params import (
    ACL_OM,
    GE_GRAPH,
    OTHER_FRAMEWORK_FILES,
    PARAMETERS,
    PLATFORM_REPLACEMENTS,
    TRIM,
    Check,
    Issue,
    Versions,
    effective,
    engine_for,
    engine_of,
    instance_count,
    model_filename,
    onnx_candidates,
    parse_device_ids,
    parse_engine,
    resolved_file,
    scope_of,
    string_parameters,
)


def _param_path(key: str) -> str:
    return f'parameters["{key}"]'


# -- the checks: one per rule -------------------------------------------------------------
def check_platform(config: Config, _: Versions) -> Iterable[Issue]:
    backend = PLATFORM_REPLACEMENTS.get(config.platform)
    if backend and not config.backend:
        yield ("platform", f'platform "{config.platform}" is not a Triton platform (older Ascend guides '
               'write it): Triton rejects the config ("unexpected platform type")',
               f'replace `platform: "{config.platform}"` with `backend: "{backend}"`')


def check_deprecated_keys(config: Config, _: Versions) -> Iterable[Issue]:
    params = string_parameters(config)
    for p in PARAMETERS.values():
        if p.alias_of and p.key in params:
            ignored = p.alias_of in params
            yield (_param_path(p.key), f"parameter '{p.key}' is deprecated, npu_ge reads it as "
                   f"'{p.alias_of}'" + (f" — and ignores it here, because '{p.alias_of}' is also set"
                                        if ignored else ""),
                   f"rename the key to '{p.alias_of}'" if not ignored else f"remove '{p.key}'")


def check_device_ids_syntax(config: Config, _: Versions) -> Iterable[Issue]:
    chosen = effective(string_parameters(config), "device_ids")
    if chosen and parse_device_ids(chosen[1]) is None:
        yield (_param_path(chosen[0]), f"'{chosen[0]}' is {chosen[1]!r}: the backend expects a "
               "comma-separated list of device ids and fails the load",
               'write NPU ids separated by commas, e.g. string_value: "0,1"')


def check_device_ids_duplicate(config: Config, _: Versions) -> Iterable[Issue]:
    chosen = effective(string_parameters(config), "device_ids")
    ids = parse_device_ids(chosen[1]) if chosen else None
    twice = sorted({i for i in ids or () if ids and ids.count(i) > 1})
    if chosen and twice:
        yield (_param_path(chosen[0]), f"'{chosen[0]}' lists device {', '.join(map(str, twice))} more than "
               f"once ({chosen[1]!r}): instances are dealt round-robin, so that NPU gets more of them",
               "list each NPU once; set instance_group count for several instances per NPU")


def check_device_ids_unused(config: Config, _: Versions) -> Iterable[Issue]:
    chosen = effective(string_parameters(config), "device_ids")
    ids = parse_device_ids(chosen[1]) if chosen else None
    unique = list(dict.fromkeys(ids or ()))
    count = instance_count(config)
    if chosen and count < len(unique):
        idle = [str(i) for i in (ids or ())[count:] if i not in (ids or ())[:count]]
        yield (_param_path(chosen[0]), f"{len(unique)} devices listed but {count} instance(s): instance i "
               f"runs on device_ids[i % n], so device {', '.join(dict.fromkeys(idle))} get no instance",
               f"set instance_group count to {len(unique)} (or a multiple), or list fewer devices")


def check_engine_value(config: Config, _: Versions) -> Iterable[Issue]:
    chosen = effective(string_parameters(config), "engine")
    if chosen and parse_engine(chosen[1]) is None:
        yield (_param_path(chosen[0]), f"'{chosen[0]}' is {chosen[1]!r}: the backend expects 'acl_om' or "
               "'ge_graph' and fails the load", 'write string_value: "acl_om" (a .om) or "ge_graph" (ONNX)')


def parse_timeout_ms(text: str) -> int | None:
    """As the backend reads `execute_timeout_ms`: decimal digits in [1, 3600000]; None if rejected."""
    value = text.strip(TRIM)
    if not value or len(value) >= 10 or any(c not in "0123456789" for c in value):
        return None
    return int(value) if 1 <= int(value) <= 3_600_000 else None


def check_host_path_values(config: Config, _: Versions) -> Iterable[Issue]:
    params = string_parameters(config)
    timeout = params.get("execute_timeout_ms")
    if timeout is not None and parse_timeout_ms(timeout) is None:
        yield (_param_path("execute_timeout_ms"), f"'execute_timeout_ms' is {timeout!r}: "
               "the backend expects an integer in [1, 3600000] and fails the load",
               'write milliseconds, e.g. string_value: "60000"')
    overlap = params.get("copy_overlap")
    if overlap is not None and overlap.strip(TRIM).lower() not in ("true", "1", "on", "false", "0", "off"):
        yield (_param_path("copy_overlap"), f"'copy_overlap' is {overlap!r}: the backend expects 'true' or "
               "'false' and fails the load", 'write string_value: "true" or "false"')


def _unread_keys(config: model_config_pb2.ModelConfig) -> list[str]:
    return [k for k in config.parameters if k not in PARAMETERS or PARAMETERS[k].legacy]


def check_ignored_parameters(config: Config, versions: Versions) -> Iterable[Issue]:
    engine = engine_for(config, versions)
    for key in _unread_keys(config):
        legacy = key in PARAMETERS and PARAMETERS[key].legacy
        if key == "static_model" and engine == ACL_OM:
            continue  # its own check
        if legacy:  # either engine: the backend warns and ignores it
            yield (_param_path(key), f"parameter '{key}' ({PARAMETERS[key].meaning}) is a setting of the "
                   "older Ascend GE backend that npu_ge does not read: the backend logs a warning and "
                   "ignores it", "remove it")
        elif engine == ACL_OM:
            what = scope_of(key) or "not an npu_ge parameter"
            yield (_param_path(key), f"parameter '{key}' ({what}) is not used by engine 'acl_om': the "
                   "backend logs a warning and ignores it",
                   "remove it (ge.*/session.*/graph.* apply to ge_graph only)")


def check_rejected_parameters(config: Config, versions: Versions) -> Iterable[Issue]:
    if engine_for(config, versions) != GE_GRAPH:
        return
    for key in (k for k in _unread_keys(config) if scope_of(k) is None and k not in PARAMETERS):
        yield (_param_path(key), f"parameter '{key}' is neither an npu_ge parameter nor a 'ge.*', "
               "'session.<key>' or 'graph.<key>' option: engine 'ge_graph' fails the load",
               "remove it, or give it one of the three scopes")


def check_static_model(config: Config, versions: Versions) -> Iterable[Issue]:
    if "static_model" in config.parameters and engine_for(config, versions) == ACL_OM:
        batching = config.HasField("dynamic_batching")
        yield (_param_path("static_model"), "'static_model' is a parameter of the older GE backend"
               + (", which refused it together with dynamic_batching" if batching else "")
               + "; npu_ge ignores it and takes the batch shape from the .om (a static batch, or ATC gears)",
               "remove static_model; for batching, compile the .om with atc --dynamic_batch_size")


def check_ge_graph_build(config: Config, versions: Versions) -> Iterable[Issue]:
    if engine_for(config, versions) != GE_GRAPH:
        return
    picked = [(v, f) for v, d in sorted(versions.items()) for e, f in [resolved_file(config, d)]
              if e == GE_GRAPH]
    if picked and engine_of(config) != GE_GRAPH:  # chosen from the directory, not the config
        version, name = picked[0]
        yield ("backend", f"{version}/{name} and no model.om, no engine, no default_model_filename: "
               "npu_ge picks engine 'ge_graph', which loads only with npu_ge built against the CANN "
               f"toolkit; a build without it fails the load with \"{name} needs the ge_graph engine, "
               "which this build lacks\"",
               "convert the model with ATC to model.om, or use the image built with the CANN toolkit")
        return
    yield ("default_model_filename" if config.default_model_filename else "backend",
           f"engine 'ge_graph' ({model_filename(config)}) loads only with npu_ge built against the CANN "
           "toolkit (NPU_GE_WITH_GE_GRAPH=ON); a build without it serves .om files only",
           "convert the model with ATC to model.om, or use a CANN build of npu_ge")


def check_model_filename(config: Config, _: Versions) -> Iterable[Issue]:
    name = config.default_model_filename
    if "/" in name or name == "..":
        yield ("default_model_filename", f"default_model_filename {name!r} is a path: the backend fails "
               "the load", "give a file name inside the version directory, e.g. model.om")


def check_model_file(config: Config, versions: Versions) -> Iterable[Issue]:
    for version, directory in sorted(versions.items()):
        engine, expected = resolved_file(config, directory)
        if (directory / expected).is_file():
            continue
        onnx = onnx_candidates(directory)
        if engine == ACL_OM and not config.default_model_filename and len(onnx) > 1 \
                and effective(string_parameters(config), "engine") is None:
            yield (f"{version}/model.om", f"no model.om or model.onnx in {directory} but {len(onnx)} ONNX "
                   f"files ({', '.join(onnx)}): the backend fails the load and asks which to serve",
                   f'set default_model_filename: "{onnx[0]}" (or the one to serve)')
            continue
        others = [f"{f} ({OTHER_FRAMEWORK_FILES[f]})" for f in OTHER_FRAMEWORK_FILES
                  if f != expected and (directory / f).exists()]
        hint = (f"; it holds {', '.join(others)} — likely the wrong file for this model" if others else "")
        yield (f"{version}/{expected}", f"no {expected} in {directory}: the npu_ge backend "
               f"({engine}) loads exactly that file{hint}",
               f"put the model there as {expected}, or set default_model_filename")


def _tensors(config: model_config_pb2.ModelConfig) -> Iterable[tuple[str, model_config_pb2.ModelInput]]:
    yield from ((f"input[{i}]", t) for i, t in enumerate(config.input))
    yield from ((f"output[{i}]", t) for i, t in enumerate(config.output))


def check_dynamic_dims(config: Config, _: Versions) -> Iterable[Issue]:
    if config.max_batch_size == 0:
        return  # check_gear_dims: only the .om's gears can tell
    for path, tensor in _tensors(config):
        if -1 in tensor.dims:
            yield (f"{path}.dims", f"'{tensor.name}' has a variable dimension (-1) with max_batch_size "
                   f"{config.max_batch_size}: npu_ge serves -1 besides the batch only for .om files with "
                   "dims or image size gears, which need max_batch_size 0, and fails the load",
                   "write the fixed dims of the .om, without the batch dimension (max_batch_size covers "
                   "it); for a model compiled with --dynamic_dims or --dynamic_image_size set "
                   "max_batch_size: 0 and write its full dims")


def check_gear_dims(config: Config, _: Versions) -> Iterable[Issue]:
    if config.max_batch_size != 0:
        return
    for path, tensor in _tensors(config):
        if -1 in tensor.dims:
            yield (f"{path}.dims", f"'{tensor.name}' has a variable dimension (-1): npu_ge loads it only "
                   "when the .om was compiled with dims or image size gears (atc --dynamic_dims / "
                   "--dynamic_image_size) that vary exactly this dimension; otherwise the load fails",
                   "keep -1 only where the model's gears vary; write every other dim as the .om has it")


def check_bytes(config: Config, _: Versions) -> Iterable[Issue]:
    for path, tensor in _tensors(config):
        if tensor.data_type == model_config_pb2.TYPE_STRING:
            yield (f"{path}.data_type", f"'{tensor.name}' is TYPE_STRING: .om models have no string tensors "
                   "and npu_ge fails the load", "use the numeric type the model declares")


def check_reshape(config: Config, _: Versions) -> Iterable[Issue]:
    for path, tensor in _tensors(config):
        if tensor.HasField("reshape") and tensor.reshape.shape:
            yield (f"{path}.reshape", f"'{tensor.name}' has a reshape: npu_ge does not support it and fails "
                   "the load", "remove reshape and write the model's own dims")


def check_optional(config: Config, _: Versions) -> Iterable[Issue]:
    for i, tensor in enumerate(config.input):
        if tensor.optional:
            yield (f"input[{i}].optional", f"input '{tensor.name}' is optional: the model reads every input "
                   "in each request and npu_ge fails the load", "remove optional: true")


def check_tensors(config: Config, _: Versions) -> Iterable[Issue]:
    for what in ("input", "output"):
        names = [t.name for t in getattr(config, what)]
        for twice in sorted({n for n in names if names.count(n) > 1}):
            yield (f"{what}[{names.index(twice)}]", f"{what} '{twice}' is declared twice", "declare it once")


def check_tensors_completed(config: Config, versions: Versions) -> Iterable[Issue]:
    engine = engine_for(config, versions)
    files = sorted({resolved_file(config, d)[1] for d in versions.values()}) or [model_filename(config)]
    source = "the .om's description" if engine == ACL_OM else "the ONNX graph's inputs and outputs"
    for what in ("input", "output"):
        if not getattr(config, what):
            yield (what, f"no {what} declared: npu_ge completes them from {', '.join(files)} ({source}) when "
                   "the model loads (Triton's auto-complete; a Triton started with "
                   "--disable-auto-complete-config refuses the config)", f"declare {what} [...] to pin the "
                   "model's interface, or leave it to auto-complete and check GET /v2/models/<name>/config")


def check_kind(config: Config, _: Versions) -> Iterable[Issue]:
    for i, group in enumerate(config.instance_group):
        if group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU:
            yield (f"instance_group[{i}].kind", "KIND_GPU asks Triton for NVIDIA GPUs, which an Ascend host "
                   "does not have: the load fails", "use KIND_CPU (or KIND_MODEL); NPUs come from "
                   "parameter device_ids")


# rule name -> (severity, what it checks, check). Errors: the backend (or Triton) fails the load.
CHECKS: dict[str, tuple[str, str, Check]] = {
    "platform": ("error", "an Ascend platform instead of backend npu_ge", check_platform),
    "deprecated_key": ("warning", "DEVICE_ID / EXECUTOR_TYPE instead of device_ids / engine",
                       check_deprecated_keys),
    "device_ids_syntax": ("error", "device_ids is not a list of ids", check_device_ids_syntax),
    "device_ids_duplicate": ("warning", "a device listed twice", check_device_ids_duplicate),
    "device_ids_unused": ("warning", "fewer instances than devices", check_device_ids_unused),
    "engine_value": ("error", "engine is neither acl_om nor ge_graph", check_engine_value),
    "host_path_value": ("error", "execute_timeout_ms or copy_overlap has a value the backend rejects",
                        check_host_path_values),
    "parameter_ignored": ("warning", "a parameter acl_om does not read, or one of the older GE backend",
                          check_ignored_parameters),
    "parameter_rejected": ("error", "a parameter ge_graph rejects", check_rejected_parameters),
    "static_model": ("warning", "static_model (older backend), with or without dynamic batching",
                     check_static_model),
    "ge_graph_build": ("info", "ge_graph needs a CANN build", check_ge_graph_build),
    "model_filename": ("error", "default_model_filename is a path", check_model_filename),
    "model_file": ("error", "the engine's model file is missing", check_model_file),
    "dims_dynamic": ("error", "a variable dimension besides the batch, with max_batch_size > 0",
                     check_dynamic_dims),
    "dims_gears": ("warning", "a variable dimension without batching: needs dims or image size gears",
                   check_gear_dims),
    "string_tensor": ("error", "a TYPE_STRING tensor", check_bytes),
    "reshape": ("error", "a reshape", check_reshape),
    "optional_input": ("error", "an optional input", check_optional),
    "tensors": ("error", "a tensor declared twice", check_tensors),
    "tensors_completed": ("warning", "no inputs or outputs: completed from the .om or ONNX file at load",
                          check_tensors_completed),
    "kind_gpu": ("error", "instance_group KIND_GPU", check_kind),
}
