"""The telemetry sampler against real tritonservers: under a small load it writes points with
positive rates; Triton restarted under it is survived (no crash), drawn as a gap, never a
spike; the workspace lock refuses a second sampler; `geadmin sampler` stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.errors import SamplerLockedError
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history import record
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.sampler import Sampler, SamplerOptions, SamplerThread
from tests.support.processes import OutputCollector, quick_stopping_triton, wait_for
from tests.support.samples import copy_samples, send_digits

MODEL = "digits_classifier"
INTERVAL_S = 0.5
GEADMIN = [sys.executable, "-m", "geadmin.cli"]
Starter = Callable[[TritonProcess], SamplerThread]


def send(server: TritonProcess, count: int) -> int:
    return send_digits(server.grpc_url, count)


def ten_minutes_ago() -> datetime:
    return datetime.now(timezone.utc) - timedelta(minutes=10)


def series(home: Path, source: str) -> history.Series | None:
    found = history.model_series(source, ten_minutes_ago(), models=[MODEL], home=home)
    return found[0] if found else None


def positive_points(home: Path, source: str) -> int:
    s = series(home, source)
    return 0 if s is None else sum(1 for r in s.column("inferences_per_s") if r)


@pytest.fixture
def sampling(tmp_path: Path) -> Iterator[Starter]:
    started: list[SamplerThread] = []

    def start(server: TritonProcess) -> SamplerThread:
        thread = SamplerThread(SamplerOptions(server.metrics_url, tmp_path / "home", INTERVAL_S),
                               say=lambda message: None).start()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.stop()


def test_under_load_the_sampler_writes_points_with_positive_rates(
        triton_server: TritonProcess, sampling: Starter, tmp_path: Path) -> None:
    home = tmp_path / "home"
    thread = sampling(triton_server)
    deadline = time.monotonic() + 30
    while positive_points(home, triton_server.metrics_url) < 3 and time.monotonic() < deadline:
        send(triton_server, 40)
    s = series(home, triton_server.metrics_url)
    assert s is not None and positive_points(home, triton_server.metrics_url) >= 3
    busy = [i for i, r in enumerate(s.column("inferences_per_s")) if r]
    assert all(s.column("avg_request_ms")[i] for i in busy)  # latency where there was traffic
    assert all(s.column("p99_ms")[i] for i in busy)  # summary quantiles: the fixture runs with them on
    assert all(0 < s.spans_s[i] < 5 for i in busy)  # ~ the interval each
    server = history.server_series(triton_server.metrics_url, ten_minutes_ago(), home=home)
    assert server.has("cpu_memory_total_bytes")
    started = time.monotonic()
    thread.stop()
    assert not thread.alive() and time.monotonic() - started < 3


def test_triton_restarted_under_the_sampler_is_a_gap_not_a_spike(
        tmp_path: Path, sampling: Starter) -> None:
    home = tmp_path / "home"
    repository = copy_samples(tmp_path / "repo")
    first = quick_stopping_triton(repository, models=[MODEL], log_path=tmp_path / "triton1.log")
    first.start()
    second: TritonProcess | None = None
    try:
        thread = sampling(first)
        sent = 0
        while positive_points(home, first.metrics_url) < 2:
            sent += send(first, 40)
        first.stop(timeout_s=10)  # down: the sampler scrapes nothing for a while
        assert wait_for(lambda: thread.sampler.previous is None, 5)
        second = quick_stopping_triton(repository, models=[MODEL], ports=first.ports,
                               log_path=tmp_path / "triton2.log")
        second.start()
        before = positive_points(home, first.metrics_url)
        while positive_points(home, first.metrics_url) < before + 2:
            sent += send(second, 40)
        assert thread.alive()  # survived Triton going away and coming back
    finally:
        first.stop()
        if second is not None:
            second.stop()

    s = series(home, first.metrics_url)
    assert s is not None
    rates = s.column("inferences_per_s")
    assert all(r is None or r >= 0 for r in rates)
    busy = [i for i, r in enumerate(rates) if r]
    gaps = [i for i, r in enumerate(rates) if r is None]
    assert gaps and busy[0] < gaps[0] < busy[-1], rates  # a break between the two runs' traffic
    # never a spike: the points account for at most the inferences really sent
    assert sum((r or 0) * span for r, span in zip(rates, s.spans_s, strict=True)) <= sent + 1e-6
    server = history.server_series(first.metrics_url, ten_minutes_ago(), home=home)
    assert any(v is None for v in server.column("cpu_utilization_pct"))


def test_the_workspace_lock_refuses_a_second_sampler(
        triton_server: TritonProcess, sampling: Starter, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = sampling(triton_server)
    env = {**os.environ, "GEADMIN_HOME": str(home)}
    refused = subprocess.run([*GEADMIN, "sampler", "--metrics-url", triton_server.metrics_url],
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2
    assert f"another sampler (pid {os.getpid()}) already records" in refused.stderr
    assert "Traceback" not in refused.stderr
    with pytest.raises(SamplerLockedError, match="another sampler"):
        SamplerThread(SamplerOptions(triton_server.metrics_url, home, INTERVAL_S))
    first.stop()

    # the lock is free again: the CLI samples, and SIGTERM stops it at once
    process = subprocess.Popen([*GEADMIN, "sampler", "--interval", "0.5", "--metrics-url",
                                triton_server.metrics_url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
    try:
        collector = OutputCollector(process)
        collector.wait_for("Ctrl-C stops", timeout_s=60)
        load = threading.Thread(target=send, args=(triton_server, 80))
        load.start()
        load.join()
        assert wait_for(lambda: positive_points(home, triton_server.metrics_url) >= 1, 20)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - started < 3
        assert "sampler stopped" in collector.wait_for("sampler stopped", timeout_s=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_tick_with_nothing_listening_records_a_gap_and_does_not_raise(tmp_path: Path) -> None:
    from geadmin.stack.processes import free_port

    url = f"http://127.0.0.1:{free_port()}/metrics"
    sampler = Sampler(SamplerOptions(url, tmp_path, INTERVAL_S), say=lambda message: None)
    tick = sampler.tick()
    assert tick.gap.startswith(f"metrics at {url}: nothing answers")
    assert sampler.previous is None  # the next answer is a new baseline
    (overview,) = history.sources(home=tmp_path)
    assert overview.source == url and overview.down == tick.gap and overview.models == ()
    assert sampler.tick().gap == tick.gap  # and the next tick does the same, no exception


def test_geadmin_up_samples_its_triton_and_stops_the_sampler_with_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.stack import running_up

    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_SAMPLE_INTERVAL_S", "0.5")  # read by the `geadmin up` subprocess below
    with running_up(home, wait_for="models: ") as up:
        url = f"http://127.0.0.1:{up.metrics}/metrics"
        assert f"sampling {url} every 0.5s into {home / 'geadmin.db'}" in up.output
        assert wait_for(lambda: any(o.source == url and o.models for o in history.sources(home=home)), 20)
        refused = subprocess.run([*GEADMIN, "sampler", "--metrics-url", url], capture_output=True,
                                 text=True, env={**os.environ, "GEADMIN_HOME": str(home)}, timeout=60)
        assert refused.returncode == 2 and "another sampler" in refused.stderr
        started = time.monotonic()
        up.process.send_signal(signal.SIGTERM)
        assert up.process.wait(timeout=15) == 0
        assert time.monotonic() - started < 15
    assert "Traceback" not in up.collector.text


def test_a_bug_in_a_tick_is_reported_once_and_the_loop_goes_on(
        triton_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(record, "record_window", broken)
    said: list[str] = []
    sampler = Sampler(SamplerOptions(triton_server.metrics_url, tmp_path, 0.2), say=said.append)
    stop = threading.Event()
    loop = threading.Thread(target=sampler.run, args=(stop,))
    loop.start()
    assert wait_for(lambda: sampler.ticks >= 5, 10)
    stop.set()
    loop.join(timeout=3)
    assert not loop.is_alive()
    assert said == ["sampler: internal error: RuntimeError: boom"]  # once, not on every tick
