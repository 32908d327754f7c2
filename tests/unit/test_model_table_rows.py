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
