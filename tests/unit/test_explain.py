"""The explainer's headline and summary, and the advice table (no server)."""

from __future__ import annotations

import re
from dataclasses import replace

from geadmin.diagnose import advice
from geadmin.diagnose.explain import explanation_dict, headline, log_reason
from geadmin.domain import Explanation, Serving
from geadmin.triton.logs import parse_log_line

POLL_FAILED = ('E1202 15:32:37.818934 7152 model_repository_manager.cc:1460] "Poll failed for model '
               "directory 'digits_classifier': unexpected platform type 'graph_executor' for "
               'digits_classifier"')
INIT_FAILED = ('E1202 15:33:03.426784 7152 model_lifecycle.cc:642] "failed to load \'text_normalize\' '
               'version 1: Internal: RuntimeError: boom\\n\\nAt:\\n  /tmp/x/1/model.py(4): initialize\\n"')


PARSE_FAILED = ('E1203 07:00:00.0 1 model_repository_manager.cc:1460] "Poll failed for model directory '
                "'m': failed to read text proto from /r/m/config.pbtxt\"")
LAYOUT_PARSE = ("/r/m/config.pbtxt does not parse: line 12, column 15: Enum type \"inference.DataType\" "
                "has no value named TYPE_FOO.")


def test_log_reason_prefers_failures_and_cuts_the_traceback() -> None:
    lines = (parse_log_line('W1203 07:00:00.0 1 a.cc:1] "text_normalize warn"'), parse_log_line(INIT_FAILED))
    assert log_reason(lines) == "failed to load 'text_normalize' version 1: Internal: RuntimeError: boom"
    assert headline(lines, (), "api said no") == log_reason(lines)


def test_headline_falls_back_to_layout_then_api() -> None:
    assert headline((), ("no config.pbtxt in /r/m",), "api") == "no config.pbtxt in /r/m"
    assert headline((), (), "api") == "api"


def test_the_parsers_line_and_column_beat_triton_generic_read_failure() -> None:
    lines = (parse_log_line(PARSE_FAILED),)
    assert headline(lines, (LAYOUT_PARSE,), "failed to poll from model repository") == LAYOUT_PARSE


def test_graph_executor_leads_with_its_fix_and_the_missing_file() -> None:
    layout = ('platform \'graph_executor\' is not a Triton platform (older Ascend guides write it): '
              'replace it with backend: "npu_ge" in /r/m/config.pbtxt',
              "no model.om or model.onnx or model.pb in /r/m/1 (the 'npu_ge' backend loads it); it holds "
              "model.graphdef")
    reason = headline((parse_log_line(POLL_FAILED),), layout, "failed to poll")
    assert reason.startswith("platform 'graph_executor'") and "it holds model.graphdef" in reason


def test_known_reasons_get_their_fix() -> None:
    missing = "unable to find backend library for backend 'npu_ge', try specifying runtime on the model"
    assert "npu_ge backend is not installed in this Triton" in advice.with_fix(missing)
    assert "make backend" in advice.with_fix(missing)
    other = advice.with_fix("unable to find backend library for backend 'onnxruntime'")
    assert "backend 'onnxruntime' is not installed" in other
    stub = advice.with_fix("Failed to preinitialize Python stub: Python model file not found in /r/m.py")
    assert "add model.py" in stub and "restart Triton" in stub
    assert advice.with_fix(advice.with_fix(missing)) == advice.with_fix(missing)  # once only
    assert advice.with_fix("something new") == "something new"


def test_every_known_fix_matches_its_own_example() -> None:
    examples = {
        "npu_ge'?": "unable to find backend library for backend 'npu_ge'",
        "([": "unable to find backend library for backend 'x'",
        "Python model file": "Python model file not found in /x",
        "KIND_GPU": "instance group m_0 of model m has kind KIND_GPU but no GPUs are available",
        "graph_executor": "unexpected platform type 'graph_executor' for m",
        "libascendcl": "cannot load the ACL runtime libascendcl.so (CANN toolkit)",
        "the reload after": "Triton had not answered the reload after the load timeout (2 min)",
        "the load after": "Triton had not answered the load after the load timeout (2 min)",
        "no model directory": "no model directory /r/m",
    }
    for pattern, fix in advice.KNOWN_FIXES:
        example = next(text for key, text in examples.items() if key in pattern.pattern)
        assert re.search(pattern, example), pattern.pattern
        assert advice.fix_for(example) and fix, pattern.pattern
        first = next(p for p, _ in advice.KNOWN_FIXES if p.search(example))
        assert first is pattern, f"{pattern.pattern}: {first.pattern} comes first and takes its example"


def test_summary_leads_with_the_reason_says_what_serves_and_where_the_log_is() -> None:
    lines = (parse_log_line(POLL_FAILED),)
    explanation = Explanation("m", "failed to poll", reason=headline(lines, (), "failed to poll"),
                              log_lines=lines, serving=Serving.PREVIOUS, serving_version="3",
                              log_description="log file /x")
    text = explanation.summary()
    assert text.splitlines()[0].startswith("load of 'm' failed: Poll failed")
    assert "Triton answered: failed to poll" in text
    assert "version 3 (the previously loaded one) is still serving" in text
    assert "Triton log (log file /x)" in text
    no_log = Explanation("m", "x", "x", serving=Serving.UNKNOWN, serving_error="timed out").summary()
    assert "GEADMIN_TRITON_LOG" in no_log
    assert "could not check whether the model is serving: timed out" in no_log
    assert explanation_dict(explanation)["serving"] == "PREVIOUS"


def test_a_hung_load_says_it_is_stuck_in_its_first_line() -> None:
    text = Explanation("h", "still LOADING", "Failed to preinitialize Python stub", hung=True,
                       elapsed_s=0.7).summary()
    assert text.splitlines()[0].startswith("load of 'h' is stuck: Triton keeps it LOADING")


def test_the_next_step_of_a_load_still_running_is_to_watch_it_not_to_fix_a_cause() -> None:
    from geadmin.errors import ExplainedLoadTimeoutError
    from geadmin.ops.models.actions import next_step

    running = Explanation("m", "load model 'm': Triton at http://h:8000 did not answer in time",
                          reason="r", timed_out=True)
    assert next_step(ExplainedLoadTimeoutError(running)).startswith("watch its state (it stays LOADING until")
    reload = replace(running, serving=Serving.PREVIOUS)  # the index says READY all along
    said = next_step(ExplainedLoadTimeoutError(reload))
    assert said.startswith("the previous version serves meanwhile and the Overview names the model")
    stuck = Explanation("m", "still LOADING after: boom", reason="boom", timed_out=True, hung=True)
    assert next_step(ExplainedLoadTimeoutError(stuck)).startswith("fix the cause above")
