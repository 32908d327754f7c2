"""The Models table: one row per model with its state, reason and config facts.

Pure functions turn Triton's answers (index entries, ModelConfig and ModelStatistics
protobufs) into rows; `collect_rows` is the one that talks to Triton and the disk. A READY
model whose latest synthetic probe failed is "READY, NOT ANSWERING" (geadmin.ops.probe).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2, service_pb2

from geadmin.diagnose.ensemble import ENSEMBLE
from geadmin.diagnose.health import failure_reasons
from geadmin.domain import ModelEntry, ModelState
from geadmin.errors import ModelNotFoundError, RepositoryError, TritonError
from geadmin.repository.layout import read_model_config
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource


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
    probe_ok: bool | None = None  # the latest fresh synthetic probe answered; None: not probed
    probe_note: str = ""  # its latency, or its error
    # The last inference fell within one of geadmin's own probes (or, for a member, its
    # ensemble's): not traffic anyone sent. "Is this model used?" must not read the prober.
    last_inference_probe: bool = False

    @property
    def not_answering(self) -> bool:
        """READY but its latest probe got an error: a state of its own wherever states are shown."""
        return self.state is ModelState.READY and self.probe_ok is False

    @property
    def state_label(self) -> str:
        return "READY, NOT ANSWERING" if self.not_answering else self.state.value

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
            "last inference by probe": self.last_inference_probe,
            "answering": self.probe_ok,
            "probe": self.probe_note,
        }


    def table_record(self) -> dict[str, str]:
        """The row as a table shows it: short facts first and the long reason last (so the
        batching and last-inference columns stay in view), every cell a readable string — an
        ensemble runs no instances of its own, an unreadable config's facts are "unknown"."""
        unknown = "unknown"
        if self.is_ensemble:
            instances = "— (its members')"
        else:
            instances = unknown if self.instance_count is None else str(self.instance_count)
        batching = unknown if self.dynamic_batching is None else ("yes" if self.dynamic_batching else "no")
        return {
            "name": self.name,
            "state": self.state_label,
            "probe": self.probe_note or ("not probed" if self.state is ModelState.READY else ""),
            "versions": ", ".join(self.versions),
            "backend/platform": self.kind or "unknown",
            "max batch size": unknown if self.max_batch_size is None else str(self.max_batch_size),
            "instances": instances,
            "dynamic batching": "— (ensemble)" if self.is_ensemble else batching,
            "last inference": self.last_inference.strftime("%Y-%m-%d %H:%M:%S UTC")
            + (" (geadmin's probe)" if self.last_inference_probe else "") if self.last_inference else "never",
            "reason": self.reason,
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


def _config(client: TritonClient, name: str, repository: Path | None,
            state: ModelState) -> model_config_pb2.ModelConfig | None:
    """The normalized config when loaded, else config.pbtxt as written; None if neither."""
    if state is ModelState.READY:
        try:
            return client.model_config(name)
        except ModelNotFoundError:
            pass  # unloaded since the index was read
    if repository is None:
        return None
    try:
        return read_model_config(repository, name)
    except RepositoryError:
        return None  # its reason is the row's (failure_reasons reads the same file)


def collect_rows(client: TritonClient, repository: Path | None = None,
                 log: LogSource | None = None, *, home: Path | None = None) -> list[ModelRow]:
    """Everything the table shows, reasons led by the most specific finding (the same
    headline as the Overview's), and each model's latest fresh probe. Raises TritonError when
    the index cannot be read."""
    index = client.repository_index()
    states = {row.name: row.state for row in model_rows(index, {}, {})}
    configs = {name: config for name, state in states.items()
               if (config := _config(client, name, repository, state)) is not None}
    try:
        all_stats = client.model_statistics() if ModelState.READY in states.values() else []
    except TritonError:
        all_stats = []
    stats: dict[str, list[service_pb2.ModelStatistics]] = {}
    for s in all_stats:
        stats.setdefault(s.name, []).append(s)
    rows = model_rows(index, configs, stats)
    reasons = failure_reasons(index, log, repository)
    rows = [replace(row, reason=reasons[row.name]) if row.name in reasons else row for row in rows]
    return with_probes(rows, watch.fresh_probes(client.url, now_s=time.time(), home=home))


PROBE_SLACK_S = 0.05  # Triton's clock and the prober's are one host's; stamps are milliseconds
UNANSWERED_PROBE_S = 30.0  # a probe with no latency (failed or unanswered) may have run this long


def by_probe(at: datetime | None, probes: Iterable[ProbeRecord]) -> bool:
    """Whether an inference at `at` fell within one of these probes (sent, answered)."""
    if at is None:
        return False
    moment = at.timestamp()
    return any(p.at_s - PROBE_SLACK_S <= moment
               <= p.at_s + (p.latency_ms / 1000 if p.latency_ms is not None else UNANSWERED_PROBE_S)
               + PROBE_SLACK_S for p in probes if p.input != "held")


def with_probes(rows: Sequence[ModelRow], probes: Mapping[str, ProbeRecord]) -> list[ModelRow]:
    found = []
    for row in rows:
        row = replace(row, last_inference_probe=by_probe(row.last_inference, probes.values()))
        probe = probes.get(row.name)
        if probe is None or row.state is not ModelState.READY:
            found.append(row)
            continue
        error = probe.error.splitlines()[0] if probe.error else "?"
        note = (f"answers ({probe.latency_ms:.1f} ms)" if probe.ok and probe.latency_ms is not None
                else "answers" if probe.ok else f"fails: {error}")
        found.append(replace(row, probe_ok=probe.ok, probe_note=note))
    return found
