"""The two NPU-fault alert rules, end to end: a real tritonserver runs npu_ge on the ACL test
double (`pair` on devices 0 and 1, `single` on device 1: tests/support/npu_fault_servers.py);
`geadmin sampler` (a subprocess) runs its fault watcher over a double of npu-exporter
(tests/support/npu_exporter_double.py) and Triton's /metrics (npu_ge's placements) and serves
geadmin's metrics; Debian's Prometheus scrapes them and evaluates the shipped rules.

A fault on chip 1 fires NpuFaultTookInstances (`pair` lost one instance of two there) and
ModelNoHealthyInstance (`single` lost its only one), each with its deep link to the NPUs page's
fault card; the fault clearing resolves both. The rules are deploy/prometheus/geadmin-alerts.yml
with only their `for:` shortened (promtool's unit tests cover the waiting times,
tests/deploy/test_alert_rules.py); Prometheus scrapes and evaluates every second."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from tests.support.faults import HBM_ECC
from tests.support.npu_exporter_double import ChipState, LiveExporter, live_npu_exporter
from tests.support.npu_fault_servers import start_fault_server
from tests.support.processes import wait_for
from tests.support.prometheus import PrometheusServer
from tests.support.stack import GEADMIN

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "geadmin-alerts.yml"
DASHBOARD = "https://geadmin.example"
OVERRIDE = {"RestartNPUCodes": ["80E18402"]}  # the code's level in the tests' own table
HEALTHY = {0: ChipState(), 1: ChipState()}
FAULTED = {0: ChipState(), 1: ChipState(codes=(HBM_ECC,))}
RULE_NAMES = ("NpuFaultTookInstances", "ModelNoHealthyInstance")
FIRE_WITHIN_S = 45  # the watcher reads every 10 s, Prometheus scrapes and evaluates every second


@dataclass
class Watched:
    triton: TritonProcess
    exporter: LiveExporter
    prometheus: PrometheusServer
    root: Path


def fault_rules(path: Path) -> Path:
    text = re.sub(r"for: \d+m", "for: 1s", RULES.read_text())
    assert "alert: NpuFaultTookInstances" in text and "alert: ModelNoHealthyInstance" in text
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    root = tmp_path_factory.mktemp("npu_fault_alerts")
    (root / "faultCode.json").write_text(json.dumps(OVERRIDE))
    triton = start_fault_server(root, "one")
    try:
        with live_npu_exporter(HEALTHY) as exporter:
            port = free_port()
            env = {**os.environ, "GEADMIN_HOME": str(root / "home"), "GEADMIN_DASHBOARD_URL": DASHBOARD,
                   "GEADMIN_NPU_EXPORTER_URL": exporter.url,
                   "GEADMIN_NPU_FAULT_TABLE": str(root / "faultCode.json")}
            with (root / "sampler.log").open("wb") as log:
                sampler = subprocess.Popen(
                    [*GEADMIN, "sampler", "--url", triton.http_url, "--metrics-url", triton.metrics_url,
                     "--interval", "1", "--probe-interval", "5", "--metrics-port", str(port)],
                    env=env, stdout=log, stderr=subprocess.STDOUT)
            prometheus = PrometheusServer(root / "prometheus", [triton.metrics_url],
                                          more_jobs={"geadmin": [f"http://127.0.0.1:{port}/metrics"]},
                                          rules=fault_rules(root / "rules.yml"))
            try:
                prometheus.start()
                yield Watched(triton, exporter, prometheus, root)
            finally:
                prometheus.stop()
                sampler.terminate()
                sampler.wait(timeout=15)
    finally:
        triton.stop()


def alerts(watched: Watched) -> dict[str, list[dict[str, object]]]:
    """Prometheus' own alerts (pending and firing), by rule name."""
    answer = requests.get(f"{watched.prometheus.url}/api/v1/alerts", timeout=5).json()
    found: dict[str, list[dict[str, object]]] = {}
    for alert in answer["data"]["alerts"]:
        found.setdefault(alert["labels"]["alertname"], []).append(alert)
    return found


def firing(watched: Watched) -> set[str]:
    return {name for name, listed in alerts(watched).items() if name in RULE_NAMES
            and any(a["state"] == "firing" for a in listed)}


def said(watched: Watched) -> str:
    return ((watched.root / "sampler.log").read_text(errors="replace")[-3000:] + "\n"
            + requests.get(f"{watched.prometheus.url}/api/v1/rules", timeout=5).text[-3000:])


def test_a_fault_on_a_chip_with_models_fires_both_rules_with_their_links_and_clearing_resolves_them(
        watched: Watched) -> None:
    assert watched.prometheus.wait_for('up{job="geadmin"} == 1', 30) == 1
    assert firing(watched) == set()

    started = time.monotonic()
    watched.exporter.set(FAULTED)
    assert wait_for(lambda: firing(watched) == set(RULE_NAMES), FIRE_WITHIN_S, 0.5), said(watched)
    assert time.monotonic() - started < 60

    listed = alerts(watched)
    (took,) = listed["NpuFaultTookInstances"]
    assert took["labels"]["npu"] == "1" and took["labels"]["code"] == "0x80E18402"  # type: ignore[index]
    assert took["annotations"]["runbook_url"] == f"{DASHBOARD}/npu?npu=1&node="  # type: ignore[index]
    assert took["annotations"]["summary"] == (  # type: ignore[index]
        "NPU 1 has fault 0x80E18402 (RestartNPU) and lost model instances")
    (down,) = listed["ModelNoHealthyInstance"]
    assert down["labels"]["model"] == "single"  # type: ignore[index]  # pair keeps its instance on chip 0
    server = quote(watched.triton.http_url, safe="")
    assert down["annotations"]["runbook_url"] == (  # type: ignore[index]
        f"{DASHBOARD}/npu?server={server}&node=&model=single")
    assert down["annotations"]["summary"] == (  # type: ignore[index]
        f"single has no healthy instance left on {watched.triton.http_url}: NPU faults took all 1")

    watched.exporter.set(HEALTHY)
    assert wait_for(lambda: not set(alerts(watched)) & set(RULE_NAMES), FIRE_WITHIN_S, 0.5), said(watched)
