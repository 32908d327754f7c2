"""`geadmin top` points an ensemble at its slowest member, like the Overview's card (the same
triage with `served_facts`), against the real tritonserver serving the sample pipeline."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from geadmin.cli.main import main
from geadmin.stack.tritonserver import TritonProcess
from tests.support.samples import EXAMPLES


@pytest.fixture(autouse=True)
def _no_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    for name in ("SERVERS_FILE", "TRITON_URLS", "ADMIN_KEY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def pipeline_load(server: TritonProcess, stop: threading.Event) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    image = grpcclient.InferInput("IMAGE", [1, 8, 8], "UINT8")
    image.set_data_from_numpy(EXAMPLES["images"][:1].astype(np.uint8))
    while not stop.is_set():
        client.infer("digits_pipeline", [image], client_timeout=30)


def top_once(server: TritonProcess, capsys: pytest.CaptureFixture[str]) -> dict:
    stop = threading.Event()
    worker = threading.Thread(target=pipeline_load, args=(server, stop), daemon=True)
    worker.start()
    try:
        code = main(["top", "--once", "--json", "--interval", "2", "--metrics-url", server.metrics_url])
    finally:
        stop.set()
        worker.join(timeout=30)
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads(out)
    (pipeline,) = [m for m in document["models"] if m["model"] == "digits_pipeline"]
    return pipeline["triage"]


def test_top_points_the_ensemble_at_its_slowest_member(
        triton_server: TritonProcess, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    triage = top_once(triton_server, capsys)
    assert triage["slow_member"] in {"digits_preprocess", "digits_classifier", "digits_postprocess"}
    assert triage["fix"].startswith(f"its time is its members': {triage['slow_member']} takes")


def test_top_measuring_another_server_than_the_configured_one_asks_it_nothing(
        triton_server: TritonProcess, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://127.0.0.1:9")  # configured: another server
    triage = top_once(triton_server, capsys)
    assert triage["slow_member"] == "" and not triage["fix"].startswith("its time is its members'")
