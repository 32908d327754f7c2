"""Validate model configs without a running Triton, in layers: schema (does the text parse as
a `ModelConfig`), Triton's rules (what the server itself rejects at load), and the npu_ge
backend's rules (geadmin.repository.npu_ge_params, checked against the real backend by
tests/backend/test_validator_agreement.py).

Every finding names its rule, a config path (`input[0].dims`), the line and column where the
text has them, a severity, the cause and the fix. Severity `error` means the load fails;
`warning` that it loads but probably not as meant; `info` something worth knowing.
Nothing here raises on any text or directory: problems are findings.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pool
from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.errors import ConfigParseError, RepositoryError
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository.layout import MODEL_FILES, backend_of
from geadmin.repository.modelconfig import CONFIG_FILE, Located, locate, read_config_text

Issue = tuple[str, str, str]  # (path, message, fix)


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "npu_ge.device_ids_syntax"
    severity: Severity
    path: str  # config path (`input[0].dims`), a file in the model dir (`1/model.om`), or ""
    message: str  # the cause
    fix: str  # what to change
    line: int | None = None  # 1-based, in `file`
    column: int | None = None
    file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity.value, "path": self.path, "line": self.line,
                "column": self.column, "message": self.message, "fix": self.fix, "file": self.file}

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p)
        path = f" {self.path}:" if self.path else ""
        return f"{where + ': ' if where else ''}{self.severity.value} [{self.rule}]{path} {self.message}"


@dataclass(frozen=True)
class Context:
    """One config under validation; `directory` is its model directory when it is on disk."""

    config: ModelConfig
    directory: Path | None = None

    @cached_property
    def existing_versions(self) -> dict[int, Path]:
        """Version directories as Triton reads them (digits, no leading zero)."""
        if self.directory is None or not self.directory.is_dir():
            return {}
        return {int(p.name): p for p in self.directory.iterdir() if p.is_dir() and _is_version(p.name)}

    @cached_property
    def selected_versions(self) -> dict[int, Path]:
        policy, existing = self.config.version_policy, self.existing_versions
        if policy.HasField("specific"):
            return {v: existing[v] for v in policy.specific.versions if v in existing}
        if policy.HasField("all"):
            return dict(existing)
        keep = policy.latest.num_versions if policy.HasField("latest") else 1
        return {v: existing[v] for v in sorted(existing, reverse=True)[:keep]}

    @property
    def is_ensemble(self) -> bool:
        return self.config.platform == "ensemble"


def _is_version(name: str) -> bool:
    return name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0"))


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str
    check: Callable[[Context], Iterable[Issue]]


RULES: dict[str, Rule] = {}


def rule(rule_id: str, severity: Severity, summary: str) -> Callable[[Callable[[Context], Iterable[Issue]]],
                                                                        Callable[[Context], Iterable[Issue]]]:
    def register(check: Callable[[Context], Iterable[Issue]]) -> Callable[[Context], Iterable[Issue]]:
        RULES[rule_id] = Rule(rule_id, severity, summary, check)
        return check
    return register


# -- schema ------------------------------------------------------------------------------
SCHEMA_RULES = {
    "schema.syntax": "the text is not protobuf text format",
    "schema.unknown_field": "a field ModelConfig does not have",
    "schema.bad_enum": "an enum value that does not exist (TYPE_FOO)",
    "schema.unreadable": "config.pbtxt missing, unreadable or not UTF-8",
}
_UNKNOWN_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "([^"]*)"')
_BAD_ENUM = re.compile(r'Enum type "([\w.]+)" has no value named (\S+?)\.?$')


def _schema_finding(error: ConfigParseError, located: Located, file: str) -> Finding:
    lines = located.text.split("\n")
    quoted = f"'{lines[error.line - 1]}': " if error.line and error.line <= len(lines) else ""
    detail, path = error.detail.removeprefix(quoted), located.error_path
    if field_match := _UNKNOWN_FIELD.search(detail):
        kind, name = field_match[1], field_match[2]
        names = _names(lambda pool: pool.FindMessageTypeByName(kind).fields_by_name)
        rule_id, fix = "schema.unknown_field", _did_you_mean(name, names, f"fields of {kind}")
    elif enum_match := _BAD_ENUM.search(detail):
        kind, name = enum_match[1], enum_match[2]
        names = _names(lambda pool: pool.FindEnumTypeByName(kind).values_by_name)
        rule_id, fix = "schema.bad_enum", _did_you_mean(name, names, f"values of {kind}")
    else:
        rule_id, fix = "schema.syntax", ("fix the text at that position (protobuf text format: `field: value`"
                                         ", `message { ... }`, lists in [ ]); Triton refuses the whole file")
    return Finding(rule_id, Severity.ERROR, path, f"does not parse: {detail}", fix, error.line, error.column,
                   file)


def _names(lookup: Callable[[Any], Any]) -> list[str]:
    try:
        return list(lookup(descriptor_pool.Default()))
    except KeyError:
        return []


def _did_you_mean(name: str, names: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    return f"did you mean {close[0]}?" if close else f"use one of the {what}: {', '.join(names[:12])}"


# -- running the rules ---------------------------------------------------------------------
def validate_text(text: str, directory: Path | None = None, *, file: str = CONFIG_FILE) -> list[Finding]:
    """Every finding for one config text; `directory` (its model dir) enables the disk rules."""
    located = locate(text, file)
    if located.error is not None:
        return [_schema_finding(located.error, located, file)]
    return validate_config(located.config, directory, located=located, file=file)


def validate_config(config: ModelConfig, directory: Path | None = None, *, located: Located | None = None,
                    file: str = CONFIG_FILE) -> list[Finding]:
    context = Context(config, directory)
    findings = []
    for checker in RULES.values():
        for path, message, fix in _issues(checker, context):
            line, column = (located.position(path) if located else None) or (None, None)
            findings.append(Finding(checker.id, checker.severity, path, message, fix, line, column, file))
    order = list(Severity)
    return sorted(findings, key=lambda f: (order.index(f.severity), f.line or 0))


class ConfigInvalidError(RepositoryError):
    """The validator found errors in a config about to be written; `findings` are all of them."""

    def __init__(self, model: str, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        errors = [f for f in self.findings if f.severity is Severity.ERROR]
        first = errors[0]
        where = f" (line {first.line})" if first.line else ""
        more = f"; and {_plural(len(errors) - 1, 'more error')}" if len(errors) > 1 else ""
        super().__init__(f"the new config of {model!r} would not load: {first.message}{where} — "
                         f"{first.fix}{more}. Nothing was written")


def refuse_invalid(model: str, text: str, directory: Path | None) -> list[Finding]:
    """The findings of `text` as `model`'s config; raises ConfigInvalidError when any is an error."""
    findings = validate_text(text, directory)
    if any(f.severity is Severity.ERROR for f in findings):
        raise ConfigInvalidError(model, findings)
    return findings


def _issues(checker: Rule, context: Context) -> list[Issue]:
    try:
        return list(checker.check(context))
    except OSError as exc:
        return [("", f"cannot read {exc.filename or context.directory}: {exc.strerror or exc}",
                 "check the permissions of the model directory")]


@dataclass(frozen=True)
class ModelReport:
    name: str
    directory: Path
    findings: list[Finding] = field(default_factory=list)

    def count(self, severity: Severity) -> int:
        return sum(f.severity is severity for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "directory": str(self.directory),
                "config": str(self.directory / CONFIG_FILE), "findings": [f.to_dict() for f in self.findings]}


def validate_model(directory: Path) -> ModelReport:
    file = directory / CONFIG_FILE
    try:
        text = read_config_text(file)
    except RepositoryError as exc:
        finding = Finding("schema.unreadable", Severity.ERROR, "", str(exc),
                          f"write {file} (every model directory needs one for npu_ge)", file=str(file))
        return ModelReport(directory.name, directory, [finding])
    return ModelReport(directory.name, directory, validate_text(text, directory, file=str(file)))


def validate_path(path: Path) -> list[ModelReport]:
    """A config.pbtxt, a model directory (holds config.pbtxt) or a whole repository."""
    if path.is_file():
        return [validate_model(path.parent)]
    if not path.is_dir():
        raise RepositoryError(f"{path} does not exist" if not path.exists() else f"{path} is not a directory")
    if (path / CONFIG_FILE).exists() or any(_is_version(p.name) for p in path.iterdir() if p.is_dir()):
        return [validate_model(path)]
    models = [p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not models:
        raise RepositoryError(f"{path} is neither a model directory (no {CONFIG_FILE}) nor a repository "
                              "(no model directories in it)")
    return [validate_model(p) for p in models]


def summarize(reports: Sequence[ModelReport]) -> dict[str, Any]:
    """Counts, verdict (`fail` / `warnings` / `ok`) and a one-line headline for `reports`."""
    errors, warnings, infos = (sum(r.count(s) for r in reports) for s in Severity)
    failing, n = sum(r.count(Severity.ERROR) > 0 for r in reports), len(reports)
    models = f"{n} model{'s' * (n != 1)}"
    verdict = "fail" if errors else "warnings" if warnings else "ok"
    headline = {"fail": f"FAIL: {_plural(errors, 'error')} and {_plural(warnings, 'warning')}; {failing} of "
                        f"{models} would not load",
                "warnings": f"OK with warnings: {_plural(warnings, 'warning')} in {models}, no errors",
                "ok": f"OK: {models}, no errors or warnings"}[verdict]
    return {"verdict": verdict, "headline": headline, "errors": errors, "warnings": warnings, "infos": infos,
            "models_checked": n, "models_failing": failing}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def rule_catalogue() -> dict[str, tuple[str, str]]:
    """rule id -> (severity, summary), every layer."""
    return {**{k: ("error", v) for k, v in SCHEMA_RULES.items()},
            **{r.id: (r.severity.value, r.summary) for r in RULES.values()}}


# -- Triton's rules ------------------------------------------------------------------------
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
        if p.is_dir() and p.name.isascii() and p.name.isdigit() and not _is_version(p.name):
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
        if ctx.directory is not None and step.model_name:
            located = locate(_read_or_empty(ctx.directory.parent / step.model_name / CONFIG_FILE))
            config = located.config if located.error is None else None
        yield f"ensemble_scheduling.step[{i}]", step, config


def _read_or_empty(path: Path) -> str:
    try:
        return read_config_text(path)
    except RepositoryError:
        return "{"  # unreadable: reported when that model itself is validated


@rule("ensemble.step_model", Severity.ERROR, "a step names no model, or one not in the repository")
def _step_model(ctx: Context) -> Iterable[Issue]:
    for path, step, _ in _step_configs(ctx):
        repository = ctx.directory.parent if ctx.directory is not None else None
        if not step.model_name:
            yield (path, "the step names no model_name", "add model_name to the step")
        elif repository is not None and not (repository / step.model_name).is_dir():
            names = [p.name for p in repository.iterdir() if p.is_dir()]
            yield (f"{path}.model_name", f"step model {step.model_name!r} is not in {repository}",
                   _did_you_mean(step.model_name, names, "models in the repository"))


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
                           _did_you_mean(key, names, f"{what}s of {step.model_name}"))


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


# -- npu_ge: the checks of npu_ge_params, registered as rules ------------------------------
def _npu_ge_rule(check: npu_ge.Check) -> Callable[[Context], Iterable[Issue]]:
    def run(ctx: Context) -> Iterable[Issue]:
        return check(ctx.config, ctx.selected_versions) if npu_ge.is_npu_ge(ctx.config) else ()
    return run


for _name_, (_severity, _summary, _check) in npu_ge.CHECKS.items():
    RULES[f"npu_ge.{_name_}"] = Rule(f"npu_ge.{_name_}", Severity(_severity), _summary, _npu_ge_rule(_check))
