from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from geadmin.diagnose.health import ServerSnapshot, triage
from geadmin.domain import ModelEntry, ModelState
from geadmin.triton.logs import LocalLogFile

POLL_FAILED = 'E1202 15:47:42.313441 24257 model_repository_manager.cc:1460] "Poll failed for model directory'
LOG = f"""\
I1202 15:47:42.310000 24257 model_lifecycle.cc:472] "loading: fixed:1"
{POLL_FAILED} 'bad_cfg': failed to read text proto from /r/bad_cfg/config.pbtxt"
{POLL_FAILED} 'fixed': failed to read text proto"
I1202 15:48:00.000000 24257 model_lifecycle.cc:838] "successfully loaded 'fixed'"
E1202 15:48:01.000000 24257 model_lifecycle.cc:641] "failed to load 'crashy' version 1: Internal: boom"
"""


def snapshot(*models: ModelEntry) -> ServerSnapshot:
    return ServerSnapshot("s", "http://h:8000", "http", datetime.now(timezone.utc), live=True,
                          ready=True, models=models)


def test_triage_uses_the_log_for_models_the_index_only_calls_not_loaded(tmp_path: Path) -> None:
    log_file = tmp_path / "tritonserver.log"
    log_file.write_text(LOG)
    snap = snapshot(
        ModelEntry("bad_cfg", "", ModelState.NOT_LOADED, ""),
        ModelEntry("crashy", "1", ModelState.UNAVAILABLE, "Internal: boom"),
        ModelEntry("fixed", "1", ModelState.READY, ""),
        ModelEntry("spare", "", ModelState.NOT_LOADED, ""),
        ModelEntry("parked", "1", ModelState.UNAVAILABLE, "unloaded"),
        ModelEntry("warming", "1", ModelState.LOADING, ""),
    )
    found = triage(snap, LocalLogFile(log_file))
    assert [(m.name, reason) for m, reason in found.failed] == [
        ("crashy", "failed to load 'crashy' version 1: Internal: boom"),  # the log's fuller line
        ("bad_cfg", "Poll failed for model directory 'bad_cfg': failed to read text proto from "
                    "/r/bad_cfg/config.pbtxt"),  # no repository known: the log's line is all there is
    ]
    assert [m.name for m in found.changing] == ["warming"]
    assert [m.name for m in found.idle] == ["parked", "spare"]


def test_without_a_log_not_loaded_models_are_idle() -> None:
    found = triage(snapshot(ModelEntry("bad_cfg", "", ModelState.NOT_LOADED, "")), None)
    assert found.failed == [] and [m.name for m in found.idle] == ["bad_cfg"]


def test_a_line_belongs_to_the_model_it_names_first(tmp_path: Path) -> None:
    log_file = tmp_path / "tritonserver.log"
    log_file.write_text(
        'I1202 15:48:00.000000 1 model_lifecycle.cc:838] "successfully unloaded \'step\' version 1"\n'
        'E1202 15:48:01.000000 1 model_lifecycle.cc:641] "failed to load \'pipeline\' version 1: '
        "Invalid argument: ensemble 'pipeline' depends on 'step' which is not loaded\"\n"
    )
    snap = snapshot(
        ModelEntry("pipeline", "1", ModelState.UNAVAILABLE, ""),
        ModelEntry("step", "1", ModelState.UNAVAILABLE, "unloaded"),
    )
    found = triage(snap, LocalLogFile(log_file))
    assert [m.name for m, _ in found.failed] == ["pipeline"]
    assert "depends on 'step'" in found.failed[0][1]
    assert [m.name for m in found.idle] == ["step"]


def test_with_the_repository_a_config_that_does_not_parse_shows_the_parsers_line(tmp_path: Path) -> None:
    log_file = tmp_path / "tritonserver.log"
    log_file.write_text(LOG)
    repository = tmp_path / "repo"
    (repository / "bad_cfg" / "1").mkdir(parents=True)
    (repository / "bad_cfg" / "config.pbtxt").write_text(
        'name: "bad_cfg"\nbackend: "python"\ninput [{ name: "x" data_type: TYPE_FOO dims: [1] }]\n')
    found = triage(snapshot(ModelEntry("bad_cfg", "", ModelState.NOT_LOADED, "")), LocalLogFile(log_file),
                   repository)
    ((_, reason),) = found.failed
    assert reason.startswith(f"{repository / 'bad_cfg' / 'config.pbtxt'} does not parse: line 3, column ")
    assert 'no value named TYPE_FOO' in reason and "GEADMIN_REPOSITORY" not in reason


def test_counts_follow_the_groups_the_captions_show() -> None:
    snap = snapshot(ModelEntry("a", "1", ModelState.READY, ""),
                    ModelEntry("parked", "1", ModelState.UNAVAILABLE, "unloaded"),
                    ModelEntry("spare", "", ModelState.NOT_LOADED, ""))
    found = triage(snap)
    assert found.counts == {"ready": 1, "failed": 0, "loading / unloading": 0, "not loaded": 2}
    assert [m.name for m in found.idle] == ["parked", "spare"]
