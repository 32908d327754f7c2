"""Charts people can read, through AppTest against real components: the Metrics page (a real
sampler on the real tritonserver) keeps its legend under the plot with one entry per model and
redraws for a new range in the same run; the Load test comparison (runs in the real workspace
database) defaults to the two latest runs and never pairs a run with itself; the Playground
shows an uploaded image as it was sent and the outputs in the model's order; the Overview's
bottleneck card points an ensemble at its member."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import streamlit as st
import tritonclient.grpc as grpcclient
from streamlit.testing.v1 import AppTest

from geadmin.ops.bench.results import CONCURRENCY, BenchRun, parse_csv, save_run
from geadmin.ops.infer.inputs import SourceKind
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread
from pages.ui.charts import LEGEND_MAX_CHARS, PLOT_HEIGHT_PX
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.samples import EXAMPLES, digit_png, load_until

CSV = Path(__file__).resolve().parents[1] / "unit" / "assets" / "perf_analyzer" / "concurrency_http.csv"
LATENCY = "Request latency (average, p50/p90/p99)"


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    isolate(monkeypatch, tmp_path / "home")
    for name in ("SAMPLE_INTERVAL_S", "TRITON_METRICS_URL", "PROMETHEUS_URL", "NPU_EXPORTER_URL"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    st.cache_data.clear()
    yield tmp_path / "home"
    st.cache_data.clear()


def page(name: str, timeout_s: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout_s)
    at.switch_page(name)
    return run(at)


def figures(at: AppTest) -> dict[str, dict[str, Any]]:
    specs = [json.loads(element.proto.spec) for element in at.get("plotly_chart")]
    return {f["layout"]["title"]["text"]: f for f in specs}


def legend_names(figure: dict[str, Any]) -> list[str]:
    return [t["name"] for t in figure["data"] if t.get("name") and t.get("showlegend") is not False]


# -- Metrics ---------------------------------------------------------------------------------------
def test_metrics_latency_legend_is_one_entry_per_model_under_the_plot_and_a_new_range_redraws(
        triton_server: TritonProcess, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    thread = SamplerThread(SamplerOptions(triton_server.metrics_url, home, 0.5), say=lambda message: None)
    thread.start()
    try:
        load_until(triton_server, home, 2)
    finally:
        thread.stop()
    at = page("metrics.py")
    models = at.multiselect(key="metrics.models")
    models.set_value(list(models.options))  # every sampled model: 4 lines each before
    run(at)
    chosen = at.multiselect(key="metrics.models").value
    assert len(chosen) >= 4
    latency = figures(at)[LATENCY]
    names = legend_names(latency)
    assert sorted(names) == sorted([*chosen, *[n for n in ("p50", "p90", "p99") if n in names]])
    assert len(names) <= len(chosen) + 3  # not one per model and quantile
    legend = latency["layout"]["legend"]
    assert legend["orientation"] == "h" and legend["y"] < 0 and legend["yanchor"] == "top"
    assert latency["layout"]["height"] >= PLOT_HEIGHT_PX + 80  # the plot keeps its height
    assert all(len(n) <= LEGEND_MAX_CHARS for f in figures(at).values() for n in legend_names(f))

    before = figures(at)["Throughput"]["layout"]["xaxis"]["range"]
    at.selectbox(key="metrics.range").set_value("1 h")
    run(at)  # the same run draws the new range
    after = figures(at)["Throughput"]["layout"]["xaxis"]["range"]
    span = datetime.fromisoformat(after[1]) - datetime.fromisoformat(after[0])
    assert after != before and abs(span - timedelta(hours=1)) < timedelta(seconds=30)
    assert figures(at)["Throughput"]["layout"]["uirevision"] == "1 h"
    assert not at.error


# -- Load test comparison --------------------------------------------------------------------------
def saved(home: Path, label: str, scale: float, minutes: int) -> BenchRun:
    _, points = parse_csv(CSV.read_text())
    scaled = tuple(replace(p, throughput_per_s=p.throughput_per_s * scale) for p in points)
    at = datetime.now(timezone.utc) - timedelta(minutes=60 - minutes)
    return save_run(BenchRun("digits_classifier", "http://127.0.0.1:8000", CONCURRENCY, scaled, at, "ann",
                             label), home)


def test_the_comparison_defaults_to_the_two_latest_runs_and_never_a_run_with_itself(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")  # saved runs only
    oldest = saved(home, "dynamic batching off, a long label that would take half the chart", 1.0, 1)
    middle = saved(home, "dynamic batching on", 2.0, 2)
    latest = saved(home, "dynamic batching on, 4 instances", 3.0, 3)
    at = page("load_test.py")
    a, b = at.selectbox(key="load_test.compare_a"), at.selectbox(key="load_test.compare_b")
    assert (a.value, b.value) == (latest.id, middle.id)
    assert latest.id not in b.options
    charts = figures(at)
    assert legend_names(charts["Throughput"]) == [f"A #{latest.id}", f"B #{middle.id}"]
    assert "A has 1.5x the throughput" in "\n".join(m.value for m in at.markdown)

    at.selectbox(key="load_test.compare_a").set_value(middle.id)  # A onto B's run
    run(at)
    a, b = at.selectbox(key="load_test.compare_a"), at.selectbox(key="load_test.compare_b")
    assert a.value == middle.id and b.value != middle.id and middle.id not in b.options
    at.selectbox(key="load_test.compare_b").set_value(oldest.id)
    run(at)
    assert at.selectbox(key="load_test.compare_b").value == oldest.id  # a choice that fits is kept

    newer = saved(home, "after the change", 4.0, 4)  # a new run: back to the two latest
    run(at)
    assert (at.selectbox(key="load_test.compare_a").value,
            at.selectbox(key="load_test.compare_b").value) == (newer.id, latest.id)


# -- Playground ------------------------------------------------------------------------------------
def playground(model: str) -> AppTest:
    at = page("playground.py")
    at.selectbox(key="playground.model").set_value(model)
    return run(at)


def test_the_playground_shows_the_image_as_sent_after_resizing(
        triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(monkeypatch, triton_server)
    at = playground("digits_preprocess")
    at.selectbox(key="playground.input.digits_preprocess.image.source").set_value(SourceKind.IMAGE)
    run(at)
    at.file_uploader(key="playground.input.digits_preprocess.image.image").set_value(
        ("seven.png", digit_png(7, scale=6), "image/png"))  # 48x48, resized to the input's 8x8
    run(at)
    at.button(key="playground.send").click()
    run(at)
    assert not at.error, [e.value for e in at.error]
    (shown,) = at.get("image")
    assert "image as sent: 8×8 after resizing" in str(shown.proto)


def test_the_playground_lists_outputs_in_the_models_order(
        triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(monkeypatch, triton_server)
    at = playground("digits_postprocess")
    at.multiselect(key="playground.outputs.digits_postprocess").set_value(["score", "label_name", "label"])
    run(at)
    at.button(key="playground.send").click()
    run(at)
    assert not at.error, [e.value for e in at.error]
    headers = [m.value.split(" · ")[0] for m in at.markdown if m.value.startswith("**") and " · " in m.value]
    outputs = [h for h in headers if h in ("**label**", "**score**", "**label_name**")]
    assert outputs == ["**label**", "**score**", "**label_name**"]


# -- the bottleneck card ---------------------------------------------------------------------------
def test_the_bottleneck_card_points_an_ensemble_at_its_slowest_member(
        triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    at = AppTest.from_file(APP, default_timeout=60).switch_page("overview.py")
    run(at)  # the first scrape
    client = grpcclient.InferenceServerClient(triton_server.grpc_url)
    image = grpcclient.InferInput("IMAGE", [1, 8, 8], "UINT8")
    image.set_data_from_numpy(EXAMPLES["images"][:1].astype(np.uint8))
    sent = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline or sent < 20:
        client.infer("digits_pipeline", [image], client_timeout=30)
        sent += 1
    run(at)
    lines = [m.value for m in at.markdown if m.value.startswith("**digits_pipeline**")]
    assert len(lines) == 1, [m.value for m in at.markdown]
    assert " via digits_" in lines[0] and "slowest member digits_" in lines[0]
    fixes = [c.value for c in at.caption if c.value.startswith("fix: its time is its members': digits_")]
    assert fixes, [c.value for c in at.caption]
    headers = [m.value for m in at.markdown if m.value.startswith("**Bottlenecks**")]
    assert len(headers) == 1 and headers[0].startswith("**Bottlenecks** · last ")
