"""The fault watcher and geadmin's exporter: what the sampler records at each read, on real
SQLite and prometheus_client (the reports are built by hand: tests/support/fault_reports.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from geadmin.diagnose.npu_faults import FaultReport, ModelHit
from geadmin.errors import TelemetryError
from geadmin.ops.npu.watch import FaultWatcher
from geadmin.telemetry.alerting.exporter import GeadminCollector
from geadmin.telemetry.alerting.fault_metrics import FAULT_FRESH_S
from geadmin.telemetry.history.sampler import Sampler, SamplerOptions
from geadmin.telemetry.sources.fault_table import FaultLevel
from tests.support.fault_reports import HBM_ECC, NOT_HANDLE, impact, report

SERVER = "http://127.0.0.1:8000"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(home: Path, now: float) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GeadminCollector(home, clock=lambda: now))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith(("geadmin_npu_fault", "geadmin_model_instances"))}


def labels(**given: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(given.items()))


class Reports:
    """The reports a watcher is handed, one per read, in order (the faults the sources said)."""

    def __init__(self, *reports: FaultReport) -> None:
        self.left = list(reports)
        self.asked: list[float] = []

    def __call__(self, now_s: float) -> FaultReport:
        self.asked.append(now_s)
        return self.left.pop(0)


RESNET_HALF = ModelHit("resnet", instances_total=2, instances_lost=1, ensembles=("pipeline",), on_chip=1)
BERT_ALL = ModelHit("bert", instances_total=1, instances_lost=1, on_chip=1)


def test_the_exporter_says_each_present_fault_and_what_each_model_lost(tmp_path: Path) -> None:
    faulted = report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU, node="node-a", hits=[RESNET_HALF, BERT_ALL]),
                     impact(5, NOT_HANDLE, FaultLevel.NOT_HANDLE, node="node-a",
                            hits=[ModelHit("ocr", 1, 0)]),
                     impact(6, HBM_ECC, FaultLevel.RESTART_NPU, node="node-a", present=False,
                            hits=[BERT_ALL]))
    FaultWatcher(SERVER, Reports(faulted), home=tmp_path, clock=lambda: 100.0).run()
    found = scrape(tmp_path, 110.0)
    assert found[("geadmin_npu_fault", labels(node="node-a", npu="3", code="0x80E01801",
                                               level="RestartNPU"))] == 1.0
    assert found[("geadmin_npu_fault", labels(node="node-a", npu="5", code="0x80E21007",
                                               level="NotHandleFault"))] == 1.0
    assert not [k for k in found if ("npu", "6") in k[1]], "a cleared fault is not exported"
    assert found[("geadmin_npu_fault_instances_lost", labels(server=SERVER, model="resnet", node="node-a",
                                                              npu="3", code="0x80E01801",
                                                              level="RestartNPU"))] == 1.0
    assert found[("geadmin_model_instances", labels(server=SERVER, model="resnet", node="node-a"))] == 2.0
    lost = "geadmin_model_instances_lost"
    assert found[(lost, labels(server=SERVER, model="resnet", node="node-a"))] == 1.0
    assert found[(lost, labels(server=SERVER, model="bert", node="node-a"))] == 1.0
    assert not [k for k in found if ("model", "ocr") in k[1]], "a NotHandleFault takes nothing"


def test_a_model_with_no_healthy_instance_left_is_exported_as_all_lost(tmp_path: Path) -> None:
    # two chips each took one of the model's two instances: each hit says 2 lost, 0 left
    both = ModelHit("resnet", instances_total=2, instances_lost=2)
    faulted = report(impact(0, HBM_ECC, FaultLevel.SEPARATE_NPU, hits=[both]),
                     impact(1, None, FaultLevel.UNKNOWN, counts=True, healthy=False, hits=[both]))
    FaultWatcher(SERVER, Reports(faulted), home=tmp_path, clock=lambda: 100.0).run()
    found = scrape(tmp_path, 100.0)
    assert found[("geadmin_model_instances_lost", labels(server=SERVER, model="resnet", node=""))] == 2.0
    assert found[("geadmin_model_instances", labels(server=SERVER, model="resnet", node=""))] == 2.0
    assert found[("geadmin_npu_fault", labels(node="", npu="1", code="none", level="unknown"))] == 1.0


def test_each_chip_says_what_it_took_and_the_model_what_it_lost_in_all(tmp_path: Path) -> None:
    """One instance on chip 0, one on chip 1, two on chip 2; chips 0 and 1 faulted: each hit says
    the model lost 2. The per-chip figure said 2 on each chip (4 of 4: summed, the model read as
    DOWN)."""
    def hit() -> ModelHit:
        return ModelHit("m", instances_total=4, instances_lost=2, devices=(0, 1, 2), on_chip=1)
    faulted = report(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, hits=[hit()]),
                     impact(1, HBM_ECC, FaultLevel.RESTART_NPU, hits=[hit()]))
    FaultWatcher(SERVER, Reports(faulted), home=tmp_path, clock=lambda: 100.0).run()
    found = scrape(tmp_path, 100.0)
    per_chip = {dict(k[1])["npu"]: v for k, v in found.items() if k[0] == "geadmin_npu_fault_instances_lost"}
    assert per_chip == {"0": 1.0, "1": 1.0}
    assert found[("geadmin_model_instances_lost", labels(server=SERVER, model="m", node=""))] == 2.0


def test_an_unknown_code_on_a_healthy_chip_is_shown_but_takes_no_instance(tmp_path: Path) -> None:
    shown = report(impact(2, 0x1234, FaultLevel.UNKNOWN, counts=False, healthy=True, hits=[RESNET_HALF]))
    FaultWatcher(SERVER, Reports(shown), home=tmp_path, clock=lambda: 100.0).run()
    found = scrape(tmp_path, 100.0)
    assert found[("geadmin_npu_fault", labels(node="", npu="2", code="0x00001234", level="unknown"))] == 1.0
    assert not [k for k in found if k[0].startswith("geadmin_model_instances")]


def test_the_watcher_records_across_reads_and_a_cleared_fault_goes_at_the_next(tmp_path: Path) -> None:
    now = [100.0]
    present = report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU, hits=[RESNET_HALF]))
    cleared = report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU, present=False, hits=[RESNET_HALF]))
    reports = Reports(present, present, cleared)
    watcher = FaultWatcher(SERVER, reports, home=tmp_path, every_s=10.0, clock=lambda: now[0])
    key = ("geadmin_npu_fault", labels(node="", npu="3", code="0x80E01801", level="RestartNPU"))
    assert watcher.run() is present
    now[0] = 105.0
    assert watcher.run() is None, "not due: the sources are not read on every 2 s tick"
    assert reports.asked == [100.0]
    now[0] = 111.0
    watcher.run()
    assert key in scrape(tmp_path, 112.0)
    now[0] = 122.0
    watcher.run()
    found = scrape(tmp_path, 123.0)
    assert key not in found
    assert not [k for k in found if k[0].startswith("geadmin_model_instances")]


def test_rows_the_watcher_stopped_writing_are_dropped_so_alerts_resolve(tmp_path: Path) -> None:
    present = report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU, hits=[RESNET_HALF]))
    FaultWatcher(SERVER, Reports(present), home=tmp_path, clock=lambda: 100.0).run()
    assert scrape(tmp_path, 100.0 + FAULT_FRESH_S - 1)
    assert scrape(tmp_path, 100.0 + FAULT_FRESH_S + 1) == {}


def test_one_server_s_read_leaves_another_server_s_faults_alone(tmp_path: Path) -> None:
    FaultWatcher("http://a:8000", Reports(report(impact(1, HBM_ECC, FaultLevel.RESTART_NPU, node="a"))),
                 home=tmp_path, clock=lambda: 100.0).run()
    FaultWatcher("http://b:8000", Reports(report()), home=tmp_path, clock=lambda: 100.0).run()
    assert ("geadmin_npu_fault", labels(node="a", npu="1", code="0x80E01801", level="RestartNPU")) in scrape(
        tmp_path, 101.0)


def test_a_watcher_that_cannot_read_is_one_reported_problem_and_the_sampler_ticks_on(
        tmp_path: Path) -> None:
    def unreadable(now_s: float) -> FaultReport:
        raise TelemetryError("npu-exporter at http://127.0.0.1:9/metrics does not answer")

    said: list[str] = []
    watcher = FaultWatcher(SERVER, unreadable, home=tmp_path, every_s=0.0)
    sampler = Sampler(SamplerOptions("http://127.0.0.1:9/metrics", tmp_path), say=said.append,
                      watchers=[watcher.run])
    assert sampler._watch() == "NPU faults: npu-exporter at http://127.0.0.1:9/metrics does not answer"
    assert scrape(tmp_path, 100.0) == {}


@pytest.mark.parametrize("every_s", [0.0, 5.0])
def test_the_first_read_is_never_skipped(tmp_path: Path, every_s: float) -> None:
    reports = Reports(report())
    FaultWatcher(SERVER, reports, home=tmp_path, every_s=every_s, clock=lambda: 3.0).run()
    assert reports.asked == [3.0]


def test_the_fault_rules_read_only_families_and_labels_the_exporter_writes(tmp_path: Path) -> None:
    """Rules vs metrics: every geadmin_ series the two NPU-fault rules read, with every label they
    match or join on, is on the exporter's page once a fault has been recorded."""
    import re

    import yaml

    rules_file = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "geadmin-alerts.yml"
    rules = {r["alert"]: r for g in yaml.safe_load(rules_file.read_text())["groups"] for r in g["rules"]}
    faulted = report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU, node="node-a", hits=[RESNET_HALF]))
    FaultWatcher(SERVER, Reports(faulted), home=tmp_path, clock=lambda: 100.0).run()
    exported: dict[str, set[str]] = {}
    for name, labelled in scrape(tmp_path, 100.0):
        exported.setdefault(name, set()).update(label for label, _ in labelled)
    for alert in ("NpuFaultTookInstances", "ModelNoHealthyInstance"):
        expr = rules[alert]["expr"]
        for name in re.findall(r"\b(geadmin_\w+)", expr):
            assert name in exported, f"{alert} reads {name}, which the exporter does not write"
        joined = {label.strip() for group in re.findall(r"(?:on|by) \(([^)]*)\)", expr)
                  for label in group.split(",")}
        matched = set(re.findall(r"(\w+)!?=~?\"", expr))
        for name in re.findall(r"\b(geadmin_\w+)", expr):
            assert joined | matched <= exported[name], (alert, name, joined | matched, exported[name])
