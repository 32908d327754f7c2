"""geadmin.diagnose.failure_text: a failure split into a one-line cause, the fix, what still
serves and Triton's log lines — never one long paragraph with log lines run together."""

from __future__ import annotations

from geadmin.diagnose.failure_text import HEADLINE_MAX, from_explanation, from_message, split_fix
from geadmin.domain import Explanation, LogLine, Serving
from geadmin.triton.logs import parse_log_line

LOG = (
    "E1204 11:57:02.101010 4242 model_lifecycle.cc:641] \"failed to load 'digits_classifier' version 1: "
    "Internal: RuntimeError: weights.bin is missing\"",
    "I1204 11:57:02.101999 4242 model_lifecycle.cc:776] \"failed to load 'digits_classifier'\"",
    "W1204 11:57:02.102500 4242 backend_model.cc:400] \"stub process for digits_classifier exited\"",
)
CAUSE = ("load of 'digits_classifier' failed: the model's initialize raised RuntimeError: weights.bin is "
         "missing in the version directory that Triton reads when it starts the python backend stub. "
         "Triton keeps the previous version, and every later reload fails the same way until the file is "
         "there; ")


def test_a_long_message_with_log_lines_run_together_becomes_cause_fix_and_log_lines() -> None:
    message = (CAUSE * 3 + " Triton log: " + " ".join(LOG)
               + "\n\n**Next step:** put weights.bin back, then load.")
    assert len(message) > 900
    failure = from_message(message)
    assert "\n" not in failure.headline and len(failure.headline) <= HEADLINE_MAX + 1
    assert failure.headline.startswith("load of 'digits_classifier' failed: the model's initialize")
    assert failure.fix == "put weights.bin back, then load"
    assert failure.log_lines == LOG  # verbatim, one each, out of the prose
    assert not any("model_lifecycle.cc" in line for line in (failure.headline, *failure.details))
    assert "weights.bin is missing in the version directory" in " ".join(failure.details)


def test_the_fix_given_is_used_only_when_the_message_has_none() -> None:
    assert from_message("Triton is unreachable", fix="start Triton.").fix == "start Triton"
    assert from_message("bad — fix: do this", fix="generic").fix == "do this"
    assert split_fix("cause\n\n**Next step:** step one.\nmore") == ("cause\n\n\nmore", "step one")


def test_a_short_message_stays_whole_on_one_line() -> None:
    failure = from_message("Triton at http://127.0.0.1:1 is unreachable: Connection refused")
    assert failure.headline == "Triton at http://127.0.0.1:1 is unreachable: Connection refused"
    assert failure.details == () and failure.log_lines == ()


def test_a_cause_too_long_for_one_line_without_a_sentence_end_is_cut_at_a_space() -> None:
    failure = from_message("x" * 30 + " " + "word " * 80)
    assert failure.headline.endswith("…") and len(failure.headline) <= HEADLINE_MAX + 1
    assert failure.details[0].startswith("…word")


def test_an_explanation_splits_reason_fix_serving_and_log() -> None:
    explanation = Explanation(
        model="digits_classifier",
        error="load model 'digits_classifier': failed to poll from model repository",
        reason="instance group digits_classifier_0 has kind KIND_GPU but no GPUs are available"
               " — fix: this Triton has no GPU: use instance_group [{ kind: KIND_CPU }]",
        log_lines=(*(parse_log_line(raw) for raw in LOG), LogLine("", "stub output", "stub output")),
        layout_problems=("no model.om in 1/",),
        serving=Serving.PREVIOUS, serving_version="1", log_description="log file /tmp/triton.log")
    failure = from_explanation(explanation, fix="load it again")
    assert failure.headline == ("instance group digits_classifier_0 has kind KIND_GPU but no GPUs are "
                                "available")
    assert failure.fix == "this Triton has no GPU: use instance_group [{ kind: KIND_CPU }]"
    assert failure.serving == "version 1 (the previously loaded one) is still serving"
    assert failure.details == ("Triton answered: load model 'digits_classifier': failed to poll from model "
                               "repository", "repository: no model.om in 1/")
    assert failure.log_lines == (*LOG, "stub output")
    assert failure.log_title == "Triton's log (log file /tmp/triton.log)"
    printed = failure.lines()  # the CLI: the cause first
    assert printed[0] == failure.headline and printed[1].startswith("  fix: this Triton has no GPU")
    assert printed[-len(LOG) - 2] == "  Triton's log (log file /tmp/triton.log):"


def test_an_explanation_without_a_fix_of_its_own_takes_the_one_given() -> None:
    explanation = Explanation(model="m", error="x", reason="failed to load 'm': boom",
                              serving=Serving.NOTHING)
    failure = from_explanation(explanation, fix="fix the cause, then load again.")
    assert failure.fix == "fix the cause, then load again"
    assert failure.serving == "the model is NOT serving"
