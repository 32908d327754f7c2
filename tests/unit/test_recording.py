"""One wiring of the sampler, its watchers and geadmin's metrics endpoint
(geadmin.stack.recording), which `geadmin sampler` and `geadmin up` both call."""

from __future__ import annotations

import re
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from geadmin.errors import PortInUseError, SamplerLockedError
from geadmin.stack.processes import free_port
from geadmin.stack.recording import Recording, RecordingOptions
from geadmin.telemetry.history.sampler import SamplerOptions
from tests.support.http_doubles import serve

ROOT = Path(__file__).resolve().parents[2]
METRICS = (ROOT / "tests/unit/assets/telemetry/metrics_2.51_default.txt").read_bytes()  # recorded from Triton
WIRING = {"geadmin/stack/recording.py", "geadmin/telemetry/history/sampler.py",
          "geadmin/telemetry/alerting/exporter.py"}


def test_only_the_recording_wires_a_sampler_or_an_exporter() -> None:
    copies = [f"{path.relative_to(ROOT)}:{number}"
              for path in sorted((ROOT / "geadmin").rglob("*.py"))
              if str(path.relative_to(ROOT)) not in WIRING
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"\b(Sampler|SamplerThread|MetricsEndpoint)\(", line)]
    assert not copies, f"start the sampler through geadmin.stack.recording.Recording: {copies}"


def test_a_recording_samples_runs_its_watchers_serves_metrics_and_stops_whole(tmp_path: Path) -> None:
    ticked = threading.Event()
    home, port = tmp_path / "home", free_port()
    with serve(METRICS) as url:
        recording = Recording(RecordingOptions(
            SamplerOptions(url, home, 0.2), watchers=[ticked.set], watching="the planted watcher",
            metrics_port=port), say=lambda message: None)
        with pytest.raises(SamplerLockedError, match="another sampler"):  # claimed when made
            Recording(RecordingOptions(SamplerOptions(url, home, 0.2)), say=lambda message: None)
        served = recording.serve_metrics()
        assert served == f"http://127.0.0.1:{port}/metrics"
        assert recording.lines() == [
            f"sampling {url} every 0.2s into {home / 'geadmin.db'} (kept 24 h)",
            "probing the planted watcher",
            f"geadmin's metrics at {served} (probes, model states, objectives)"]
        recording.start()
        try:
            assert ticked.wait(10), "the watcher never ran"
            with urllib.request.urlopen(served, timeout=10) as answer:
                assert answer.status == 200
        finally:
            recording.stop()
        assert not recording.alive()
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(served, timeout=5)
        Recording(RecordingOptions(SamplerOptions(url, home, 0.2)), say=lambda message: None).stop()  # free


def test_a_taken_metrics_port_is_said_with_the_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        recording = Recording(RecordingOptions(SamplerOptions("http://127.0.0.1:9/metrics", tmp_path, 1.0),
                                               metrics_port=port), say=lambda message: None)
        try:
            said = f"geadmin's metrics not served on port {port}"
            with pytest.raises(PortInUseError, match=said) as caught:
                recording.serve_metrics()
            assert caught.value.port == port
        finally:
            recording.stop()


def test_with_a_fault_url_the_recording_records_the_host_s_faults_for_the_exporter_without_probes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher is wired to its server and the sampler's sources, with no probes asked
    (`geadmin sampler --no-probes` had turned it off too); the report is handed in place of the
    readers (`report_double`: geadmin.ops.npu.wiring is where they are called)."""
    from geadmin.diagnose.npu_faults import FaultReport
    from geadmin.ops.npu.wiring import HostFaultSources
    from geadmin.stack import recording as wiring_module
    from geadmin.telemetry.sources.fault_table import FaultLevel
    from tests.support.fault_reports import HBM_ECC, impact, report

    asked: list[HostFaultSources] = []

    def report_double(sources: HostFaultSources, now_s: float, *, home: Path | None = None) -> FaultReport:
        asked.append(sources)
        return report(impact(3, HBM_ECC, FaultLevel.RESTART_NPU))

    monkeypatch.setattr(wiring_module, "current_report", report_double)
    home, port = tmp_path / "home", free_port()
    with serve(METRICS) as url:
        recording = Recording(RecordingOptions(
            SamplerOptions(url, home, 0.2, exporter_url="http://127.0.0.1:9/exporter"),
            fault_url="http://127.0.0.1:9", metrics_port=port), say=lambda message: None)
        served = recording.serve_metrics()
        assert "recording the NPU faults of http://127.0.0.1:9's host (every 10s)" in recording.lines()
        assert not any(line.startswith("probing") for line in recording.lines())
        recording.start()
        try:
            def exported() -> bool:
                with urllib.request.urlopen(str(served), timeout=10) as answer:
                    return b'geadmin_npu_fault{code="0x80E01801",level="RestartNPU",node="",npu="3"} 1.0' \
                        in answer.read()
            deadline = threading.Event()
            for _ in range(100):
                if exported():
                    break
                deadline.wait(0.1)
            assert exported()
        finally:
            recording.stop()
    (sources, *_) = asked
    assert (sources.client.url, sources.triton_metrics_url, sources.exporter_url) == (
        "http://127.0.0.1:9", url, "http://127.0.0.1:9/exporter")
