"""Rules across models: an ensemble against the configs of the models it runs, checked the way
Triton checks it when it (re)loads the ensemble (`ValidateEnsembleConfig` in Triton core's
ensemble_utils.cc):

1. the ensemble's `max_batch_size` may not exceed a batching member's ("ensemble E allows
   maximum batch size 32, but it contains model M which only allows maximum batch size to
   be 16");
2. every key of a step's `input_map` / `output_map` is a tensor the member has;
3. one ensemble tensor has one data type and one shape wherever it flows (a batching model's
   shape is compared with the batch dimension added, so a non-batching member may take
   `[-1, 64]` where a batching one takes `[64]`); -1 matches any size.

`check_ensemble` is that check on any set of configs (the validator passes the files on
disk; geadmin.diagnose.impact passes Triton's live configs with one model replaced by its
new config). Importing this module registers two rules in geadmin.repository.rules.RULES:
`ensemble.member_max_batch_size` / `ensemble.tensor_shape` on an ensemble's own file, and
`ensemble.member_change` on a member's file: what its text would do to every ensemble on
disk that runs it. `backend_issues` flags a backend the server does not have; it needs the
server's backends, so the validator runs it only when the caller passes them
(`validate_text(..., backends=...)`, rule id `server.backend_unavailable`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2
from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.errors import RepositoryError
from geadmin.repository import triton_rules  # noqa: F401  (Triton's one-model rules register first)
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_text
from geadmin.repository.positions import locate
from geadmin.repository.rules import Context, Issue, Severity, did_you_mean, rule

ENSEMBLE = "ensemble"


class Kind:
    """What is wrong between an ensemble and a member (the finding's headline word)."""

    MAX_BATCH_SIZE = "max_batch_size"
    MISSING_TENSOR = "missing_tensor"
    DATA_TYPE = "data_type"
    SHAPE = "shape"
    MISSING_MODEL = "missing_model"


@dataclass(frozen=True)
class Mismatch:
    """One reason Triton refuses `ensemble` with these member configs."""

    ensemble: str
    member: str
    kind: str
    message: str  # in Triton's words where Triton has them
    ensemble_path: str  # in the ensemble's config
    member_path: str  # in the member's config ("" when the member lacks the field)
    fix: str
    other: str = ""  # the model the tensor was first inferred from (a type or shape clash)
    other_path: str = ""  # in that model's config
    member_fix: str = ""  # the fix seen from the member's config, where it differs from `fix`

    def involves(self, model: str) -> bool:
        return model in (self.member, self.other)

    def path_in(self, model: str) -> str:
        return self.member_path if model == self.member else self.other_path if model == self.other else ""


@dataclass(frozen=True)
class _Tensor:
    model: str
    batching: bool
    data_type: int
    dims: tuple[int, ...]
    path: str = ""  # in the config of `model`

    @property
    def full_dims(self) -> tuple[int, ...]:
        return (-1, *self.dims) if self.batching else self.dims


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b, strict=True))


def _consistent(seen: _Tensor, new: _Tensor) -> str:
    """Triton's ValidateTensorConsistency: "" or what differs."""
    if seen.data_type != new.data_type:
        return (f"inconsistent data type: {dtype_name(seen.data_type)} is inferred from model {seen.model} "
                f"while {dtype_name(new.data_type)} is inferred from model {new.model}")
    if not _dims_match(seen.dims, new.dims) and not _dims_match(seen.full_dims, new.full_dims):
        return (f"inconsistent shape: {list(seen.full_dims)} is inferred from model {seen.model} while "
                f"{list(new.full_dims)} is inferred from model {new.model}")
    return ""


def dtype_name(value: int) -> str:
    known = value in model_config_pb2.DataType.values()
    return str(model_config_pb2.DataType.Name(value)) if known else str(value)


def _dims(tensor: model_config_pb2.ModelInput | model_config_pb2.ModelOutput) -> tuple[int, ...]:
    return tuple(tensor.reshape.shape) if tensor.HasField("reshape") else tuple(tensor.dims)


def check_ensemble(ensemble: ModelConfig, members: Mapping[str, ModelConfig | None]) -> list[Mismatch]:
    """Every reason Triton would refuse `ensemble` given these member configs (a member that
    is absent from `members` or None is skipped: nothing is known about it)."""
    name, batching = ensemble.name, ensemble.max_batch_size > 0
    sides = (("input", ensemble.input), ("output", ensemble.output))
    tensors: dict[str, _Tensor] = {t.name: _Tensor(name, batching, t.data_type, _dims(t), f"{what}[{i}]")
                                   for what, declared in sides for i, t in enumerate(declared)}
    found: list[Mismatch] = []
    for i, step in enumerate(ensemble.ensemble_scheduling.step):
        member = members.get(step.model_name)
        if member is None:
            continue
        path = f"ensemble_scheduling.step[{i}]"
        if member.max_batch_size != 0 and member.max_batch_size < ensemble.max_batch_size:
            found.append(Mismatch(
                name, step.model_name, Kind.MAX_BATCH_SIZE,
                f"ensemble {name} allows maximum batch size {ensemble.max_batch_size}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {member.max_batch_size}",
                "max_batch_size", "max_batch_size",
                f"keep {step.model_name}'s max_batch_size at {ensemble.max_batch_size} or more, or lower "
                f"{name}'s max_batch_size to {member.max_batch_size}"))
        found += _step_tensors(name, path, step, member, tensors)
    return found


def _step_tensors(ensemble: str, path: str, step: model_config_pb2.ModelEnsembling.Step, member: ModelConfig,
                  tensors: dict[str, _Tensor]) -> Iterator[Mismatch]:
    batching = member.max_batch_size > 0
    for what, mapping, declared in (("input", step.input_map, member.input),
                                    ("output", step.output_map, member.output)):
        index = {t.name: i for i, t in enumerate(declared)}
        for key, value in sorted(mapping.items()):
            where = f"{path}.{what}_map[{json.dumps(key)}]"
            if key not in index:
                names = list(index)
                yield Mismatch(ensemble, step.model_name, Kind.MISSING_TENSOR,
                               f"in ensemble {ensemble}, ensemble tensor {value} is mapped "
                               f"{'to' if what == 'input' else 'from'} non-existing {what} {key} in model "
                               f"{step.model_name} (its {what}s: {', '.join(names) or 'none'})", where, what,
                               did_you_mean(key, names, f"{what}s of {step.model_name}") if names
                               else f"give {step.model_name} the {what} {key!r}",
                               member_fix=f"keep the {what} {key!r} that ensemble {ensemble} maps, or change "
                               f"its {what}_map in {ensemble} to the new name as well")
                continue
            tensor = declared[index[key]]
            node = _Tensor(step.model_name, batching, tensor.data_type, _dims(tensor),
                           f"{what}[{index[key]}]")
            seen = tensors.setdefault(value, node)
            problem = _consistent(seen, node) if seen is not node else ""
            if problem:
                kind = Kind.DATA_TYPE if problem.startswith("inconsistent data type") else Kind.SHAPE
                field = "data_type" if kind == Kind.DATA_TYPE else "dims"
                yield Mismatch(ensemble, step.model_name, kind,
                               f"in ensemble {ensemble}, ensemble tensor {value}: {problem}", where,
                               f"{what}[{index[key]}].{field}",
                               f"make {step.model_name}'s {what} {key!r} agree with {seen.model}",
                               seen.model, f"{seen.path}.{field}" if seen.path else "")


# -- the repository on disk --------------------------------------------------------------
def read_configs(repository: Path) -> dict[str, ModelConfig]:
    """Every config on disk that parses, by model directory name (unreadable ones skipped: the
    validator reports them on their own model)."""
    configs: dict[str, ModelConfig] = {}
    try:
        directories = sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return configs
    for directory in directories:
        try:
            located = locate(read_config_text(directory / CONFIG_FILE))
        except RepositoryError:
            continue
        if located.error is None:
            config = located.config
            if not config.name:
                config.name = directory.name
            configs[directory.name] = config
    return configs


def users_of(model: str, configs: Mapping[str, ModelConfig]) -> dict[str, tuple[str, ...]]:
    """Ensembles that run `model`, directly or through other ensembles: {ensemble: the chain
    from it down to `model`}, nearest first."""
    found: dict[str, tuple[str, ...]] = {}
    frontier: list[tuple[str, tuple[str, ...]]] = [(model, (model,))]
    while frontier:
        current, chain = frontier.pop(0)
        for name, config in sorted(configs.items()):
            if config.platform != ENSEMBLE or name in found or name == model:
                continue
            if any(step.model_name == current for step in config.ensemble_scheduling.step):
                found[name] = (name, *chain)
                frontier.append((name, (name, *chain)))
    return found


def direct_users(model: str, configs: Mapping[str, ModelConfig]) -> list[str]:
    return [name for name, chain in users_of(model, configs).items() if len(chain) == 2]


# -- rules ---------------------------------------------------------------------------------
def _on_disk(ctx: Context) -> dict[str, ModelConfig]:
    return read_configs(ctx.directory.parent) if ctx.directory is not None else {}


@rule("ensemble.member_max_batch_size", Severity.ERROR, "an ensemble max_batch_size above a member's")
def _member_max_batch_size(ctx: Context) -> Iterable[Issue]:
    if not ctx.is_ensemble or ctx.directory is None:
        return
    members: dict[str, ModelConfig | None] = dict(_on_disk(ctx))
    for m in check_ensemble(ctx.config, members):
        if m.kind == Kind.MAX_BATCH_SIZE:
            yield (m.ensemble_path, f"{m.message}: Triton refuses the ensemble", m.fix)


@rule("ensemble.tensor_shape", Severity.ERROR, "an ensemble tensor with two shapes along the ensemble")
def _tensor_shape(ctx: Context) -> Iterable[Issue]:
    if not ctx.is_ensemble or ctx.directory is None:
        return
    members: dict[str, ModelConfig | None] = dict(_on_disk(ctx))
    for m in check_ensemble(ctx.config, members):
        if m.kind == Kind.SHAPE:  # names and data types: ensemble.step_tensor and ensemble.dtype
            yield (m.ensemble_path, f"{m.message}: Triton refuses the ensemble", m.fix)


@rule("ensemble.member_change", Severity.ERROR, "this config would make an ensemble that runs it fail")
def _member_change(ctx: Context) -> Iterable[Issue]:
    """The edited model as a member: every ensemble on disk that runs it, checked with this text."""
    if ctx.directory is None:
        return
    model = ctx.directory.name
    configs = _on_disk(ctx)
    if not any(c.platform == ENSEMBLE for c in configs.values()):
        return
    members: dict[str, ModelConfig | None] = {**configs, model: ctx.config}
    users = users_of(model, configs)
    for ensemble in direct_users(model, configs):
        above = [name for name, chain in users.items() if ensemble in chain[1:-1]]
        also = (f" (and with it {', '.join(sorted(above))}, which run{'s' * (len(above) == 1)} it)"
                if above else "")
        for m in check_ensemble(configs[ensemble], members):
            if m.involves(model):
                fix = m.member_fix if model == m.member and m.member_fix else m.fix
                yield (m.path_in(model), f"{m.message}: Triton would unload ensemble {ensemble}{also}", fix)


BACKEND_RULE = "server.backend_unavailable"  # not in RULES: it needs the server's backends


def backend_issues(config: ModelConfig, backends: frozenset[str] | None) -> list[Issue]:
    """A backend this server does not have ([] when `backends` is unknown): Triton fails the load."""
    wanted = config.backend
    if backends is None or not wanted or wanted in backends:
        return []
    names = sorted(backends)
    return [("backend", f"backend {wanted!r} is not installed in this server (it has: {', '.join(names)}): "
             f"Triton fails the load (\"unable to find backend library for backend '{wanted}'\")",
             did_you_mean(wanted, names, "backends of this server") if names else "install the backend")]


def installed_backends(backend_directory: Path) -> frozenset[str]:
    """The backends in a Triton `--backend-directory`: each subdirectory holding
    `libtriton_<name>.so` (the python backend ships one too)."""
    try:
        return frozenset(p.name for p in backend_directory.iterdir()
                         if p.is_dir() and (p / f"libtriton_{p.name}.so").exists())
    except OSError:
        return frozenset()
