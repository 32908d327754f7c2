"""`geadmin top` against the real tritonserver (summary latencies on) under a small load:
the model with traffic has positive rates, a latency breakdown, p99 and a verdict; the live
view redraws until Ctrl-C; unreadable metrics exit non-zero with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.cli.main import main
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.bottleneck import DOMINANT_SHARE
from tests.support.processes import wait_for
from tests.support.samples import LOAD_MODEL, small_load

MODEL = LOAD_MODEL  # what small_load sends to


@pytest.fixture(autouse=True)
def _no_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))  # no running stack to pick up
    monkeypatch.delenv("GEADMIN_TRITON_METRICS_URL", raising=False)


def test_top_once_json_under_load_shows_the_model_with_positive_rates_and_a_verdict(
        triton_server: TritonProcess, capsys: pytest.CaptureFixture[str]) -> None:
    with small_load(triton_server):
        code = main(["top", "--once", "--json", "--interval", "2",
                     "--metrics-url", triton_server.metrics_url])
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads(out)
    assert document["metrics_url"] == triton_server.metrics_url and document["window_s"] > 1.5
    (m,) = [x for x in document["models"] if x["model"] == MODEL]
    assert m["inferences_per_s"] > 0 and m["requests_per_s"] > 0 and m["executions_per_s"] > 0
    assert m["avg_batch_size"] >= 1
    assert m["avg_request_ms"] > 0 and m["avg_compute_infer_ms"] > 0 and m["avg_queue_ms"] >= 0
    assert m["quantiles"]["request"]["p99_ms"] >= m["quantiles"]["request"]["p50_ms"] > 0
    assert m["failures_per_s"] == 0
    verdict = m["triage"]
    # The one verdict the window's own shares name (no NPU behind a python model): the stage
    # with half or more of the time, else balanced.
    shares = {"queue-bound": verdict["queue_share"], "compute-bound": verdict["infer_share"],
              "host-bound": verdict["host_share"]}
    largest = max(shares, key=lambda kind: shares[kind])
    assert verdict["verdict"] == (largest if shares[largest] >= DOMINANT_SHARE else "balanced"), verdict
    assert verdict["requests_per_s"] == m["requests_per_s"] and "req/s" in verdict["why"]
    assert verdict["fix"]
    idle = [x for x in document["models"] if x["model"] == "text_normalize"]
    assert idle and idle[0]["requests_per_s"] == 0 and idle[0]["triage"]["verdict"] == "idle"
    assert document["server"]["cpu_memory_total_bytes"] > 0


def test_top_once_prints_one_table_with_the_busy_model_first(
        triton_server: TritonProcess, capsys: pytest.CaptureFixture[str]) -> None:
    with small_load(triton_server):
        code = main(["top", "--once", "--interval", "1.5", "--metrics-url", triton_server.metrics_url])
    out = capsys.readouterr().out
    assert code == 0 and "\x1b[2J" not in out  # --once prints, it does not redraw
    lines = out.splitlines()
    assert lines[0].startswith(f"geadmin top — {triton_server.metrics_url} — window 1.")
    assert lines[1].split()[:4] == ["MODEL", "VER", "INFER/S", "REQ/S"]
    first = lines[2].split()
    assert first[:2] == [MODEL, "1"] and float(first[2]) > 0 and float(first[3]) > 0
    assert any(line.startswith(f"{MODEL}:1 ") and "req/s" in line for line in lines)
    assert any(line.strip().startswith("fix: ") for line in lines)


def ignore_sigint() -> None:
    """As a background job of a shell (and CI) starts it: Ctrl-C must still end `top`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_top_redraws_every_interval_until_ctrl_c(triton_server: TritonProcess, tmp_path: Path) -> None:
    env = {**os.environ, "GEADMIN_HOME": str(tmp_path / "home")}
    process = subprocess.Popen([sys.executable, "-m", "geadmin.cli.main", "top", "--interval", "0.3",
                                "--metrics-url", triton_server.metrics_url],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=ignore_sigint)
    output: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout
    reader = threading.Thread(target=lambda: output.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: "".join(output).count("\x1b[2J") >= 3, 30), "".join(output)
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=15)
    reader.join(timeout=5)
    assert code == 0, process.stderr.read() if process.stderr else ""
    frames = "".join(output).split("\x1b[H\x1b[2J")[1:]
    assert len(frames) >= 3 and all(MODEL in frame and "VERDICT" in frame for frame in frames)


def test_the_live_view_shows_an_outage_in_place_and_recovers(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path) -> None:
    server = triton_factory()
    env = {**os.environ, "GEADMIN_HOME": str(tmp_path / "home")}
    process = subprocess.Popen([sys.executable, "-m", "geadmin.cli.main", "top", "--interval", "0.3",
                                "--metrics-url", server.metrics_url],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=ignore_sigint)
    assert process.stdout is not None
    stdout = process.stdout
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()

    def text() -> str:
        return "".join(output)

    try:
        assert wait_for(lambda: "VERDICT" in text(), 30), text()
        server.stop()
        assert wait_for(lambda: "nothing answers" in text(), 30), text()
        assert process.poll() is None  # still running, retrying
        restarted = triton_factory(repository=server.repository, ports=server.ports)
        assert restarted.metrics_url == server.metrics_url
        assert wait_for(lambda: "VERDICT" in text().rsplit("nothing answers", 1)[1], 30), text()
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=15)
    assert code == 0
    assert "retrying every 0.3s" in text()


@pytest.mark.parametrize("flags", [["--once"], ["--once", "--json"], []])
def test_unreachable_metrics_exit_non_zero_with_one_line(
        flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    assert main(["top", *flags, "--interval", "0.1", "--metrics-url", url]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"geadmin top: metrics at {url}: nothing answers") and "Connection refused" in line
