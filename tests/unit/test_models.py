"""Model-table rows, filters, details and ensemble graphs from configs (no server)."""

from __future__ import annotations

from datetime import datetime, timezone

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2, service_pb2

from geadmin.diagnose.details import io_records, stats_records
from geadmin.diagnose.ensemble import composing_models, ensemble_graph, graph_dot
from geadmin.diagnose.rows import filter_rows, instance_count, last_inference, model_rows
from geadmin.domain import Explanation, ModelEntry, ModelState
from geadmin.errors import (
    ExplainedLoadError,
    ForbiddenError,
    TritonRequestError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.ops.models.actions import next_step
from geadmin.repository.layout import read_model_config
from geadmin.repository.modelconfig import to_dict, to_pbtxt
from geadmin.stack.workspace import SAMPLE_REPOSITORY


def sample_config(name: str) -> model_config_pb2.ModelConfig:
    return read_model_config(SAMPLE_REPOSITORY, name)


def stats(name: str, version: str, last_ms: int) -> service_pb2.ModelStatistics:
    message = service_pb2.ModelStatistics(name=name, version=version, last_inference=last_ms,
                                          inference_count=7, execution_count=3)
    message.inference_stats.success.count = 2
    message.inference_stats.success.ns = 4_000_000
    return message


def test_rows_combine_index_configs_and_stats() -> None:
    index = [
        ModelEntry("b_model", "2", ModelState.UNAVAILABLE, "unloaded"),
        ModelEntry("b_model", "1", ModelState.READY, ""),
        ModelEntry("a_model", "", ModelState.NOT_LOADED, ""),
    ]
    configs = {"b_model": sample_config("digits_classifier")}
    rows = model_rows(index, configs, {"b_model": [stats("b_model", "1", 1_700_000_000_000)]})
    assert [r.name for r in rows] == ["a_model", "b_model"]
    a, b = rows
    assert (a.state, a.kind, a.max_batch_size, a.last_inference) == (ModelState.NOT_LOADED, "", None, None)
    assert b.versions == ("1", "2") and b.state is ModelState.READY  # best version wins
    assert (b.kind, b.max_batch_size, b.instance_count, b.dynamic_batching) == ("python", 32, 1, True)
    assert b.last_inference == datetime.fromtimestamp(1_700_000_000, tz=timezone.utc)
    record = b.record()
    assert record["versions"] == "1, 2" and record["last inference"].startswith("2023-11-14T22:13:20")


def test_filter_by_search_and_state() -> None:
    rows = model_rows([ModelEntry("digits_a", "1", ModelState.READY, ""),
                       ModelEntry("text", "1", ModelState.UNAVAILABLE, "boom in digits")], {}, {})
    assert [r.name for r in filter_rows(rows, "DIGITS")] == ["digits_a", "text"]  # name or reason
    assert [r.name for r in filter_rows(rows, "digits", [ModelState.READY])] == ["digits_a"]
    assert filter_rows(rows, "zzz") == []
    assert len(filter_rows(rows)) == 2


def test_instance_count() -> None:
    assert instance_count(sample_config("digits_pipeline")) == 0
    config = model_config_pb2.ModelConfig(name="m", backend="python")
    assert instance_count(config) == 1
    config.instance_group.add(count=2)
    config.instance_group.add(count=3, gpus=[0, 1])
    assert instance_count(config) == 2 + 6


def test_last_inference_never() -> None:
    assert last_inference([]) is None
    assert last_inference([stats("m", "1", 0)]) is None


def test_ensemble_graph_of_the_sample_pipeline() -> None:
    config = sample_config("digits_pipeline")
    graph = ensemble_graph(config)
    assert graph.steps == ("digits_preprocess", "digits_classifier", "digits_postprocess")
    edges = {(e.source, e.target, e.tensor) for e in graph.edges}
    assert ("in:IMAGE", "step0", "IMAGE") in edges
    assert ("step0", "step1", "features") in edges
    assert ("step1", "step2", "probabilities") in edges
    assert {("step2", f"out:{t}", t) for t in ("LABEL", "SCORE", "LABEL_NAME")} <= edges
    assert composing_models(config) == ["digits_classifier", "digits_postprocess", "digits_preprocess"]
    dot = graph_dot(graph)
    assert dot.startswith('digraph "digits_pipeline" {') and dot.endswith("}")
    assert '"step1" [label="digits_classifier", shape=box, style=rounded];' in dot


def test_graph_dot_quotes_odd_names() -> None:
    config = model_config_pb2.ModelConfig(name='we"ird', platform="ensemble")
    step = config.ensemble_scheduling.step.add(model_name="a b")
    step.input_map["x"] = 'in"put'
    dot = graph_dot(ensemble_graph(config))
    assert '"in:in\\"put" -> "step0" [label="in\\"put"];' in dot


def test_io_records_include_the_batch_dimension() -> None:
    records = io_records(sample_config("digits_pipeline"))
    assert records[0] == {"direction": "input", "name": "IMAGE", "dtype": "UINT8", "dims": "[-1, 8, 8]"}
    assert records[-1]["dtype"] == "STRING"
    unbatched = model_config_pb2.ModelConfig(name="m")
    unbatched.input.add(name="x", data_type=model_config_pb2.TYPE_FP16, dims=[3])
    assert io_records(unbatched)[0]["dims"] == "[3]"


def test_config_views_round_trip() -> None:
    config = sample_config("digits_classifier")
    assert text_format.Parse(to_pbtxt(config), model_config_pb2.ModelConfig()) == config
    assert to_dict(config)["dynamic_batching"]["preferred_batch_size"] == [8, 16]


def test_stats_records_average_milliseconds() -> None:
    (row,) = stats_records([stats("m", "1", 0)])
    assert row["avg request ms"] == 2.0 and row["avg queue ms"] is None
    assert (row["inferences"], row["executions"], row["success"]) == (7, 3, 2)


def test_next_step_per_error() -> None:
    assert "geadmin up" in next_step(TritonUnreachableError("x"))
    assert "admin key" in next_step(ForbiddenError("x"))
    assert "model repository" in next_step(ExplainedLoadError(Explanation("m", "e", "e")))
    assert "grpc://" in next_step(WrongProtocolError("x"))
    assert next_step(TritonRequestError("x"))
