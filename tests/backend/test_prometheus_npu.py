"""NPU history from Prometheus: a real Prometheus scrapes the real tritonserver running npu_ge
on the ACL runtime test double (two devices); the Prometheus reader lists Triton's page as an
NPU source and gives each device's utilization and HBM over time, as the sampler's history
does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.store import window_since
from tests.support.npu_ge import StartServer, affine_model
from tests.support.prometheus import PrometheusServer

pytestmark = pytest.mark.integration


def test_npu_ge_devices_come_from_promql(npu_triton: StartServer, npu_repo: Path, tmp_path: Path) -> None:
    affine_model(npu_repo, "pair", instances=2, device_ids="0,1")
    server = npu_triton(npu_repo, extra_args=["--backend-config=npu_ge,telemetry_interval_ms=200"])
    prometheus = PrometheusServer(tmp_path / "prometheus", [server.metrics_url]).start()
    try:
        prometheus.wait_for('npu_ge_hbm_total_bytes{device="1"}')
        reader = PrometheusHistory(prometheus.url)
        deadline = time.monotonic() + 30
        while len(series := reader.npu_series(server.metrics_url, window_since(5))) < 2 or \
                not all(s.points >= 2 for s in series):
            assert time.monotonic() < deadline, series
            time.sleep(0.5)
        assert reader.npu_sources() == [server.metrics_url]
    finally:
        prometheus.stop()
    assert [s.name for s in series] == ["NPU 0", "NPU 1"]
    for s in series:
        used = [v for v in s.column("hbm_used_bytes") if v is not None]
        total = [v for v in s.column("hbm_total_bytes") if v is not None]
        assert used and total and all(0 < u <= t for u, t in zip(used, total, strict=False)), s
        assert s.has("aicore_util_pct")
        assert not s.has("temperature_c")  # npu_ge publishes none: absent, never 0
