"""Objectives, burn rates, geadmin's exporter and Alertmanager's alerts, on real SQLite and
prometheus_client, without a server (the live versions are tests/integration/test_probe.py
and tests/integration/test_alerting.py)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from geadmin import audit, db
from geadmin.access import guard
from geadmin.cli.alerts import headline, render
from geadmin.errors import InvalidArgumentError
from geadmin.ops.monitoring import parse_budget, set_objective
from geadmin.telemetry.alerting.alertmanager import parse_alert, silence_url, triage_link
from geadmin.telemetry.alerting.exporter import GeadminCollector
from geadmin.telemetry.alerting.objectives import burn_rates, objectives
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord

SOURCE = "http://127.0.0.1:8002/metrics"


@pytest.mark.parametrize(("text", "value"),
                         [("0.1%", 0.001), ("0.001", 0.001), (" 2 % ", 0.02), ("50%", 0.5)])
def test_error_budgets_parse_as_percentages_or_fractions(text: str, value: float) -> None:
    assert parse_budget(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "0", "-1%", "51%", "nan", "inf"])
def test_bad_error_budgets_are_refused_with_the_forms_that_work(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="error budget"):
        parse_budget(text)


def test_set_objective_stores_audits_and_clears(tmp_path: Path) -> None:
    auth = guard.os_user()
    stored = set_objective("resnet50", 50.0, 0.001, auth=auth, home=tmp_path)
    assert stored.describe() == "p99 at most 50 ms, error budget 0.1 %"
    assert objectives(home=tmp_path)["resnet50"].p99_ms == 50.0
    set_objective("resnet50", None, None, auth=auth, home=tmp_path)
    assert objectives(home=tmp_path) == {}
    rows = audit.query(model="resnet50", home=tmp_path)
    assert [r.action for r in rows] == ["objective", "objective"]
    assert rows[0].message == "p99 at most 50 ms, error budget 0.1 % -> no objective"
    with pytest.raises(InvalidArgumentError, match="p99 objective"):
        set_objective("resnet50", -1.0, None, auth=auth, home=tmp_path)


def plant_window(home: Path, at: float, requests_per_s: float, failures_per_s: float,
                 span: float = 60.0) -> None:
    with db.connect(home) as conn, db.transaction(conn):
        conn.execute("INSERT INTO telemetry_model (source, at, span_s, model, version, requests_per_s, "
                     "failures_per_s) VALUES (?, ?, ?, 'ocr', '1', ?, ?)",
                     (SOURCE, at, span, requests_per_s, failures_per_s))


def test_the_burn_rate_is_the_failed_fraction_over_the_budget_per_window(tmp_path: Path) -> None:
    now = time.time()
    for minute in range(1, 60):  # the last hour: 2 % of 100 requests/s fail
        plant_window(tmp_path, now - minute * 60, 100.0, 2.0)
    for minute in range(61, 300):  # earlier: none fail
        plant_window(tmp_path, now - minute * 60, 100.0, 0.0)
    one_hour, six_hours = burn_rates(SOURCE, "ocr", 0.001, now=datetime.fromtimestamp(now, timezone.utc),
                                     home=tmp_path)
    assert one_hour.rate == pytest.approx(20.0)  # 2 % failing against a 0.1 % budget
    assert six_hours.rate == pytest.approx(20.0 * 59 / 298, rel=0.01)
    assert burn_rates(SOURCE, "ocr", None, home=tmp_path)[0].rate is None  # no budget: no burn rate
    assert burn_rates(SOURCE, "other", 0.001, home=tmp_path)[0].rate is None  # no requests


def scrape(collector: GeadminCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_exporter_says_what_was_recorded_and_leaves_out_stale_probes(tmp_path: Path) -> None:
    now = 10_000.0
    watch.record_probes([ProbeRecord("http://t:8000", "fresh", now - 10, False, None, "boom"),
                         ProbeRecord("http://t:8000", "stale", now - 3600, True, 2.0)], home=tmp_path)
    watch.record_states("http://t:8000", {"fresh": ("READY", "", False), "gone": ("UNAVAILABLE", "x", True)},
                        now - 100, home=tmp_path)
    set_objective("fresh", 20.0, 0.01, auth=guard.os_user(), home=tmp_path)
    found = scrape(GeadminCollector(tmp_path, dashboard_url="https://g", clock=lambda: now))
    assert found[("geadmin_probe_success", (("model", "fresh"), ("server", "http://t:8000")))] == 0.0
    assert not [k for k in found if ("model", "stale") in k[1]]
    assert found[("geadmin_model_state", (("model", "gone"), ("operator_unload", "true"),
                                          ("server", "http://t:8000"), ("state", "UNAVAILABLE")))] == 1.0
    assert found[("geadmin_model_state_seconds", (("model", "fresh"), ("server", "http://t:8000"),
                                                  ("state", "READY")))] == 100.0
    assert found[("geadmin_objective_p99_seconds", (("model", "fresh"),))] == pytest.approx(0.02)
    assert found[("geadmin_objective_error_budget_ratio", (("model", "fresh"),))] == 0.01
    assert found[("geadmin_exporter_database_up", ())] == 1.0


def test_a_state_keeps_its_since_until_it_changes(tmp_path: Path) -> None:
    watch.record_states("s", {"m": ("LOADING", "", False)}, 100.0, home=tmp_path)
    watch.record_states("s", {"m": ("LOADING", "", False)}, 200.0, home=tmp_path)
    assert watch.model_states("s", home=tmp_path)[0].since_s == 100.0
    watch.record_states("s", {"m": ("READY", "", False)}, 300.0, home=tmp_path)
    (state,) = watch.model_states("s", home=tmp_path)
    assert (state.state, state.since_s, state.for_s(360.0)) == ("READY", 300.0, 60.0)
    watch.record_states("s", {}, 400.0, home=tmp_path)  # left the index: forgotten
    assert watch.model_states("s", home=tmp_path) == []


RECORDED_ALERT = {  # as Alertmanager 0.25's /api/v2/alerts answers
    "annotations": {"summary": "digits is READY but does not answer requests on http://triton:8000",
                    "description": "Triton says READY ...",
                    "runbook_url": "https://g/models?server=http%3A%2F%2Ftriton%3A8000&model=digits"},
    "endsAt": "2026-12-04T10:14:00.000Z", "fingerprint": "3f2a", "receivers": [{"name": "geadmin"}],
    "startsAt": "2026-12-04T10:10:00.000Z",
    "status": {"inhibitedBy": [], "silencedBy": [], "state": "active"},
    "updatedAt": "2026-12-04T10:10:30.000Z", "generatorURL": "http://prometheus:9090/graph",
    "labels": {"alertname": "ModelReadyButNotAnswering", "model": "digits", "server": "http://triton:8000",
               "severity": "page"},
}


def test_an_alert_keeps_its_link_its_subject_and_a_silence_form() -> None:
    alert = parse_alert(RECORDED_ALERT, "http://am:9093", "https://g")
    assert alert.name == "ModelReadyButNotAnswering" and alert.severity == "page"
    assert alert.subject == "digits on http://triton:8000"
    assert alert.link == RECORDED_ALERT["annotations"]["runbook_url"]  # type: ignore[index]
    assert alert.silence_url.startswith("http://am:9093/#/silences/new?filter=%7Balertname%3D%22Model")
    assert "severity" not in silence_url({"alertname": "A", "severity": "page"}, "http://am")
    assert headline([alert]).startswith("FIRING: ModelReadyButNotAnswering: digits is READY but")
    assert "open:    https://g/models?" in render([alert]) and headline([]) == "OK: no alert fires"


def test_an_alert_without_a_runbook_links_to_its_models_page_or_the_overview() -> None:
    assert triage_link({"model": "m", "server": "http://t:8000"}, "https://g/") == \
        "https://g/models?server=http%3A%2F%2Ft%3A8000&model=m"
    assert triage_link({"instance": "t:8002"}, "https://g") == "https://g/overview"


def test_the_triage_card_compares_the_windows_p99_with_the_objective() -> None:
    from geadmin.telemetry.alerting.objectives import Objective, latency_note
    from geadmin.telemetry.derive import ModelWindow, Quantiles

    def window(p99: float | None, avg: float | None) -> ModelWindow:
        return ModelWindow("m", "1", 10.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, avg, 0.0, 0.0, 0.0, 0.0,
                           (("request", Quantiles(None, None, p99)),), (), 0.0, False, False)

    target = Objective("m", p99_ms=50.0)
    assert latency_note(window(62.0, 20.0), target) == "p99 62.0 ms is over its p99 objective of 50 ms"
    assert latency_note(window(None, 20.0), target) == \
        "average latency 20.0 ms is within its p99 objective of 50 ms"
    assert latency_note(window(62.0, 20.0), None) == "" and latency_note(None, target) == ""


def test_a_failing_member_is_named_before_the_ensemble_that_fails_with_it() -> None:
    member = ProbeRecord("s", "post", 1.0, False, None, "infer with 'post': ... model 'post_0_0' ... corrupt")
    ensemble = ProbeRecord("s", "pipe", 1.0, False, None, "in ensemble 'pipe', model 'post_0_0': corrupt")
    assert [p.model for p in watch.causes_first([ensemble, member])] == ["post", "pipe"]
