"""The Metrics page through AppTest, against the real tritonserver under a small load: the
sampler (a real one, 0.5 s interval) fills a temporary workspace's history; the page's
plotly charts have points, draw a recorded outage as a gap, and carry the audit log's
changes as markers on every chart."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.audit import Actor, Origin
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history import record
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread
from tests.support.prometheus import PrometheusServer
from tests.support.samples import LOAD_MODEL, busy_points, load_until, send_digits

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
MODEL = LOAD_MODEL


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SERVERS_FILE", "TRITON_URLS", "ADMIN_KEY", "SAMPLE_INTERVAL_S", "TRITON_METRICS_URL",
                 "PROMETHEUS_URL"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def sampled(triton_server: TritonProcess, home: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[TritonProcess]:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    thread = SamplerThread(SamplerOptions(triton_server.metrics_url, home, 0.5), say=lambda message: None)
    thread.start()
    try:
        yield triton_server
    finally:
        thread.stop()


def metrics_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("metrics.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> dict[str, dict[str, Any]]:
    """Every plotly figure on the page, by its title."""
    figures = [json.loads(element.proto.spec) for element in at.get("plotly_chart")]
    return {f["layout"]["title"]["text"]: f for f in figures}


def trace(figure: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in figure["data"] if t.get("name") == name)


def test_without_history_the_page_says_calmly_how_it_gets_some(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_SAMPLE_INTERVAL_S", "3")
    at = metrics_page()
    (info,) = at.info
    assert "every 3 s" in info.value and "`geadmin sampler`" in info.value
    assert not at.error and not at.warning and not at.get("plotly_chart")


def test_under_load_the_charts_have_points_gaps_and_change_markers(
        sampled: TritonProcess, home: Path) -> None:
    load_until(sampled, home, 2)
    record.record_gap(sampled.metrics_url, time.time(), "test: an outage", home=home)  # as the sampler does
    audit.record_action("reload", MODEL, True, f"reloaded '{MODEL}'", server=sampled.http_url,
                        actor=Actor("ann", Origin.DASHBOARD), home=home)
    before = busy_points(sampled, home)
    load_until(sampled, home, before + 2)

    at = metrics_page()
    figures = charts(at)
    assert {"Throughput", "Request latency (average, p50/p90/p99)", "Pending requests", "Batch size",
            "Failures", f"Queue vs compute — {MODEL}"} <= set(figures)
    throughput = trace(figures["Throughput"], MODEL)["y"]
    assert sum(1 for y in throughput if y) >= 4  # points where the load ran
    busy = [i for i, y in enumerate(throughput) if y]
    first, last = busy[0], busy[-1]
    assert None in throughput[first:last]  # the outage is a break in the line, not a point
    latency = figures["Request latency (average, p50/p90/p99)"]
    assert any(y for y in trace(latency, MODEL)["y"])  # the average: the legend entry of the model
    assert any(y for y in trace(latency, f"{MODEL} p99")["y"])
    breakdown = figures[f"Queue vs compute — {MODEL}"]
    assert [t["name"] for t in breakdown["data"] if t["type"] == "bar"] == [
        "queue", "compute input", "compute infer", "compute output"]
    assert any(y for y in trace(breakdown, "compute infer")["y"])
    for title, figure in figures.items():  # the reload is on every chart: a line and its hover text
        markers = trace(figure, "changes")
        assert markers["hovertext"] == [f"reload {MODEL} — ann: reloaded '{MODEL}'"], title
        assert any(shape.get("line", {}).get("dash") == "dot" for shape in figure["layout"]["shapes"]), title
    assert not at.error
    assert not [w.value for w in at.warning if w.value.startswith("Stale")]  # the sampler runs: live


def test_with_prometheus_the_charts_come_from_promql(
        triton_server: TritonProcess, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GEADMIN_PROMETHEUS_URL set: no sampler runs, a real Prometheus scrapes the server, and
    the same charts are drawn from its range queries."""
    prometheus = PrometheusServer(tmp_path / "prometheus", [triton_server.metrics_url]).start()
    try:
        monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
        monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
        monkeypatch.setenv("GEADMIN_PROMETHEUS_URL", prometheus.url)
        reader = PrometheusHistory(prometheus.url)
        deadline = time.monotonic() + 60
        while not any(s.has("inferences_per_s") and sum(1 for r in s.column("inferences_per_s") if r) >= 2
                      for s in reader.model_series(triton_server.metrics_url, history.window_since(5),
                                                   models=[MODEL])):
            assert time.monotonic() < deadline, "Prometheus has no busy points after 60 s"
            send(triton_server, 30)
        at = metrics_page()
        figures = charts(at)
        assert any(y for y in trace(figures["Throughput"], MODEL)["y"])
        assert any(y for y in trace(figures["Request latency (average, p50/p90/p99)"], f"{MODEL} p50")["y"])
        assert any(f"from Prometheus at {prometheus.url}" in c.value for c in at.caption)
        assert not at.error
        assert not history.sources(home=home)  # nothing came from the workspace's history
    finally:
        prometheus.stop()


def test_an_unreachable_prometheus_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_PROMETHEUS_URL", "http://127.0.0.1:9")
    at = metrics_page()
    (error,) = at.error
    assert error.value.startswith("Cannot read the telemetry history: Prometheus at http://127.0.0.1:9 is "
                                  "unreachable"), error.value
    assert "unset GEADMIN_PROMETHEUS_URL" in error.value
    assert not at.get("plotly_chart")


def send(server: TritonProcess, count: int) -> int:
    return send_digits(server.grpc_url, count)
