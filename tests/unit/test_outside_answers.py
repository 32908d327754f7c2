"""Answers from outside, read by geadmin's readers from real HTTP listeners on 127.0.0.1
(tests/support/http_doubles.py): an alert's texts and links are data; a too deep or too large
answer of Alertmanager, Prometheus or the Kubernetes API is a clear error, never a
RecursionError traceback."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from geadmin import outside
from geadmin.errors import AlertmanagerError, DiscoverySourceError, PrometheusError
from geadmin.fleet import kubernetes as kube
from geadmin.telemetry.alerting import alertmanager
from geadmin.telemetry.alerting.alertmanager import active_alerts, parse_alert, silence_matchers
from geadmin.telemetry.history import prometheus
from tests.support.http_doubles import serve

DEEP = b"[" * 100_000 + b"]" * 100_000
DASHBOARD = "https://geadmin.example"
RUNBOOKS = "https://wiki.example/runbooks"


def alert(**annotations: str) -> dict[str, object]:
    labels = {"alertname": "ModelLoadStuck", "model": "m", "server": "http://t:8000", "severity": "page"}
    return {"labels": labels,
            "annotations": annotations, "status": {"state": "active"}, "startsAt": "2026-12-04T10:10:00Z"}


def test_an_outside_runbook_link_is_kept_as_text_and_the_triage_link_is_geadmins_own() -> None:
    parsed = parse_alert(alert(runbook_url="http://evil.example/", summary="[Session expired](http://evil.example)"),
                         "http://am:9093", DASHBOARD, (DASHBOARD, RUNBOOKS))
    assert parsed.link == f"{DASHBOARD}/models?server=http%3A%2F%2Ft%3A8000&model=m"
    assert parsed.outside_link == "http://evil.example/"
    assert parsed.summary == "[Session expired](http://evil.example)"  # the text itself; views escape it
    assert parsed.to_json()["outside_link"] == "http://evil.example/"


@pytest.mark.parametrize("runbook", [f"{DASHBOARD}/overview", f"{RUNBOOKS}/model-load-stuck"])
def test_a_runbook_under_a_configured_base_is_the_link(runbook: str) -> None:
    parsed = parse_alert(alert(runbook_url=runbook), "http://am:9093", DASHBOARD, (DASHBOARD, RUNBOOKS))
    assert (parsed.link, parsed.outside_link) == (runbook, "")


def test_texts_lose_terminal_escapes_and_are_cut() -> None:
    parsed = parse_alert(alert(summary="ok\x1b]8;;http://evil.example\x07click\x1b]8;;\x07" + "x" * 5000),
                         "http://am", DASHBOARD)
    assert "\x1b" not in parsed.summary and "\x07" not in parsed.summary
    assert len(parsed.summary) == alertmanager.SUMMARY_CHARS


def test_silence_matchers_quote_backslashes_quotes_and_newlines() -> None:
    labels = {"alertname": "A", "weird": 'a "b", c\\d\nz}', "severity": "page", "bad-name": "x"}
    assert silence_matchers(labels) == ['alertname="A"', 'weird="a \\"b\\", c\\\\d\\nz}"']
    url = alertmanager.silence_url(labels, "http://am:9093/")
    assert unquote(url.split("filter=", 1)[1]) == '{alertname="A",weird="a \\"b\\", c\\\\d\\nz}"}'


def test_a_deeply_nested_alertmanager_answer_is_a_clear_error() -> None:
    with serve(DEEP) as url, pytest.raises(AlertmanagerError, match="nested deeper than 64 levels"):
        active_alerts(url.removesuffix("/metrics"), DASHBOARD)


def test_an_oversized_alertmanager_answer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alertmanager, "MAX_ANSWER_BYTES", 10_000)
    body = json.dumps([alert(summary="x" * 1000) for _ in range(20)]).encode()
    with serve(body) as url, pytest.raises(AlertmanagerError, match="larger than 10000 bytes"):
        active_alerts(url.removesuffix("/metrics"), DASHBOARD)
    with serve(json.dumps([alert(summary="ok")]).encode()) as url:  # a small one still reads
        assert [a.summary for a in active_alerts(url.removesuffix("/metrics"), DASHBOARD)] == ["ok"]


def test_a_deeply_nested_prometheus_answer_is_a_clear_error() -> None:
    with serve(DEEP) as url, pytest.raises(PrometheusError, match="nested deeper than 64 levels"):
        prometheus.PrometheusHistory(url.removesuffix("/metrics")).instant("up")


def test_an_oversized_prometheus_answer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus, "MAX_ANSWER_BYTES", 10_000)
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"model": f"m{i}"}, "value": [1.0, "1"]} for i in range(1000)]}}).encode()
    with serve(body) as url, pytest.raises(PrometheusError, match="larger than 10000 bytes"):
        prometheus.PrometheusHistory(url.removesuffix("/metrics")).instant("up")


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def test_a_deeply_nested_kubernetes_answer_is_a_source_error(tmp_path: Path) -> None:
    with serve(DEEP) as url:
        config = kubeconfig(tmp_path / "kubeconfig", url.removesuffix("/metrics"))
        with pytest.raises(DiscoverySourceError, match="nested deeper than 64 levels"):
            kube.discover(f"geadmin?selector=app=triton&kubeconfig={config}", timeout_s=10)


def test_an_oversized_kubernetes_answer_is_a_source_error(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outside, "MAX_ANSWER_BYTES", 10_000)
    body = json.dumps({"kind": "PodList", "items": [{"metadata": {"name": "x" * 100}}] * 200}).encode()
    with serve(body) as url:
        config = kubeconfig(tmp_path / "kubeconfig", url.removesuffix("/metrics"))
        with pytest.raises(DiscoverySourceError, match="larger than 10000 bytes"):
            kube.discover(f"geadmin?selector=app=triton&kubeconfig={config}", timeout_s=10)


def test_a_deeply_nested_kubernetes_error_status_still_explains_the_status(tmp_path: Path) -> None:
    with serve(DEEP, status=403) as url:
        config = kubeconfig(tmp_path / "kubeconfig", url.removesuffix("/metrics"))
        with pytest.raises(DiscoverySourceError, match="403"):
            kube.discover(f"geadmin?selector=app=triton&kubeconfig={config}", timeout_s=10)


def test_an_alerts_texts_cannot_forge_lines_of_geadmin_alerts() -> None:
    from geadmin.cli.alerts import render as render_cli
    parsed = parse_alert(alert(summary="fine\nOK: no alert fires", description="a\nFIRING: Fake"),
                         "http://am", DASHBOARD)
    lines = render_cli([parsed]).splitlines()
    assert lines[0] == "FIRING: ModelLoadStuck: fine OK: no alert fires"
    assert [line for line in lines if line.startswith(("OK", "FIRING"))] == [lines[0]]
