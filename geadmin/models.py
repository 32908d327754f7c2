"""The Models view and `geadmin models`: table rows, details, ensemble graphs, and actions.

Pure functions turn Triton's answers (index entries, ModelConfig and ModelStatistics
protobufs) into rows; `collect_rows` and `run_action` are the only ones that talk to Triton.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from geadmin import settings
from geadmin.errors import (
    ExplainedLoadError,
    ExplainedLoadTimeoutError,
    ForbiddenError,
    GeAdminError,
    ModelNotFoundError,
    TritonError,
    TritonTimeoutError,
    TritonUnreachableError,
)
from geadmin.explain import Explanation, is_model_name, load_explained
from geadmin.logsource import LogSource
from geadmin.overview import best_reason, log_failures
from geadmin.triton import ModelEntry, ModelState, TritonClient, model_config_pb2, service_pb2

SETTLE_TIMEOUT_S = 30.0  # how long an action waits for LOADING / UNLOADING to finish
ENSEMBLE = "ensemble"


# -- table -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelRow:
    name: str
    versions: tuple[str, ...]
    state: ModelState
    reason: str
    kind: str  # backend, else platform ("python", "ensemble", "npu_ge", ...); "" if unknown
    max_batch_size: int | None = None
    instance_count: int | None = None
    dynamic_batching: bool | None = None
    last_inference: datetime | None = None

    @property
    def is_ensemble(self) -> bool:
        return self.kind == ENSEMBLE

    def record(self) -> dict[str, Any]:
        """A flat dict for tables and JSON."""
        return {
            "name": self.name,
            "versions": ", ".join(self.versions),
            "state": self.state.value,
            "reason": self.reason,
            "backend/platform": self.kind,
            "max batch size": self.max_batch_size,
            "instances": self.instance_count,
            "dynamic batching": self.dynamic_batching,
            "last inference": self.last_inference.isoformat(timespec="seconds")
            if self.last_inference else "",
        }


_STATE_ORDER = {ModelState.READY: 0, ModelState.LOADING: 1, ModelState.UNLOADING: 2,
                ModelState.UNAVAILABLE: 3, ModelState.NOT_LOADED: 4}


def model_rows(
    index: Iterable[ModelEntry],
    configs: Mapping[str, model_config_pb2.ModelConfig],
    stats: Mapping[str, Sequence[service_pb2.ModelStatistics]],
) -> list[ModelRow]:
    """One row per model name; a model's state is that of its best version (READY first)."""
    by_name: dict[str, list[ModelEntry]] = {}
    for entry in index:
        by_name.setdefault(entry.name, []).append(entry)
    rows = []
    for name, entries in sorted(by_name.items()):
        best = min(entries, key=lambda e: _STATE_ORDER.get(e.state, 9))
        config = configs.get(name)
        rows.append(ModelRow(
            name=name,
            versions=tuple(sorted({e.version for e in entries if e.version}, key=_version_key)),
            state=best.state,
            reason=best.reason,
            kind=model_kind(config) if config else "",
            max_batch_size=config.max_batch_size if config else None,
            instance_count=instance_count(config) if config else None,
            dynamic_batching=config.HasField("dynamic_batching") if config else None,
            last_inference=last_inference(stats.get(name, ())),
        ))
    return rows


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (1 << 62, version)


def filter_rows(
    rows: Iterable[ModelRow], search: str = "", states: Iterable[ModelState] = ()
) -> list[ModelRow]:
    """Rows whose name or reason contains `search` (any case) and whose state is in `states`."""
    wanted = set(states)
    needle = search.strip().lower()
    return [row for row in rows
            if (not wanted or row.state in wanted)
            and (not needle or needle in row.name.lower() or needle in row.reason.lower())]


def model_kind(config: model_config_pb2.ModelConfig) -> str:
    return config.backend or config.platform


def instance_count(config: model_config_pb2.ModelConfig) -> int:
    """Instances Triton creates (an ensemble has none; a group without count has one)."""
    if config.platform == ENSEMBLE:
        return 0
    if not config.instance_group:
        return 1
    return sum(max(group.count, 1) * max(len(group.gpus), 1) for group in config.instance_group)


def last_inference(stats: Iterable[service_pb2.ModelStatistics]) -> datetime | None:
    """Latest `last_inference` (ms since the epoch; 0 = never) over the versions."""
    latest = max((s.last_inference for s in stats), default=0)
    return datetime.fromtimestamp(latest / 1000, tz=timezone.utc) if latest else None


# -- detail ----------------------------------------------------------------------------
def dtype_name(data_type: int) -> str:
    return str(model_config_pb2.DataType.Name(data_type)).removeprefix("TYPE_")


def io_records(config: model_config_pb2.ModelConfig) -> list[dict[str, Any]]:
    """Inputs and outputs; `dims` include the batch dimension (-1) when the model batches."""
    batch = [-1] if config.max_batch_size > 0 else []
    records = []
    for direction, tensors in (("input", config.input), ("output", config.output)):
        records += [{"direction": direction, "name": t.name, "dtype": dtype_name(t.data_type),
                     "dims": str(batch + list(t.dims))} for t in tensors]
    return records


def config_json(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def config_pbtxt(config: model_config_pb2.ModelConfig) -> str:
    return str(text_format.MessageToString(config))


def _avg_ms(duration: service_pb2.StatisticDuration) -> float | None:
    return round(duration.ns / duration.count / 1e6, 3) if duration.count else None


def stats_records(stats: Iterable[service_pb2.ModelStatistics]) -> list[dict[str, Any]]:
    """One row per version: counts and average milliseconds per phase."""
    rows = []
    for s in stats:
        inf = s.inference_stats
        rows.append({
            "version": s.version,
            "inferences": s.inference_count,
            "executions": s.execution_count,
            "success": inf.success.count,
            "fail": inf.fail.count,
            "avg request ms": _avg_ms(inf.success),
            "avg queue ms": _avg_ms(inf.queue),
            "avg input ms": _avg_ms(inf.compute_input),
            "avg infer ms": _avg_ms(inf.compute_infer),
            "avg output ms": _avg_ms(inf.compute_output),
            "last inference": last_inference([s]),
        })
    return rows


# -- ensembles -------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphEdge:
    source: str  # node id: "in:<tensor>", "step<i>", "out:<tensor>"
    target: str
    tensor: str


@dataclass(frozen=True)
class EnsembleGraph:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: tuple[str, ...]  # model names, in config order; node id "step<i>"
    edges: tuple[GraphEdge, ...] = field(default_factory=tuple)


def ensemble_graph(config: model_config_pb2.ModelConfig) -> EnsembleGraph:
    """Which step feeds which tensor to which step, from `ensemble_scheduling`."""
    inputs = tuple(t.name for t in config.input)
    outputs = tuple(t.name for t in config.output)
    producer = {tensor: f"in:{tensor}" for tensor in inputs}
    steps = config.ensemble_scheduling.step
    for i, step in enumerate(steps):
        for tensor in step.output_map.values():
            producer[tensor] = f"step{i}"
    edges = []
    for i, step in enumerate(steps):
        for tensor in sorted(step.input_map.values()):
            edges.append(GraphEdge(producer.get(tensor, f"in:{tensor}"), f"step{i}", tensor))
    edges += [GraphEdge(producer.get(tensor, f"in:{tensor}"), f"out:{tensor}", tensor) for tensor in outputs]
    return EnsembleGraph(config.name, inputs, outputs, tuple(s.model_name for s in steps), tuple(edges))


def composing_models(config: model_config_pb2.ModelConfig) -> list[str]:
    return sorted({step.model_name for step in config.ensemble_scheduling.step})


def graph_dot(graph: EnsembleGraph) -> str:
    """Graphviz DOT source (st.graphviz_chart renders it in the browser)."""
    q = json.dumps
    lines = [f"digraph {q(graph.name)} {{", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    lines += [f"  {q('in:' + t)} [label={q(t)}, shape=oval];" for t in graph.inputs]
    lines += [f"  {q(f'step{i}')} [label={q(m)}, shape=box, style=rounded];"
              for i, m in enumerate(graph.steps)]
    lines += [f"  {q('out:' + t)} [label={q(t)}, shape=oval];" for t in graph.outputs]
    lines += [f"  {q(e.source)} -> {q(e.target)} [label={q(e.tensor)}];" for e in graph.edges]
    return "\n".join([*lines, "}"])


# -- reading from Triton and disk ------------------------------------------------------
def repository_from_env() -> Path | None:
    """The served model repository (`GEADMIN_REPOSITORY`), or None when it is not known."""
    path = settings.env("REPOSITORY")
    return Path(path).expanduser() if path else None


def disk_config(repository: Path | None, name: str) -> model_config_pb2.ModelConfig | None:
    """config.pbtxt as written (not normalized); None if missing or unreadable."""
    if repository is None or not is_model_name(name):
        return None
    try:
        text = (repository / name / "config.pbtxt").read_text()
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except (OSError, UnicodeDecodeError, text_format.ParseError):
        return None


def model_config(client: TritonClient, name: str, repository: Path | None = None,
                 state: ModelState = ModelState.READY) -> model_config_pb2.ModelConfig | None:
    """The normalized config from Triton when loaded, else the file on disk."""
    if state is ModelState.READY:
        try:
            return client.model_config(name)
        except ModelNotFoundError:
            pass  # unloaded since the table was read: show the file
    return disk_config(repository, name)


def collect_rows(client: TritonClient, repository: Path | None = None) -> list[ModelRow]:
    """Everything the table shows. Raises TritonError when the index cannot be read."""
    index = client.repository_index()
    states = {row.name: row.state for row in model_rows(index, {}, {})}
    configs = {name: config for name, state in states.items()
               if (config := model_config(client, name, repository, state)) is not None}
    try:
        all_stats = client.model_statistics() if ModelState.READY in states.values() else []
    except TritonError:
        all_stats = []
    stats: dict[str, list[service_pb2.ModelStatistics]] = {}
    for s in all_stats:
        stats.setdefault(s.name, []).append(s)
    return model_rows(index, configs, stats)


# -- actions ---------------------------------------------------------------------------
class Action(str, enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"


@dataclass(frozen=True)
class ActionResult:
    name: str
    action: Action
    ok: bool
    message: str
    explanation: Explanation | None = None
    error: GeAdminError | None = None  # what failed, for the next step and exit codes


def with_log_reasons(rows: list[ModelRow], log: LogSource | None) -> list[ModelRow]:
    """Give rows that are not READY the error Triton logged for them last.

    The index has no reason at all for a model whose config Triton could not parse.
    """
    logged = log_failures(log, [r.name for r in rows if r.state is not ModelState.READY])
    return [replace(r, reason=best_reason(r.reason, logged[r.name])) if r.name in logged else r
            for r in rows]


def run_action(
    client: TritonClient,
    action: Action,
    names: Sequence[str],
    *,
    dependents: bool = False,
    log: LogSource | None = None,
    repository: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    settle_timeout_s: float = SETTLE_TIMEOUT_S,
) -> list[ActionResult]:
    """Apply `action` to each model in turn (a failure does not stop the others), then wait
    (bounded) until the models touched, dependents included, stop LOADING / UNLOADING."""
    results = []
    touched = list(names)
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        if action is Action.UNLOAD and dependents:
            touched += _composing(client, name)
        results.append(_run_one(client, action, name, dependents, log, repository))
    if progress is not None:
        progress(len(names), len(names), "")
    if wait_settled(client, touched, settle_timeout_s):
        return results
    return [_still_moving(result, settle_timeout_s) if result.ok else result for result in results]


def _still_moving(result: ActionResult, timeout_s: float) -> ActionResult:
    """Triton accepted the action but the model had not settled: not "ended as asked"."""
    message = (f"{result.action.value} of {result.name!r} was accepted, but the model was still "
               f"loading or unloading after {timeout_s:.0f}s (or its state could not be read); "
               "check it again in a moment")
    return replace(result, ok=False, message=message, error=TritonTimeoutError(message))


def _composing(client: TritonClient, name: str) -> list[str]:
    try:
        return composing_models(client.model_config(name))
    except TritonError:
        return []


def _run_one(client: TritonClient, action: Action, name: str, dependents: bool,
             log: LogSource | None, repository: Path | None) -> ActionResult:
    try:
        if action is Action.UNLOAD:
            client.unload(name, dependents=dependents)
            extra = " and the models only it used" if dependents else ""
            return ActionResult(name, action, True, f"unloaded {name!r}{extra}")
        load_explained(client, name, log=log, repository=repository)
        return ActionResult(name, action, True, f"{action.value}ed {name!r}")
    except (ExplainedLoadError, ExplainedLoadTimeoutError) as exc:
        return ActionResult(name, action, False, str(exc), exc.explanation, exc)
    except GeAdminError as exc:
        return ActionResult(name, action, False, str(exc), error=exc)


def wait_settled(client: TritonClient, names: Sequence[str], timeout_s: float) -> bool:
    """Poll the index until none of `names` is LOADING / UNLOADING (Triton's HTTP unload
    answers before the model is gone). False if still moving after `timeout_s`."""
    moving = {ModelState.LOADING, ModelState.UNLOADING}
    deadline = time.monotonic() + timeout_s
    wanted = set(names)
    while True:
        try:
            states = {e.state for e in client.repository_index() if e.name in wanted}
        except TritonError:
            return False
        if not states & moving:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


FIX_AND_RETRY = "fix the cause in the model repository or Triton, then retry."


def next_step(error: GeAdminError) -> str:
    """What an operator should do about `error` (pages put it under the message)."""
    if isinstance(error, (ExplainedLoadError, ExplainedLoadTimeoutError)):
        return "fix the cause above in the model repository, then load the model again"
    if isinstance(error, TritonUnreachableError):
        return "start Triton (`geadmin up`) or check the server URL (GEADMIN_TRITON_URL)"
    if isinstance(error, ForbiddenError):
        return "set the admin key (GEADMIN_ADMIN_KEY, or admin_key in the servers file)"
    if isinstance(error, TritonTimeoutError):
        return "Triton is slow or stuck: retry, and read its log"
    return "check the message above and Triton's log"
