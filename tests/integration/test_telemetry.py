"""geadmin.telemetry against the real tritonserver (summary latencies on): inferences sent to
a sample model show up in the derived rates, latencies and quantiles; the NPU detection
reads the real metrics page and says calmly that this Triton has no npu_ge devices — and,
with the npu_ge backend on the ACL test double, lists its devices and the model map."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.cli.main import main
from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.derive import derive
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.scrape import Scrape, scrape
from tests.support.npu_ge import affine_model, build_backend
from tests.support.processes import quick_stopping_triton
from tests.support.samples import send_digits

MODEL = "digits_classifier"
REQUESTS = 40


def successes(page: Scrape) -> float:
    return page.value("nv_inference_request_success", model=MODEL, version="1") or 0.0


def send(server: TritonProcess, count: int) -> int:
    return send_digits(server.grpc_url, count)


def scrape_when(server: TritonProcess, ready: Callable[[Scrape], bool], timeout_s: float = 15) -> Scrape:
    deadline = time.monotonic() + timeout_s
    page = scrape(server.metrics_url, timeout_s=10)
    while not ready(page) and time.monotonic() < deadline:
        time.sleep(0.2)
        page = scrape(server.metrics_url, timeout_s=10)
    return page


def test_inferences_appear_as_positive_rates_latencies_and_quantiles(triton_server: TritonProcess) -> None:
    # Triton polls the host every 2 s: until then its CPU gauges read 0 (derive says None)
    before = scrape_when(triton_server, lambda p: (p.value("nv_cpu_memory_total_bytes") or 0) > 0)
    send(triton_server, REQUESTS)
    after = scrape_when(triton_server, lambda p: successes(p) >= successes(before) + REQUESTS)

    window = derive(before, after)
    m = window.model(MODEL, "1")
    assert m is not None, [x.model for x in window.models]
    assert not m.counters_reset
    assert m.successes_per_s is not None
    assert round(m.successes_per_s * window.window_s) == REQUESTS  # exactly the requests we sent
    assert m.inferences_per_s is not None and m.inferences_per_s > 0
    assert m.executions_per_s is not None and 0 < m.executions_per_s <= m.inferences_per_s
    assert m.avg_batch_size is not None and m.avg_batch_size >= 1  # dynamic batching may group them
    assert m.failures_per_s == 0
    for stage in ("request", "queue", "compute_infer"):
        average = m.avg_ms(stage)
        assert average is not None and average >= 0, stage
    assert m.avg_request_ms is not None and m.avg_compute_infer_ms is not None
    assert 0 < m.avg_compute_infer_ms <= m.avg_request_ms
    request = m.quantiles_for("request")  # the fixture's Triton runs with summary_latencies=true
    assert request is not None and request.p50_ms is not None and request.p50_ms > 0
    assert request.p99_ms is not None and request.p99_ms >= request.p50_ms
    assert window.server.cpu_memory_total_bytes is not None and window.server.cpu_memory_total_bytes > 0
    assert window.server.cpu_memory_used_bytes is not None and window.server.cpu_memory_used_bytes > 0
    assert window.server.cpu_utilization_pct is not None and 0 <= window.server.cpu_utilization_pct <= 100


def test_npu_detection_on_a_triton_without_npu_ge_says_so_calmly(triton_server: TritonProcess) -> None:
    report = detect(NpuSources(triton_metrics_url=triton_server.metrics_url, triton_metrics_explicit=True),
                    which=lambda name: None)
    assert report.devices == ()
    assert report.summary == ("no Ascend NPU on this host: npu-smi not found, no npu-exporter configured, "
                              "Triton publishes no npu_ge metrics")


@pytest.mark.integration
def test_npu_ge_devices_and_the_model_map_come_from_the_real_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The real tritonserver with the npu_ge backend on the ACL test double (tests/backend)."""
    build = build_backend()
    repo = tmp_path / "repo"
    repo.mkdir()
    affine_model(repo, "pair", instances=2, device_ids="0,1")
    affine_model(repo, "single", instances=1, device_ids="1")
    server = quick_stopping_triton(repo, models=["pair", "single"], log_path=tmp_path / "triton.log",
                           backend_dir=prepare_backend_directory(tmp_path / "backends",
                                                                 extra={"npu_ge": build.lib_dir}),
                           ld_library_path=[build.double_dir],
                           env={"NPU_GE_DOUBLE_STATE_FILE": str(tmp_path / "acl_double_state.json")},
                           extra_args=["--backend-config=npu_ge,telemetry_interval_ms=100"])
    server.start(timeout_s=120)
    try:
        report = detect(NpuSources(triton_metrics_url=server.metrics_url, triton_metrics_explicit=True),
                        which=lambda name: None)
        assert report.source == "triton" and [d.id for d in report.devices] == [0, 1]
        device0, device1 = report.devices
        assert [p.instance for p in device0.models or ()] == ["pair_0_0"]
        assert sorted(p.model for p in device1.models or ()) == ["pair", "single"]
        assert device1.hbm_total_bytes is not None and device1.hbm_total_bytes > 0
        assert device1.temperature_c is None  # npu_ge publishes none: unknown, not 0

        monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi
        monkeypatch.delenv("GEADMIN_NPU_EXPORTER_URL", raising=False)
        assert main(["npu", "--metrics-url", server.metrics_url]) == 0
        out = capsys.readouterr().out
        assert out.startswith("2 NPUs (triton)")
        assert "pair:1 (pair_0_1), single:1 (single_0_0)" in out
    finally:
        server.stop()
