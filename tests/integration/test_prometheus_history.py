"""The charts' history read from a real Prometheus (GEADMIN_PROMETHEUS_URL) scraping the real
tritonserver: the same series the sampler's history gives — rates and latencies agreeing with
the requests sent, the summary quantiles, the source named by its scrape URL — a Triton
restart drawn as a gap with no negative rate or spike, a target that is down named with
Prometheus's reason, and every failure of Prometheus itself a specific error."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.errors import ConfigError, PrometheusError
from geadmin.settings import parse_http_url
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.reader import PrometheusHistory as ChosenPrometheus
from geadmin.telemetry.history.reader import WorkspaceHistory, open_history
from geadmin.telemetry.history.store import Series
from tests.support.processes import quick_stopping_triton, wait_for
from tests.support.prometheus import PrometheusServer
from tests.support.samples import copy_samples, send_digits

MODEL = "digits_classifier"
Started = Callable[[list[str]], PrometheusServer]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Started]:
    started: list[PrometheusServer] = []

    def start(metrics_urls: list[str]) -> PrometheusServer:
        server = PrometheusServer(tmp_path / f"prometheus{len(started)}", metrics_urls)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def send(server: TritonProcess, count: int) -> int:
    return send_digits(server.grpc_url, count)


def minutes_ago(minutes: float) -> datetime:
    return datetime.now(timezone.utc) - timedelta(minutes=minutes)


def model(reader: PrometheusHistory, source: str) -> Series | None:
    found = reader.model_series(source, minutes_ago(5), models=[MODEL])
    return found[0] if found else None


def busy_points(reader: PrometheusHistory, source: str) -> int:
    s = model(reader, source)
    return 0 if s is None else sum(1 for r in s.column("inferences_per_s") if r)


def load(triton: TritonProcess, reader: PrometheusHistory, points: int) -> int:
    """Requests until the history has `points` busy points (bounded); returns how many were sent."""
    deadline = time.monotonic() + 60
    sent = 0
    while busy_points(reader, triton.metrics_url) < points:
        assert time.monotonic() < deadline, f"fewer than {points} busy points after 60 s"
        sent += send(triton, 30)
    return sent


def test_rates_latencies_and_quantiles_come_from_promql_and_agree_with_the_load(
        triton_factory: Callable[..., TritonProcess], prometheus: Started) -> None:
    triton = triton_factory(models=[MODEL])
    server = prometheus([triton.metrics_url])
    reader = PrometheusHistory(server.url)
    sent = load(triton, reader, points=3)

    [overview] = reader.sources()
    assert overview.source == triton.metrics_url  # named as the sampler names it
    assert MODEL in overview.models and overview.down == ""
    s = model(reader, triton.metrics_url)
    assert s is not None and s.name == MODEL
    rates = [r for r in s.column("inferences_per_s") if r]
    assert all(r > 0 for r in rates)
    # never more inferences than were really sent (rate x step summed over the points)
    assert sum((r or 0) * span for r, span in zip(s.column("inferences_per_s"), s.spans_s, strict=True)) \
        <= sent * 1.5  # Prometheus extrapolates to the window's edges: a bounded overshoot
    assert s.has("avg_request_ms") and s.has("avg_compute_infer_ms") and s.has("avg_queue_ms")
    # every request is one row (requests = inferences); 4 clients at a time batch at most 4 rows
    assert s.has("avg_batch_size")
    assert all(1.0 - 1e-9 <= b <= 4.0 + 1e-9 for b in s.column("avg_batch_size") if b is not None)
    for req, inf in zip(s.column("requests_per_s"), s.column("inferences_per_s"), strict=True):
        assert (req is None) == (inf is None) and (req is None or req == pytest.approx(inf))
    assert s.has("p50_ms") and s.has("p99_ms")  # Triton runs with summary_latencies=true
    # the request time contains the compute time
    for total, infer in zip(s.column("avg_request_ms"), s.column("avg_compute_infer_ms"), strict=True):
        if total is not None and infer is not None:
            assert total >= infer
    assert s.column("failures_per_s")[-1] == 0


def test_a_triton_restart_is_a_gap_never_a_negative_rate_or_a_spike(
        tmp_path: Path, prometheus: Started) -> None:
    repository = copy_samples(tmp_path / "repo")
    first = quick_stopping_triton(repository, models=[MODEL], log_path=tmp_path / "triton1.log")
    first.start()
    second: TritonProcess | None = None
    try:
        server = prometheus([first.metrics_url])
        reader = PrometheusHistory(server.url)
        sent = load(first, reader, points=3)
        first.stop(timeout_s=10)
        # down for longer than the rate window (4 scrape intervals): the history has a hole
        assert wait_for(lambda: any(o.down for o in reader.sources()), 15)
        [down] = reader.sources()
        assert down.down.startswith("Prometheus reports the target down: ")
        assert "connection refused" in down.down or "connect" in down.down, down.down
        time.sleep(4)
        second = quick_stopping_triton(repository, models=[MODEL], ports=first.ports,
                               log_path=tmp_path / "triton2.log")
        second.start()
        sent += load(second, reader, points=busy_points(reader, first.metrics_url) + 3)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    s = model(reader, first.metrics_url)
    assert s is not None
    rates = s.column("inferences_per_s")
    assert all(r is None or r >= 0 for r in rates), rates
    busy = [i for i, r in enumerate(rates) if r]
    gaps = [i for i, r in enumerate(rates) if r is None]
    assert gaps and busy[0] < max(gaps) < busy[-1], rates  # a break between the two runs' traffic
    assert sum((r or 0) * span for r, span in zip(rates, s.spans_s, strict=True)) <= sent * 1.5


def test_npu_sources_are_empty_for_a_triton_without_npu_ge(
        triton_factory: Callable[..., TritonProcess], prometheus: Started) -> None:
    triton = triton_factory(models=[MODEL])
    server = prometheus([triton.metrics_url])
    server.wait_for("nv_inference_count")
    reader = PrometheusHistory(server.url)
    assert reader.npu_sources() == []


def test_failures_of_prometheus_itself_are_specific_errors(
        triton_factory: Callable[..., TritonProcess], prometheus: Started) -> None:
    with pytest.raises(PrometheusError, match=r"^Prometheus at http://127\.0\.0\.1:9 is unreachable "
                                              r"\(ConnectionError\): check the URL, or unset "
                                              "GEADMIN_PROMETHEUS_URL"):
        PrometheusHistory("http://127.0.0.1:9").sources()
    triton = triton_factory(models=[MODEL])
    # Triton's HTTP port is no Prometheus: its answer names the likely mistake
    with pytest.raises(PrometheusError, match=r"answered HTTP 404 to /api/v1/targets, not as Prometheus's "
                                              "API does: is GEADMIN_PROMETHEUS_URL its base URL"):
        PrometheusHistory(triton.http_url).sources()
    server = prometheus([triton.metrics_url])
    reader = PrometheusHistory(server.url)
    with pytest.raises(PrometheusError, match=r"does not scrape http://elsewhere:8002/metrics: add it to a "
                                              "scrape job, or unset GEADMIN_PROMETHEUS_URL"):
        reader.model_series("http://elsewhere:8002/metrics", minutes_ago(5))


def test_the_setting_chooses_the_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GEADMIN_PROMETHEUS_URL", raising=False)
    assert isinstance(open_history(tmp_path), WorkspaceHistory)
    monkeypatch.setenv("GEADMIN_PROMETHEUS_URL", "http://prometheus:9090/")
    chosen = open_history(tmp_path)
    assert isinstance(chosen, ChosenPrometheus) and chosen.url == "http://prometheus:9090"
    monkeypatch.setenv("GEADMIN_PROMETHEUS_URL", "prometheus:9090")
    with pytest.raises(ConfigError, match="must be an http"):
        open_history(tmp_path)
    assert parse_http_url("https://mon.example/prometheus/") == "https://mon.example/prometheus"
