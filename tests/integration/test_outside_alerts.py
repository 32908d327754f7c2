"""Outside input stays data, against a real Alertmanager and a real Prometheus (Debian's):

- an alert anyone posted to Alertmanager's API (it takes alerts without authentication) with
  `runbook_url=http://evil.example/` and a markdown summary is shown on the Overview as text,
  while one whose runbook is under GEADMIN_RUNBOOK_BASE_URL is a link;
- the matchers of an alert's silence link, with quotes, commas, a backslash and a newline in a
  value, silence exactly that alert (amtool, Alertmanager's own client, adds the silence);
- a server that left while one of its models was LOADING stops firing ModelLoadStuck: its
  state expires on geadmin's exporter, or its rows are removed, and Prometheus resolves it.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.alerting.alertmanager import active_alerts, silence_matchers, silence_url
from geadmin.telemetry.alerting.exporter import MetricsEndpoint
from geadmin.telemetry.history import watch
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.markdown_render import render
from tests.support.processes import wait_for
from tests.support.prometheus import AlertmanagerServer, PrometheusServer
from tests.support.stack import geadmin

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "geadmin-alerts.yml"
DASHBOARD = "https://geadmin.example"
RUNBOOKS = "https://wiki.example/runbooks"
BAIT = "[Session expired: sign in again](http://evil.example/login) **now**"
WEIRD = 'a "b", c\\d\nz}'


def post(alertmanager: AlertmanagerServer, labels: dict[str, str], **annotations: str) -> None:
    answer = requests.post(f"{alertmanager.url}/api/v2/alerts", timeout=5,
                           json=[{"labels": labels, "annotations": annotations}])
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerServer]:
    server = AlertmanagerServer(tmp_path_factory.mktemp("alertmanager")).start()
    try:
        post(server, {"alertname": "OutsidePhish", "severity": "page", "model": "m", "server": "http://t:8000"},
             runbook_url="http://evil.example/", summary=BAIT, description="<b>hello</b>")
        post(server, {"alertname": "OurRunbook", "severity": "warning", "instance": "t:8002"},
             runbook_url=f"{RUNBOOKS}/model-load-stuck", summary="queue_time is high")
        for value in (WEIRD, "a sibling"):
            post(server, {"alertname": "Quoted", "severity": "info", "weird": value, "zed": "1, 2"},
                 summary=f"value {value}")
        assert wait_for(lambda: len(active_alerts(server.url, DASHBOARD)) == 4, 30)
        yield server
    finally:
        server.stop()


def test_an_outside_runbook_link_is_text_on_the_overview_and_ours_is_a_link(
        alertmanager: AlertmanagerServer, triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)
    point_at(monkeypatch, triton_server)
    monkeypatch.setenv("GEADMIN_ALERTMANAGER_URL", alertmanager.url)
    monkeypatch.setenv("GEADMIN_DASHBOARD_URL", DASHBOARD)
    monkeypatch.setenv("GEADMIN_RUNBOOK_BASE_URL", RUNBOOKS)
    st.cache_data.clear()
    at = run(AppTest.from_file(APP, default_timeout=90))
    boxes = {name: [render(str(b.value)) for b in (*at.error, *at.warning) if name in str(b.value)]
             for name in ("OutsidePhish", "OurRunbook")}
    (phish,) = boxes["OutsidePhish"]
    assert not [link for link in phish.links if "evil.example" in link], phish.links
    triage, silence = phish.links
    assert triage == f"{DASHBOARD}/models?server=http%3A%2F%2Ft%3A8000&model=m"
    assert silence.startswith(f"{alertmanager.url}/#/silences/new?")
    assert BAIT in phish.words and "http://evil.example/" in phish.words  # shown, as text
    assert phish.gfm_autolinks == []  # nor would GFM link a URL in its text (the browser's renderer)
    assert [c for c in phish.constructs if c not in ("strong_open", "strong_close", "link_open",
                                                     "link_close")] == []  # only our bold name, our links
    (ours,) = boxes["OurRunbook"]
    assert ours.links[0] == f"{RUNBOOKS}/model-load-stuck"


def test_the_cli_shows_the_outside_link_as_what_it_is(alertmanager: AlertmanagerServer) -> None:
    (phish,) = [a for a in active_alerts(alertmanager.url, DASHBOARD) if a.name == "OutsidePhish"]
    assert phish.link.startswith(f"{DASHBOARD}/models?") and phish.outside_link == "http://evil.example/"


def test_a_silence_from_the_alerts_matchers_silences_exactly_that_alert(
        alertmanager: AlertmanagerServer) -> None:
    (quoted,) = [a for a in active_alerts(alertmanager.url, DASHBOARD) if a.labels.get("weird") == WEIRD]
    matchers = silence_matchers(quoted.labels)
    assert silence_url(quoted.labels, alertmanager.url).endswith(
        requests.utils.quote("{" + ",".join(matchers) + "}", safe=""))
    added = subprocess.run(["amtool", f"--alertmanager.url={alertmanager.url}", "silence", "add",
                            "--comment=outside-input test", "--author=geadmin", "--duration=1h", *matchers],
                           capture_output=True, text=True, timeout=30)
    assert added.returncode == 0, added.stdout + added.stderr

    def states() -> dict[str, str]:
        answer = requests.get(f"{alertmanager.url}/api/v2/alerts", timeout=5).json()
        return {a["labels"]["weird"]: a["status"]["state"] for a in answer if a["labels"].get("weird")}

    assert wait_for(lambda: states() == {WEIRD: "suppressed", "a sibling": "active"}, 30), states()


# -- a server that left stops firing ---------------------------------------------------------
FRESH_S = 4.0
STAYS, KILLED, REMOVED = "http://10.9.9.8:8000", "http://10.9.9.9:8000", "http://10.9.9.7:8000"


def stuck_rules(path: Path) -> Path:
    """The shipped rules with the stuck-load threshold at 3 s instead of 10 minutes."""
    text = RULES.read_text().replace('geadmin_model_state_seconds{state=~"LOADING|UNLOADING"} > 600',
                                     'geadmin_model_state_seconds{state=~"LOADING|UNLOADING"} > 3')
    assert "> 3" in text
    path.write_text(re.sub(r"for: \d+m", "for: 1s", text))
    return path


def firing(prometheus: PrometheusServer, server: str) -> bool:
    query = f'ALERTS{{alertname="ModelLoadStuck", alertstate="firing", server="{server}"}}'
    return prometheus.value(query) is not None


def test_a_removed_servers_stuck_loading_alert_resolves(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    endpoint = MetricsEndpoint(home, port, state_fresh_s=FRESH_S).start()
    watched = {STAYS, KILLED, REMOVED}
    stop = threading.Event()
    # One tick at a time, as in the sampler, where rediscovery runs between ticks: a tick under way
    # while a server was forgotten wrote its row back (a clean-clone run: REMOVED's row stayed).
    tick = threading.Lock()

    def sampler() -> None:  # what the sampler does every tick: read each watched server's index again
        started = time.time() - 3600
        for server in sorted(watched):
            watch.record_states(server, {"hangs": ("LOADING", "", False)}, started, home=home)
        while not stop.is_set():
            with tick:
                for server in sorted(watched):
                    watch.record_states(server, {"hangs": ("LOADING", "", False)}, time.time(), home=home)
            stop.wait(0.5)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    prometheus = PrometheusServer(tmp_path / "prometheus", [endpoint.url], job="geadmin",
                                  rules=stuck_rules(tmp_path / "rules.yml"))
    try:
        prometheus.start()
        assert wait_for(lambda: all(firing(prometheus, s) for s in (STAYS, KILLED, REMOVED)), 60)
        with tick:
            watched.discard(KILLED)  # the pod was killed while LOADING: nobody reads its index again
            watched.discard(REMOVED)
            assert watch.forget_servers([REMOVED], home=home) == 1  # rediscovery: it left the fleet
        assert wait_for(lambda: not firing(prometheus, REMOVED), 30)
        assert firing(prometheus, KILLED)  # not yet: its state is still fresh
        assert wait_for(lambda: not firing(prometheus, KILLED), FRESH_S + 30)
        assert firing(prometheus, STAYS)  # the one still watched and still LOADING fires on
        exported = requests.get(endpoint.url, timeout=5).text
        assert KILLED not in exported and REMOVED not in exported and STAYS in exported
        assert {s.server for s in watch.model_states(home=home)} == {STAYS, KILLED}  # KILLED's row: a day
    finally:
        stop.set()
        thread.join(timeout=10)
        prometheus.stop()
        endpoint.stop()


def test_the_alerts_json_carries_the_outside_link(alertmanager: AlertmanagerServer, tmp_path: Path) -> None:
    answer = geadmin("alerts", "--alertmanager", alertmanager.url, "--json", home=tmp_path)
    assert answer.returncode == 1, answer.stdout + answer.stderr
    phish = next(a for a in json.loads(answer.stdout) if a["name"] == "OutsidePhish")
    assert phish["outside_link"] == "http://evil.example/" and "evil" not in phish["link"]
