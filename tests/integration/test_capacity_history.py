"""The recorded load capacity reads, from both histories of one real tritonserver under a
constant request rate (perf_analyzer): the sampler's rows in the workspace SQLite and a real
Prometheus scraping the same /metrics give the same recorded peak, near the rate offered, each
named by its source (read through `read_load`, the one place capacity reads traffic)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.access import guard
from geadmin.ops.bench.load_test import run_perf_analyzer
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.bench.results import REQUEST_RATE
from geadmin.ops.capacity.report import read_load
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.reader import WorkspaceHistory
from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread
from tests.support.capacity_models import add_paced_model
from tests.support.prometheus import PrometheusServer

MODEL = "paced"
RATE = 20.0  # req/s offered, well under the model's 200/s


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[str], PrometheusServer]]:
    started: list[PrometheusServer] = []

    def start(metrics_url: str) -> PrometheusServer:
        started.append(PrometheusServer(tmp_path / "prometheus", [metrics_url]).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


def test_the_sampler_and_prometheus_give_the_same_recorded_peak(
        tmp_path: Path, triton_factory: Callable[..., TritonProcess],
        prometheus: Callable[[str], PrometheusServer]) -> None:
    repository = tmp_path / "repo"
    repository.mkdir()
    add_paced_model(repository, MODEL, service_s=0.005, instances=1)
    triton = triton_factory(repository, models=[MODEL])
    home = tmp_path / "home"
    scraper = prometheus(triton.metrics_url)
    sampler = SamplerThread(SamplerOptions(triton.metrics_url, home, 1.0), say=lambda message: None).start()
    since = datetime.now(timezone.utc)
    try:
        run_perf_analyzer(BenchSettings(MODEL, triton.http_url, mode=REQUEST_RATE, loads=(RATE,),
                                        measurement_interval_ms=4000, stability_percentage=50.0,
                                        max_trials=3),
                          auth=guard.os_user())
        scraper.wait_for(f'nv_inference_request_success{{model="{MODEL}"}} > 0')
    finally:
        sampler.stop()
    until = datetime.now(timezone.utc) + timedelta(seconds=2)
    sqlite = read_load(WorkspaceHistory(home), triton.metrics_url, MODEL, since - timedelta(seconds=5), until)
    prom = read_load(PrometheusHistory(scraper.url), triton.metrics_url, MODEL, since - timedelta(seconds=5),
                     until)
    assert sqlite.samples >= 5 and prom.samples >= 3, (sqlite, prom)
    assert sqlite.peak_rate_rps is not None and prom.peak_rate_rps is not None
    assert sqlite.peak_rate_rps == pytest.approx(RATE, rel=0.3), sqlite.describe()
    assert prom.peak_rate_rps == pytest.approx(RATE, rel=0.3), prom.describe()
    assert prom.peak_rate_rps == pytest.approx(sqlite.peak_rate_rps, rel=0.25), \
        (sqlite.describe(), prom.describe())
    assert "geadmin.db" in sqlite.source and scraper.url in prom.source
