"""Triton's own rules for a model config: what the server rejects at load (name vs
directory, backend, dims vs max_batch_size, batching, instances, versions, the model file)
and, for ensembles, the steps against the step models in the same repository. Importing
this module registers them in geadmin.repository.rules.RULES."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.errors import RepositoryError
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository.layout import MODEL_FILES, backend_of, is_model_name
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_text
from geadmin.repository.positions import locate
from geadmin.repository.rules import Context, Issue, Severity, did_you_mean, is_version, rule

TRITON_PLATFORMS = ("ensemble", "tensorrt_plan", "tensorflow_graphdef", "tensorflow_savedmodel",
                    "onnxruntime_onnx", "pytorch_libtorch")
AUTO_BACKEND_FILES = {  # what Triton's auto-complete picks when a config names no backend
    "model.plan": "tensorrt", "model.onnx": "onnxruntime", "model.pt": "pytorch",
    "model.savedmodel": "tensorflow", "model.graphdef": "tensorflow", "model.xml": "openvino"}


def _tensors(config: ModelConfig) -> Iterator[tuple[str, Any]]:
    yield from ((f"input[{i}]", t) for i, t in enumerate(config.input))
    yield from ((f"output[{i}]", t) for i, t in enumerate(config.output))


@rule("triton.name_mismatch", Severity.ERROR, "name differs from the model directory")
def _name(ctx: Context) -> Iterable[Issue]:
    if ctx.directory is not None and ctx.config.name and ctx.config.name != ctx.directory.name:
        yield ("name", f"name is {ctx.config.name!r} but the directory is {ctx.directory.name!r}: Triton "
               "refuses a config whose name is not its directory's", f'write name: "{ctx.directory.name}" '
               "(or remove the line: Triton takes the directory name)")


@rule("triton.backend_missing", Severity.ERROR, "neither backend nor platform")
def _backend(ctx: Context) -> Iterable[Issue]:
    if ctx.config.backend or ctx.config.platform:
        return
    files = [f for v in ctx.selected_versions.values() for f in AUTO_BACKEND_FILES if (v / f).exists()]
    om = any((v / "model.om").exists() for v in ctx.selected_versions.values())
    if not files:
        yield ("", "the config names no backend and Triton cannot guess one from the files",
               'add backend: "npu_ge"' if om else 'add backend: "<name>" (npu_ge, python, onnxruntime, ...)')


@rule("triton.backend_guessed", Severity.WARNING, "no backend: Triton picks one from the model file")
def _backend_guessed(ctx: Context) -> Iterable[Issue]:
    files = [f for v in ctx.selected_versions.values() for f in AUTO_BACKEND_FILES if (v / f).exists()]
    if files and not (ctx.config.backend or ctx.config.platform):
        guess = AUTO_BACKEND_FILES[files[0]]
        yield ("", f"no backend: Triton will load {files[0]} with {guess!r}, not npu_ge",
               f'add backend: "npu_ge" to serve it on the NPU, or backend: "{guess}"')


@rule("triton.platform_unknown", Severity.ERROR, "a platform Triton does not know")
def _platform(ctx: Context) -> Iterable[Issue]:
    platform = ctx.config.platform
    if platform and not ctx.config.backend and platform not in TRITON_PLATFORMS \
            and platform not in npu_ge.PLATFORM_REPLACEMENTS:
        yield ("platform", f"platform {platform!r} is not a Triton platform: the load fails (\"unexpected "
               "platform type\")", 'use backend: "<name>" (e.g. backend: "npu_ge") instead of platform')


@rule("triton.max_batch_size", Severity.ERROR, "max_batch_size < 0")
def _max_batch_size(ctx: Context) -> Iterable[Issue]:
    if ctx.config.max_batch_size < 0:
        yield ("max_batch_size", f"max_batch_size is {ctx.config.max_batch_size}: Triton needs 0 (no "
               "batching) or more", "write max_batch_size: 0, or the largest batch the model takes")


@rule("triton.tensor_incomplete", Severity.ERROR, "an input/output without name, data_type or dims")
def _tensor_incomplete(ctx: Context) -> Iterable[Issue]:
    for path, t in _tensors(ctx.config):
        for missing, absent in (("name", not t.name), ("data_type", t.data_type == 0), ("dims", not t.dims)):
            if absent:
                yield (f"{path}.{missing}" if missing != "dims" else path, f"{path} ({t.name or 'no name'}) "
                       f"has no {missing}: Triton refuses it", f"add {missing} to {path}")


@rule("triton.dims_invalid", Severity.ERROR, "a dimension < 1 other than -1")
def _dims_invalid(ctx: Context) -> Iterable[Issue]:
    for path, t in _tensors(ctx.config):
        if any(d < 1 and d != -1 for d in t.dims):
            yield (f"{path}.dims", f"{t.name!r} dims {list(t.dims)}: each dimension must be >= 1, or -1 "
                   "for a variable size", "fix the dimension (dims exclude the batch dimension)")


@rule("triton.dims_batch", Severity.WARNING, "dims seem to include the batch dimension")
def _dims_batch(ctx: Context) -> Iterable[Issue]:
    mbs = ctx.config.max_batch_size
    for path, t in _tensors(ctx.config):
        if mbs > 1 and len(t.dims) > 1 and t.dims[0] == mbs:
            yield (f"{path}.dims", f"{t.name!r} dims {list(t.dims)} start with max_batch_size ({mbs}): with "
                   "max_batch_size > 0, dims exclude the batch dimension", f"if {mbs} is the batch, write "
                   f"dims: {list(t.dims[1:])}")


@rule("triton.batching_unbatched", Severity.WARNING, "dynamic batching with max_batch_size 0")
def _batching_unbatched(ctx: Context) -> Iterable[Issue]:
    if ctx.config.HasField("dynamic_batching") and ctx.config.max_batch_size == 0:
        yield ("dynamic_batching", "dynamic_batching with max_batch_size 0: Triton never batches this model, "
               "each request runs alone", "set max_batch_size > 0 (the model's largest batch), or remove "
               "dynamic_batching")


@rule("triton.preferred_batch_size", Severity.ERROR, "a preferred batch size < 1 or > max_batch_size")
def _preferred(ctx: Context) -> Iterable[Issue]:
    sizes, mbs = ctx.config.dynamic_batching.preferred_batch_size, ctx.config.max_batch_size
    bad = [s for s in sizes if s < 1 or s > mbs]
    if bad:
        yield ("dynamic_batching.preferred_batch_size", f"preferred_batch_size {list(sizes)}: {bad} not in "
               f"1..max_batch_size ({mbs}); Triton refuses the config",
               f"keep sizes between 1 and {mbs}" if mbs > 0 else "set max_batch_size first")


@rule("triton.instance_count", Severity.WARNING, "an instance count < 0")
def _instance_count(ctx: Context) -> Iterable[Issue]:
    for i, group in enumerate(ctx.config.instance_group):
        if group.count < 0:
            yield (f"instance_group[{i}].count", f"count is {group.count}: Triton treats a count below 1 as "
                   "its default (1 instance)", "write the number of instances you want (>= 1)")


@rule("triton.ensemble_instances", Severity.ERROR, "an ensemble with instance_group")
def _ensemble_instances(ctx: Context) -> Iterable[Issue]:
    if ctx.is_ensemble and ctx.config.instance_group:
        yield ("instance_group", "an ensemble has no instances of its own: Triton refuses instance_group "
               "here", "remove instance_group (set it in the step models)")


@rule("triton.version_policy", Severity.ERROR, "a version policy that selects nothing")
def _version_policy(ctx: Context) -> Iterable[Issue]:
    policy = ctx.config.version_policy
    if policy.HasField("latest") and policy.latest.num_versions < 1:
        yield ("version_policy.latest", "latest { num_versions } is 0: no version would load",
               "write latest { num_versions: 1 }")
    if policy.HasField("specific") and not policy.specific.versions:
        yield ("version_policy.specific", "specific {} lists no versions: none would load",
               "list versions: specific { versions: [1] }")


@rule("triton.version_missing", Severity.WARNING, "a specific version without its directory")
def _version_missing(ctx: Context) -> Iterable[Issue]:
    policy = ctx.config.version_policy
    missing = [v for v in policy.specific.versions if v not in ctx.existing_versions]
    if ctx.directory is not None and missing and ctx.selected_versions:
        yield ("version_policy.specific.versions", f"version {', '.join(map(str, missing))} has no directory "
               f"in {ctx.directory}: Triton logs an error and loads only {sorted(ctx.selected_versions)}",
               "create the version directory or drop it from the policy")


@rule("triton.no_version", Severity.ERROR, "no version directory the policy selects")
def _no_version(ctx: Context) -> Iterable[Issue]:
    if ctx.directory is None or ctx.selected_versions:
        return
    found = sorted(ctx.existing_versions)
    yield ("version_policy" if found else "", f"the version policy selects none of the versions in "
           f"{ctx.directory} ({found})" if found else f"no version directory in {ctx.directory}",
           "fix version_policy" if found else f"put the model in {ctx.directory / '1'}/")


@rule("triton.version_dir_ignored", Severity.WARNING, "a version directory Triton ignores (leading zero)")
def _version_ignored(ctx: Context) -> Iterable[Issue]:
    if ctx.directory is None or not ctx.directory.is_dir():
        return
    for p in sorted(ctx.directory.iterdir()):
        if p.is_dir() and p.name.isascii() and p.name.isdigit() and not is_version(p.name):
            yield (p.name + "/", f"Triton ignores version directory {p.name!r} (leading zero)",
                   f"rename it to {str(int(p.name))!r}")


@rule("triton.model_file", Severity.ERROR, "the file the backend loads is missing")
def _model_file(ctx: Context) -> Iterable[Issue]:
    if npu_ge.is_npu_ge(ctx.config) or ctx.is_ensemble:
        return  # npu_ge: npu_ge.model_file knows which file the engine loads
    kind = backend_of(ctx.config)
    named = ctx.config.default_model_filename
    expected = (named,) if named else MODEL_FILES.get(kind)
    for version, directory in sorted(ctx.selected_versions.items()):
        if expected and not any((directory / f).exists() for f in expected):
            yield (f"{version}/{expected[0]}", f"no {' or '.join(expected)} in {directory} (the {kind!r} "
                   "backend loads it)", f"put the model file in {directory}")



# -- ensembles: steps against the step models in the same repository ---------------------
def _step_configs(ctx: Context) -> Iterator[tuple[str, Any, ModelConfig | None]]:
    """(path, step, the step model's config or None when it cannot be read)."""
    for i, step in enumerate(ctx.config.ensemble_scheduling.step):
        config = None
        if ctx.directory is not None and is_model_name(step.model_name):  # else never a path
            located = locate(_read_or_empty(ctx.directory.parent / step.model_name / CONFIG_FILE))
            config = located.config if located.error is None else None
        yield f"ensemble_scheduling.step[{i}]", step, config


def _read_or_empty(path: Path) -> str:
    try:
        return read_config_text(path)
    except RepositoryError:
        return "{"  # unreadable: reported when that model itself is validated


@rule("ensemble.step_model", Severity.ERROR,
      "a step names no model, one not in the repository, or a version its model does not have")
def _step_model(ctx: Context) -> Iterable[Issue]:
    for path, step, config in _step_configs(ctx):
        repository = ctx.directory.parent if ctx.directory is not None else None
        if not step.model_name:
            yield (path, "the step names no model_name", "add model_name to the step")
        elif not is_model_name(step.model_name):
            yield (f"{path}.model_name", f"step model {step.model_name!r} is not a model name (one "
                   "directory name in the repository, without '/', '..' or NUL)",
                   "write the name of a model directory in the repository")
        elif repository is not None and not (repository / step.model_name).is_dir():
            names = [p.name for p in repository.iterdir() if p.is_dir()]
            yield (f"{path}.model_name", f"step model {step.model_name!r} is not in {repository}",
                   did_you_mean(step.model_name, names, "models in the repository"))
        elif repository is not None and step.model_version >= 0:
            step_ctx = Context(config or ModelConfig(), repository / step.model_name)
            versions = sorted(step_ctx.selected_versions if config else step_ctx.existing_versions)
            if step.model_version not in versions:
                yield (f"{path}.model_version", f"step model {step.model_name!r} has no version "
                       f"{step.model_version} that Triton loads (it loads {versions}): Triton refuses "
                       "the ensemble", f"use model_version: -1 (the latest) or one of {versions}")


@rule("ensemble.step_tensor", Severity.ERROR, "a step maps a tensor its model does not have")
def _step_tensor(ctx: Context) -> Iterable[Issue]:
    for path, step, config in _step_configs(ctx):
        for what, mapping, tensors in (("input", step.input_map, config.input if config else None),
                                       ("output", step.output_map, config.output if config else None)):
            names = [t.name for t in tensors or ()]
            for key in mapping if tensors is not None else ():
                if key not in names:
                    yield (f"{path}.{what}_map[{json.dumps(key)}]", f"model {step.model_name!r} has no "
                           f"{what} {key!r} (its {what}s: {', '.join(names) or 'none'})",
                           did_you_mean(key, names, f"{what}s of {step.model_name}"))


@rule("ensemble.unmapped", Severity.ERROR, "an ensemble input no step reads, or an output no step writes")
def _unmapped(ctx: Context) -> Iterable[Issue]:
    if not ctx.is_ensemble:
        return
    steps = ctx.config.ensemble_scheduling.step
    read = {v for s in steps for v in s.input_map.values()}
    written = {v for s in steps for v in s.output_map.values()}
    for path, t in _tensors(ctx.config):
        used = read if path.startswith("input") else written
        if t.name not in used:
            verb = "reads" if path.startswith("input") else "writes"
            yield (path, f"no step {verb} ensemble {path.split('[')[0]} {t.name!r}: Triton refuses the "
                   "ensemble", f"map {t.name!r} in a step's {'input' if verb == 'reads' else 'output'}_map")
    known = {t.name for t in ctx.config.input} | written
    for i, s in enumerate(steps):
        for key, value in s.input_map.items():
            if value not in known:
                yield (f"ensemble_scheduling.step[{i}].input_map[{json.dumps(key)}]", f"tensor {value!r} is "
                       "neither an ensemble input nor written by any step", "map it to an ensemble input or "
                       "to another step's output")


@rule("ensemble.dtype", Severity.ERROR, "a tensor with two data types along the ensemble")
def _ensemble_dtype(ctx: Context) -> Iterable[Issue]:
    types = {t.name: (t.data_type, "the ensemble") for t in [*ctx.config.input, *ctx.config.output]}
    flows: list[tuple[str, str, int, str]] = []  # (path, ensemble tensor, data type, whose)
    for path, step, config in _step_configs(ctx):
        for what, mapping, tensors in (("input", step.input_map, config.input if config else ()),
                                       ("output", step.output_map, config.output if config else ())):
            declared = {t.name: t.data_type for t in tensors}
            flows += [(f"{path}.{what}_map[{json.dumps(k)}]", v, declared[k],
                       f"{step.model_name}'s {what} {k!r}") for k, v in mapping.items() if k in declared]
    for path, tensor, dtype, whose in flows:
        first = types.setdefault(tensor, (dtype, whose))
        if first[0] != dtype:
            yield (path, f"ensemble tensor {tensor!r} is {_dtype(first[0])} in {first[1]} but "
                   f"{_dtype(dtype)} in {whose}: Triton refuses the ensemble",
                   "make both data types the same")


def _dtype(value: int) -> str:
    known = value in model_config_pb2.DataType.values()
    return str(model_config_pb2.DataType.Name(value)) if known else str(value)


def label_path(model_directory: Path, label_filename: str) -> Path:
    """Where an output's `label_filename` points, when that is inside the model directory
    (symbolic links followed); RepositoryError otherwise. Triton and geadmin read the file
    and show its lines as class labels: a name leaving the directory (`../`, an absolute
    path, a link out) would publish any file they can read."""
    name = PurePosixPath(label_filename)
    if not label_filename or name.is_absolute() or ".." in name.parts or "\x00" in label_filename:
        raise RepositoryError(f"label_filename {label_filename!r} is not a file name inside the model "
                              "directory: write the name of a file beside config.pbtxt (e.g. labels.txt)")
    root = model_directory.resolve()
    path = (model_directory / name).resolve()
    if not path.is_relative_to(root):
        raise RepositoryError(f"label_filename {label_filename!r} leads out of the model directory "
                              f"(to {path}): keep the labels file itself in {model_directory}")
    return path


@rule("triton.label_file_outside", Severity.ERROR, "label_filename leaves the model directory")
def _label_file_outside(ctx: Context) -> Iterable[Issue]:
    for i, output in enumerate(ctx.config.output):
        if not output.label_filename:
            continue
        try:
            label_path(ctx.directory or Path("."), output.label_filename)
        except RepositoryError:
            yield (f"output[{i}].label_filename", f"label_filename {output.label_filename!r} leaves the "
                   "model directory: Triton and geadmin show its lines as class labels, so any file "
                   "they can read would be published",
                   'move the labels file into the model directory and write its name only (e.g. '
                   'label_filename: "labels.txt")')
