"""An ensemble's bottleneck is its slowest member's: Triton sums the members' stages into the
ensemble's, so the card and `triage` point at the member to fix (pages in Triton 2.51's format;
`served_facts` against the real tritonserver serving the sample digits pipeline)."""

from __future__ import annotations

from geadmin.telemetry.bottleneck import (
    FIXES,
    BottleneckKind,
    find_bottlenecks,
    served_facts,
    window_label,
    with_traffic,
)
from geadmin.telemetry.derive import Window, derive
from geadmin.triton.client import TritonClient
from tests.support.metrics_pages import Counters, page

PIPELINE = ("pre", "cls")


def served(requests: int, queue_us: float, infer_us: float, host_us: float = 0.0) -> Counters:
    return Counters(success=requests, inferences=requests, executions=requests,
                    request_us=queue_us + infer_us + host_us, queue_us=queue_us,
                    compute_input_us=host_us / 2, compute_infer_us=infer_us, compute_output_us=host_us / 2)


def pipeline_window(*, cls_queue_us: float, pre_infer_us: float, cls_idle: bool = False) -> Window:
    """10 s in which 100 requests went through `pipe` = pre -> cls."""
    cls = Counters() if cls_idle else served(100, cls_queue_us, 50_000)
    pre = served(100, 1_000, pre_infer_us)
    pipe = served(100, 1_000 + (0 if cls_idle else cls_queue_us), pre_infer_us + 50_000)
    before = {"pipe": Counters(), "pre": Counters(), "cls": Counters()}
    after = {"pipe": pipe, "pre": pre, "cls": cls}
    return derive(page(before, timestamp_s=100.0), page(after, timestamp_s=110.0))


def verdicts(window: Window, ensembles=None):
    return {b.model: b for b in with_traffic(find_bottlenecks(window, None, ensembles))}


def test_an_ensemble_takes_its_slowest_members_verdict_and_names_it() -> None:
    window = pipeline_window(cls_queue_us=900_000, pre_infer_us=20_000)  # cls waits 9 ms per request
    found = verdicts(window, {"pipe": PIPELINE})
    pipe, cls = found["pipe"], found["cls"]
    assert cls.verdict is BottleneckKind.QUEUE_BOUND
    assert pipe.slow_member == "cls" and pipe.verdict is BottleneckKind.QUEUE_BOUND
    assert pipe.fix.startswith("its time is its members': cls takes")
    assert FIXES[BottleneckKind.QUEUE_BOUND] in pipe.fix and "cls:" in pipe.fix
    assert "slowest member cls: 9.50 ms" in pipe.why


def test_the_slow_member_follows_the_numbers_not_the_order() -> None:
    window = pipeline_window(cls_queue_us=0, pre_infer_us=3_000_000)  # pre computes 30 ms per request
    pipe = verdicts(window, {"pipe": PIPELINE})["pipe"]
    assert pipe.slow_member == "pre" and pipe.verdict is BottleneckKind.COMPUTE_BOUND
    assert "pre takes 98%" in pipe.fix  # 30.01 ms of 30.01 + 0.50 ms per request


def test_without_membership_an_ensemble_keeps_its_own_verdict() -> None:
    window = pipeline_window(cls_queue_us=900_000, pre_infer_us=20_000)
    pipe = verdicts(window)["pipe"]
    assert pipe.slow_member == "" and not pipe.fix.startswith("its time is its members'")


def test_an_ensemble_whose_members_show_no_traffic_says_so() -> None:
    window = pipeline_window(cls_queue_us=0, pre_infer_us=20_000, cls_idle=True)
    pipe = verdicts(window, {"pipe": ("cls",)})["pipe"]
    assert pipe.slow_member == "" and "members' (cls)" in pipe.fix and "one by one" in pipe.fix


def test_window_label_is_one_phrase() -> None:
    assert window_label(58.4) == "last 58 s"
    assert window_label(300) == "last 5 min"


def test_served_facts_reads_the_ensembles_and_queue_delays_from_the_served_configs(triton_server) -> None:
    client = TritonClient(triton_server.http_url)
    ensembles, delays = served_facts(client, ["digits_pipeline", "digits_classifier", "no_such_model"])
    assert list(ensembles) == ["digits_pipeline"]
    assert set(ensembles["digits_pipeline"]) >= {"digits_classifier"}
    assert delays == {"digits_classifier": 1.0}  # max_queue_delay_microseconds: 1000; the ensemble has none
