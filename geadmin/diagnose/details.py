"""One model in detail: its inputs and outputs, statistics, and the config to show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2, service_pb2

from geadmin.diagnose.rows import last_inference
from geadmin.domain import ModelState
from geadmin.errors import ModelNotFoundError, RepositoryError
from geadmin.repository.layout import read_model_config
from geadmin.repository.modelconfig import dtype_name
from geadmin.triton.client import TritonClient


def io_records(config: model_config_pb2.ModelConfig) -> list[dict[str, Any]]:
    """Inputs and outputs; `dims` include the batch dimension (-1) when the model batches."""
    batch = [-1] if config.max_batch_size > 0 else []
    records = []
    for direction, tensors in (("input", config.input), ("output", config.output)):
        records += [{"direction": direction, "name": t.name, "dtype": dtype_name(t.data_type),
                     "dims": str(batch + list(t.dims))} for t in tensors]
    return records


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


@dataclass(frozen=True)
class ShownConfig:
    """The config the detail view shows, and where it came from."""

    config: model_config_pb2.ModelConfig | None
    normalized: bool  # Triton's normalized config (loaded) vs config.pbtxt as written
    problem: str = ""  # why there is none: "does not parse: line 3 ...", "repository unknown"


def shown_config(client: TritonClient, name: str, repository: Path | None = None,
                 state: ModelState = ModelState.READY) -> ShownConfig:
    """The normalized config from Triton when loaded, else the file on disk."""
    if state is ModelState.READY:
        try:
            return ShownConfig(client.model_config(name), normalized=True)
        except ModelNotFoundError:
            pass  # unloaded since the table was read: show the file
    if repository is None:
        return ShownConfig(None, False, "the served repository is not known here (geadmin up sets it; "
                           "else pass --repository or set GEADMIN_REPOSITORY)")
    try:
        return ShownConfig(read_model_config(repository, name), normalized=False)
    except RepositoryError as exc:
        return ShownConfig(None, False, str(exc))
