"""geadmin.diagnose.impact and geadmin.diagnose.state_changes without a server: how a prediction
reads, and which of Triton's log lines gives the reason a model changed state. The log lines are
Triton 2.51's own, recorded on the sample stack (tests/integration/test_consequences.py runs the
same against the real server)."""

from __future__ import annotations

from pathlib import Path

from geadmin.diagnose.impact import Consequence, Effect, Impact, index_states
from geadmin.diagnose.state_changes import StateChange, _logged_reasons
from geadmin.domain import ModelEntry, ModelState
from geadmin.triton.logs import LocalLogFile

# An apply of max_batch_size 16 to digits_classifier, as Triton 2.51 logged it (CPU-only host:
# every ensemble load also logs the CUDA stream error, which is not why it went down).
RELOAD_LOG = """\
I1204 12:33:48.326712 16207 model_lifecycle.cc:472] "loading: digits_pipeline:1"
E1204 12:33:48.326819 16207 ensemble_scheduler.cc:1468] "unable to create stream for digits_pipeline: CUDA \
driver version is insufficient for CUDA runtime version"
I1204 12:33:48.326863 16207 model_lifecycle.cc:839] "successfully loaded 'digits_pipeline'"
E1204 12:33:50.654568 16207 model_repository_manager.cc:703] "Invalid argument: ensemble digits_pipeline \
allows maximum batch size 32, but it contains model digits_classifier which only allows maximum batch size \
to be 16"
I1204 12:33:50.654607 16207 model_lifecycle.cc:624] "successfully unloaded 'digits_pipeline' version 1"
I1204 12:33:50.700000 16207 model_lifecycle.cc:839] "successfully loaded 'digits_classifier'"
"""


def test_the_reason_is_the_last_failure_logged_about_the_model_not_the_cuda_noise(tmp_path: Path) -> None:
    path = tmp_path / "tritonserver.log"
    path.write_text("")
    log = LocalLogFile(path)
    cursor = log.cursor()
    path.write_text(RELOAD_LOG)
    found = _logged_reasons(log, cursor, ["digits_pipeline", "text_normalize"])
    message, raw = found["digits_pipeline"]
    assert message == ("Invalid argument: ensemble digits_pipeline allows maximum batch size 32, but it "
                       "contains model digits_classifier which only allows maximum batch size to be 16")
    assert raw.startswith("E1204 12:33:50.654568")
    assert "text_normalize" not in found  # never mentioned: no invented reason


def test_only_lines_after_the_snapshot_count(tmp_path: Path) -> None:
    path = tmp_path / "tritonserver.log"
    path.write_text(RELOAD_LOG)
    log = LocalLogFile(path)
    assert _logged_reasons(log, log.cursor(), ["digits_pipeline"]) == {}
    assert _logged_reasons(None, None, ["digits_pipeline"]) == {}


def test_a_model_is_ready_when_any_version_is() -> None:
    entries = [ModelEntry("m", "1", ModelState.UNAVAILABLE, "unloaded"),
               ModelEntry("m", "2", ModelState.READY, ""),
               ModelEntry("e", "1", ModelState.UNAVAILABLE, "unloaded")]
    assert index_states(entries) == {"m": (ModelState.READY, ""), "e": (ModelState.UNAVAILABLE, "unloaded")}


def test_an_impact_names_what_goes_down_and_what_reloads() -> None:
    found = Impact("apply", ("digits_classifier",), (
        Consequence("digits_pipeline", Effect.REFUSED, "ensemble digits_pipeline allows maximum batch size "
                    "32, but ...", ("digits_pipeline", "digits_classifier")),
        Consequence("outer", Effect.UNLOADED, "it runs digits_pipeline, which Triton refuses",
                    ("outer", "digits_pipeline", "digits_classifier")),
        Consequence("side", Effect.RELOADED, "it runs digits_classifier", ("side", "digits_classifier"))))
    assert found.taken_down == ["digits_pipeline", "outer"] and found.takes_down
    assert found.headline() == ("this also takes down digits_pipeline, outer: Triton unloads them with "
                                "digits_classifier; Triton reloads side with it")
    assert found.lines()[1] == ("outer: unloaded with it (through digits_pipeline) — it runs "
                                "digits_pipeline, which Triton refuses")
    assert found.record()["consequences"][0]["effect"] == "refused"


def test_nothing_touched_reads_as_nothing() -> None:
    found = Impact("reload", ("text_normalize",))
    assert (found.headline(), found.lines(), found.takes_down) == ("", [], False)


def test_a_state_change_says_before_after_and_why() -> None:
    change = StateChange("digits_pipeline", ModelState.READY, ModelState.UNAVAILABLE, "Invalid argument: ...")
    assert change.lost_ready
    assert change.text() == "digits_pipeline: READY → UNAVAILABLE — Invalid argument: ..."
    back = StateChange("digits_pipeline", ModelState.UNAVAILABLE, ModelState.READY, "successfully loaded")
    assert not back.lost_ready


def test_a_model_loaded_again_is_never_explained_by_the_failure_noise_before_its_load(tmp_path: Path) -> None:
    """Issue 32: a rollback's side effect quoted Triton's CUDA line: the ensemble was loaded again,
    and the only failure logged about it was the stream noise before its successful load."""
    path = tmp_path / "tritonserver.log"
    path.write_text("")
    log = LocalLogFile(path)
    cursor = log.cursor()
    path.write_text("\n".join(RELOAD_LOG.splitlines()[:3]) + "\n")  # the CUDA line, then loaded
    message, raw = _logged_reasons(log, cursor, ["digits_pipeline"])["digits_pipeline"]
    assert message == "successfully loaded 'digits_pipeline'" and "CUDA" not in raw
