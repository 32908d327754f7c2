"""How the Models table (and `geadmin models`) shows a row: short facts before the long
reason, an ensemble without "instances 0", a failed model's unreadable facts as "unknown"."""

from __future__ import annotations

from tritonclient.grpc import service_pb2

from geadmin.cli.models import render_table
from geadmin.diagnose.rows import model_rows
from geadmin.domain import ModelEntry, ModelState
from geadmin.repository.layout import read_model_config
from geadmin.stack.workspace import SAMPLE_REPOSITORY


def rows():
    index = [ModelEntry("digits_pipeline", "1", ModelState.READY, ""),
             ModelEntry("digits_classifier", "1", ModelState.READY, ""),
             ModelEntry("broken", "1", ModelState.UNAVAILABLE, "failed to parse config.pbtxt line 6: "
                        "unknown enum value TYPE_FOO " + "x" * 300)]
    configs = {name: read_model_config(SAMPLE_REPOSITORY, name)
               for name in ("digits_pipeline", "digits_classifier")}
    stats = {"digits_classifier": [service_pb2.ModelStatistics(name="digits_classifier", version="1",
                                                               last_inference=1_700_000_000_000)]}
    return {row.name: row for row in model_rows(index, configs, stats)}


def test_reason_is_the_last_column_so_batching_and_last_inference_stay_in_view() -> None:
    columns = list(rows()["broken"].table_record())
    assert columns[-1] == "reason"
    assert columns.index("dynamic batching") < columns.index("reason")
    assert columns.index("last inference") < columns.index("reason")


def test_an_ensemble_shows_no_instance_count_of_its_own() -> None:
    record = rows()["digits_pipeline"].table_record()
    assert record["instances"] != "0" and "members" in record["instances"]
    assert record["backend/platform"] == "ensemble"


def test_a_failed_model_shows_unknown_not_none() -> None:
    record = rows()["broken"].table_record()
    assert record["max batch size"] == "unknown" and record["instances"] == "unknown"
    assert "None" not in record.values() and record["last inference"] == "never"


def test_a_loaded_model_shows_its_facts_as_text() -> None:
    record = rows()["digits_classifier"].table_record()
    assert (record["max batch size"], record["instances"], record["dynamic batching"]) == ("32", "1", "yes")
    assert record["last inference"] == "2023-11-14 22:13:20 UTC"


def test_cli_table_shows_the_same_cells() -> None:
    text = render_table(list(rows().values()))
    assert "None" not in text and "members'" in text and "unknown" in text


def _served_at(name: str, at_ms: int) -> service_pb2.ModelStatistics:
    return service_pb2.ModelStatistics(name=name, version="1", last_inference=at_ms)


def test_a_last_inference_that_was_geadmins_probe_says_so_and_real_traffic_does_not() -> None:
    """'Is this model used?' must not read the prober: a model whose last inference fell within a
    probe (its own, or its ensemble's for a member) says so; one served after the probe does not."""
    from geadmin.diagnose.rows import with_probes
    from geadmin.telemetry.history.watch import ProbeRecord

    index = [ModelEntry(n, "1", ModelState.READY, "") for n in ("pipeline", "member", "used", "held")]
    stats = {"pipeline": [_served_at("pipeline", 1_000_000_012)],
             "member": [_served_at("member", 1_000_000_020)],  # inside the pipeline's probe
             "used": [_served_at("used", 1_000_002_000)],  # two seconds after its probe answered
             "held": [_served_at("held", 1_000_005_000)]}
    probes = {"pipeline": ProbeRecord("s", "pipeline", 1_000_000.0, True, 30.0),
              "used": ProbeRecord("s", "used", 1_000_000.1, True, 2.0),
              # no request went out for a held probe: nothing it covers is the prober's
              "held": ProbeRecord("s", "held", 1_000_004.99, False, None, "still waits", "held")}
    rows = {r.name: r for r in with_probes(model_rows(index, {}, stats), probes)}
    assert rows["pipeline"].last_inference_probe and rows["member"].last_inference_probe
    assert not rows["used"].last_inference_probe and not rows["held"].last_inference_probe
    assert rows["member"].table_record()["last inference"].endswith(" UTC (geadmin's probe)")
    assert rows["used"].table_record()["last inference"].endswith(" UTC")
    assert rows["member"].record()["last inference by probe"] is True
