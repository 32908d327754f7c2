"""On-call from the alert, for real: a tritonserver serves a model that loads READY but fails
every request; `geadmin sampler` (a subprocess) probes it and serves geadmin's metrics;
Debian's Prometheus scrapes Triton and geadmin and evaluates the shipped rules; Debian's
Alertmanager receives the alert. `geadmin alerts` and the Overview list it with the link to
the model's triage view; fixing the model resolves it. A load that hangs fires its own alert.

The rules are deploy/prometheus/geadmin-alerts.yml with only their waiting times shortened
(`for:` and the stuck-load threshold), so a test takes seconds, not minutes; the waiting
times themselves are covered by promtool's unit tests (tests/deploy/test_alert_rules.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.processes import TEST_EXIT_TIMEOUT_S, wait_for
from tests.support.prometheus import AlertmanagerServer, PrometheusServer
from tests.support.samples import add_answering_model, add_python_model, copy_samples, set_answers
from tests.support.stack import GEADMIN, geadmin

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "geadmin-alerts.yml"
BROKEN = "broken_answers"
HANGS = "hangs_loading"
ERROR = "the weights file is gone (alerting test)"
DASHBOARD = "https://geadmin.example"


@dataclass
class Monitored:
    triton: TritonProcess
    home: Path
    prometheus: PrometheusServer
    alertmanager: AlertmanagerServer
    sampler: subprocess.Popen[bytes]


def fast_rules(path: Path) -> Path:
    """The shipped rules, waiting 1 s instead of minutes, and a load stuck after 3 s."""
    text = re.sub(r"for: \d+m", "for: 1s", RULES.read_text())
    text = text.replace('geadmin_model_state_seconds{state=~"LOADING|UNLOADING"} > 600',
                        'geadmin_model_state_seconds{state=~"LOADING|UNLOADING"} > 3')
    assert text.count("for: 1s") >= 8 and "> 3" in text
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    root = tmp_path_factory.mktemp("alerting")
    repository = copy_samples(root / "repo")
    add_answering_model(repository, BROKEN, fails_with=ERROR)
    add_python_model(repository, HANGS, initialize="time.sleep(120)")
    home = root / "home"
    exporter_port = free_port()
    with TritonProcess(repository, models=["digits_classifier", BROKEN], log_path=root / "triton.log",
                       exit_timeout_s=TEST_EXIT_TIMEOUT_S) as triton:
        env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_DASHBOARD_URL": DASHBOARD}
        log = (root / "sampler.log").open("wb")
        sampler = subprocess.Popen(
            [*GEADMIN, "sampler", "--url", triton.http_url, "--metrics-url", triton.metrics_url,
             "--interval", "1", "--probe-interval", "5", "--metrics-port", str(exporter_port)],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        alertmanager = AlertmanagerServer(root / "alertmanager").start()
        prometheus = PrometheusServer(root / "prometheus", [triton.metrics_url],
                                      more_jobs={"geadmin": [f"http://127.0.0.1:{exporter_port}/metrics"]},
                                      rules=fast_rules(root / "rules.yml"), alertmanager=alertmanager.url)
        try:
            prometheus.start()
            yield Monitored(triton, home, prometheus, alertmanager, sampler)
        finally:
            prometheus.stop()
            alertmanager.stop()
            sampler.terminate()
            sampler.wait(timeout=15)


@pytest.fixture(autouse=True)
def _dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    """`geadmin alerts` knows where the dashboard is: the rules' runbook links point there, and a
    link under no configured base would be shown as text (tests/integration/test_outside_alerts.py)."""
    monkeypatch.setenv("GEADMIN_DASHBOARD_URL", DASHBOARD)


def alerts(monitored: Monitored) -> tuple[int, list[dict[str, object]]]:
    answer = geadmin("alerts", "--alertmanager", monitored.alertmanager.url, "--json", home=monitored.home)
    assert answer.returncode in (0, 1), answer.stdout + answer.stderr
    return answer.returncode, json.loads(answer.stdout)


def firing(monitored: Monitored, name: str, model: str) -> dict[str, object] | None:
    return next((a for a in alerts(monitored)[1]
                 if a["name"] == name and a["labels"]["model"] == model), None)  # type: ignore[index]


def test_a_ready_model_that_fails_every_request_pages_with_its_triage_link(monitored: Monitored) -> None:
    assert wait_for(lambda: firing(monitored, "ModelReadyButNotAnswering", BROKEN) is not None, 90), \
        (monitored.home.parent / "sampler.log").read_text()[-3000:]
    alert = firing(monitored, "ModelReadyButNotAnswering", BROKEN)
    assert alert is not None
    server = monitored.triton.http_url.replace(":", "%3A").replace("/", "%2F")
    assert alert["link"] == f"{DASHBOARD}/models?server={server}&model={BROKEN}"
    url = monitored.triton.http_url
    assert alert["summary"] == f"{BROKEN} is READY but does not answer requests on {url}"
    assert str(alert["silence_url"]).startswith(f"{monitored.alertmanager.url}/#/silences/new?filter=")
    text = geadmin("alerts", "--alertmanager", monitored.alertmanager.url, home=monitored.home)
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith("FIRING: ModelReadyButNotAnswering")
    assert f"open:    {alert['link']}" in text.stdout
    assert firing(monitored, "ModelReadyButNotAnswering", "digits_classifier") is None  # it answers


def test_the_overview_lists_the_alert_with_its_link(monitored: Monitored, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    assert wait_for(lambda: firing(monitored, "ModelReadyButNotAnswering", BROKEN) is not None, 90)
    isolate(monkeypatch, tmp_path)
    point_at(monkeypatch, monitored.triton)
    monkeypatch.setenv("GEADMIN_ALERTMANAGER_URL", monitored.alertmanager.url)
    monkeypatch.setenv("GEADMIN_DASHBOARD_URL", DASHBOARD)
    at = run(AppTest.from_file(APP, default_timeout=90))
    shown = [str(e.value) for e in at.error if "ModelReadyButNotAnswering" in str(e.value)]
    assert shown, [str(e.value) for e in at.error]
    assert f"({DASHBOARD}/models?server=" in shown[0] and "[Silence](" in shown[0]


def test_fixing_the_model_resolves_the_alert(monitored: Monitored) -> None:
    assert wait_for(lambda: firing(monitored, "ModelReadyButNotAnswering", BROKEN) is not None, 90)
    set_answers(monitored.triton.repository / BROKEN)
    with TritonClient(monitored.triton.http_url) as client:
        client.load(BROKEN)
    assert wait_for(lambda: firing(monitored, "ModelReadyButNotAnswering", BROKEN) is None, 90)


def test_a_load_that_hangs_fires_the_stuck_alert(monitored: Monitored) -> None:
    with TritonClient(monitored.triton.http_url) as client:
        client.start_load(HANGS)
        assert wait_for(lambda: firing(monitored, "ModelLoadStuck", HANGS) is not None, 90)
    alert = firing(monitored, "ModelLoadStuck", HANGS)
    assert alert is not None and str(alert["summary"]).startswith(f"{HANGS} has been LOADING for")
