"""Broken npu_ge instances read from a /metrics page (the backend's own families; the live case
with a lost device in the ACL double: tests/backend/test_recovery.py)."""
from __future__ import annotations

from geadmin.diagnose.npu_ge_instances import broken_instances, read_broken
from geadmin.diagnose.verdict import VerdictRule, broken_reason
from geadmin.telemetry.sources.scrape import parse

PAGE = """# TYPE npu_ge_instance_device gauge
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_0",device="0"} 1
npu_ge_instance_device{model="resnet",version="1",instance="resnet_0_1",device="1"} 1
npu_ge_instance_device{model="bert",version="2",instance="bert_0_0",device="0"} 1
# TYPE npu_ge_instance_broken gauge
npu_ge_instance_broken{model="resnet",version="1",instance="resnet_0_0"} 1
npu_ge_instance_broken{model="resnet",version="1",instance="resnet_0_1"} 0
npu_ge_instance_broken{model="bert",version="2",instance="bert_0_0"} 1
"""


def test_a_broken_instance_is_counted_against_every_instance_of_its_version() -> None:
    resnet, bert = sorted(broken_instances(parse(PAGE)), key=lambda b: b.model, reverse=True)
    assert (resnet.model, resnet.broken, resnet.instances, resnet.none_left) == \
        ("resnet", ("resnet_0_0",), 2, False)
    assert "1 of 2 instances cannot execute" in resnet.text
    assert bert.none_left and "no instance left that can execute" in bert.text


def test_each_becomes_an_instance_broken_reason_whose_fix_fits_what_is_left() -> None:
    reasons = {b.model: broken_reason(b) for b in broken_instances(parse(PAGE))}
    assert {r.rule for r in reasons.values()} == {VerdictRule.INSTANCE_BROKEN}
    assert reasons["resnet"].fix.startswith("`geadmin models reload resnet`")
    assert "reset the NPU" in reasons["bert"].fix


def test_a_page_without_npu_ge_or_that_cannot_be_read_is_no_evidence_and_says_what_was_not_judged() -> None:
    assert broken_instances(parse('nv_inference_count{model="m",version="1"} 3\n')) == []
    broken, unjudged = read_broken("http://127.0.0.1:1/metrics")
    assert broken == [] and unjudged.startswith(
        "npu_ge's instance health is not judged: Triton's metrics page could not be read (")
