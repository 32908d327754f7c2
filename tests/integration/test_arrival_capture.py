"""Capturing a model's request arrivals from a real tritonserver's trace API: the count and
spacing of known traffic, tracing back OFF afterwards (also when the capture is cut short), and
a clear refusal from a Triton started without a trace file."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.errors import TraceFileError
from geadmin.ops.capacity.capture import capture_arrivals
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history.arrivals import latest_capture
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth
from tests.support.processes import wait_for

pytestmark = pytest.mark.integration

MODEL = "text_normalize"
REQUEST = json.dumps({"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES",
                                  "data": ["Hello There"]}]}).encode()


def send(server: TritonProcess, count: int, gap_s: float) -> None:
    for _ in range(count):
        request = urllib.request.Request(f"{server.http_url}/v2/models/{MODEL}/infer", data=REQUEST,
                                         method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
        time.sleep(gap_s)


def level(server: TritonProcess) -> list[str]:
    with TritonClient(server.http_url) as client:
        return list(client.trace_settings(MODEL)["trace_level"])


@pytest.fixture
def traced(tmp_path: Path, triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    (tmp_path / "traces").mkdir()
    return triton_factory(models=[MODEL], trace_file=tmp_path / "traces" / "trace.json")


def test_a_capture_records_every_arrival_of_known_traffic_and_leaves_tracing_off(
        traced: TritonProcess, tmp_path: Path) -> None:
    home, done, found = tmp_path / "home", threading.Event(), []
    send(traced, 5, 0.0)  # traffic before the capture is not in it

    def capture() -> None:
        with TritonClient(traced.http_url) as client:
            found.append(capture_arrivals(client, MODEL, auth=admin_auth(), seconds=60, home=home,
                                          cancel=done))

    worker = threading.Thread(target=capture)
    worker.start()
    try:
        assert wait_for(lambda: level(traced) == ["TIMESTAMPS"], 10), "tracing never turned on"
        send(traced, 30, 0.02)
    finally:
        done.set()
        worker.join(timeout=30)
    [capture] = found
    assert capture.count == 30 and len(capture.intervals_us) == 29, capture
    assert all(interval >= 20_000 for interval in capture.intervals_us)  # the 20 ms the sender waits
    assert level(traced) == ["OFF"]  # back to the global setting
    stored = latest_capture(home=home, server=traced.http_url, model=MODEL, since_s=0.0)
    assert stored is not None and stored.intervals_us == capture.intervals_us
    send(traced, 3, 0.0)  # after the capture: not traced
    assert level(traced) == ["OFF"]


class CutShort(threading.Event):
    """A wait that ends in Ctrl-C, as a capture interrupted at the terminal."""

    def wait(self, timeout: float | None = None) -> bool:
        raise KeyboardInterrupt


def test_a_capture_cut_short_turns_tracing_off(traced: TritonProcess, tmp_path: Path) -> None:
    with TritonClient(traced.http_url) as client, pytest.raises(KeyboardInterrupt):
        capture_arrivals(client, MODEL, auth=admin_auth(), seconds=60, home=tmp_path / "home",
                         cancel=CutShort())
    assert level(traced) == ["OFF"]


def test_a_triton_without_a_trace_file_is_refused_naming_the_flag(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path) -> None:
    server = triton_factory(models=[MODEL])
    with TritonClient(server.http_url) as client, pytest.raises(TraceFileError) as caught:
        capture_arrivals(client, MODEL, auth=admin_auth(), seconds=5, home=tmp_path / "home")
    assert "was started without a trace file" in str(caught.value)
    assert "--trace-config=triton,file=DIR/trace.json --trace-config=level=OFF" in str(caught.value)
    assert level(server) == ["OFF"]


def test_the_command_captures_while_traffic_flows_and_tune_finds_the_capture(
        traced: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from geadmin.cli.exit_codes import ExitCode
    from geadmin.cli.main import main

    def traffic() -> None:
        if wait_for(lambda: level(traced) == ["TIMESTAMPS"], 10):
            send(traced, 12, 0.05)

    sender = threading.Thread(target=traffic)
    sender.start()
    code = main(["traffic", "capture", MODEL, "--url", traced.http_url, "--seconds", "3",
                 "--home", str(tmp_path / "home")])
    sender.join(timeout=30)
    out = capsys.readouterr().out
    assert code == ExitCode.OK, out
    assert out.startswith(f"{MODEL}: 12 recorded arrivals from "), out
    assert level(traced) == ["OFF"]


def test_a_model_s_own_trace_settings_are_put_back_and_a_second_capture_is_refused(
        traced: TritonProcess, tmp_path: Path) -> None:
    home, done, errors = tmp_path / "home", threading.Event(), []
    with TritonClient(traced.http_url) as client:
        client.update_trace_settings(MODEL, {"trace_rate": "7"})  # the operator's own, kept

        def first() -> None:
            with TritonClient(traced.http_url) as own:
                capture_arrivals(own, MODEL, auth=admin_auth(), seconds=60, home=home, cancel=done)

        worker = threading.Thread(target=first)
        worker.start()
        try:
            assert wait_for(lambda: level(traced) == ["TIMESTAMPS"], 10), "tracing never turned on"
            try:
                capture_arrivals(client, MODEL, auth=admin_auth(), seconds=5, home=home)
            except TraceFileError as exc:
                errors.append(str(exc))
        finally:
            done.set()
            worker.join(timeout=30)
        assert errors and errors[0].startswith(f"another capture of {MODEL} is under way (capture of {MODEL}")
        after = client.trace_settings(MODEL)
    assert after["trace_rate"] == "7" and list(after["trace_level"]) == ["OFF"], after
