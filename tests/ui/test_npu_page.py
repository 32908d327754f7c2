"""The NPUs page through AppTest: on this host (no NPU) one calm line; against the real
tritonserver with the npu_ge backend on the ACL test double (tests/backend), devices 0 and 1
with the models whose instances run on them; with a real sampler's history, each device's
utilization and HBM over time (without history, one caption saying how to get some)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread
from geadmin.telemetry.npu_map import FROM_CONFIG, loaded_npu_ge_configs, model_map
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import scrape
from geadmin.triton.client import TritonClient
from pages.ui import keys
from tests.support.npu_ge import npu_ge_triton
from tests.support.processes import wait_for

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
NO_NPU = ("no Ascend NPU on this host: npu-smi not found, no npu-exporter configured, "
          "Triton publishes no npu_ge metrics")
pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_METRICS_URL",
                 "NPU_EXPORTER_URL", "METRICS_PORT"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))  # no running stack
    # no npu-smi on this host, whatever is installed: drop the directories that hold one
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / "npu-smi").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))


def npu_page(at: AppTest | None = None) -> AppTest:
    if at is None:
        at = AppTest.from_file(APP, default_timeout=30)
        at.run()
        at.switch_page("npu.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_host_without_npus_gets_one_calm_line_and_nothing_red(
        triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    at = npu_page()
    assert [t.value for t in at.title] == ["NPUs"]
    (info,) = [i.value for i in at.info]
    assert info.startswith("No NPU source was found on this host") and NO_NPU.split(": ")[1] in info
    assert "GEADMIN_NPU_EXPORTER_URL" in info and "npu-smi" in info and "npu_ge" in info  # how to add one
    assert not at.error and not at.warning
    assert not at.dataframe and not at.get("plotly_chart")
    assert not [c.value for c in at.caption if "history" in c.value or "charts" in c.value]  # no promise


def test_unreachable_metrics_given_explicitly_is_an_error_with_the_cause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", url)
    at = npu_page()
    assert at.error and "NPU telemetry cannot be read" in at.error[0].value
    assert "Connection refused" in at.error[0].value and "timed out" not in at.error[0].value


@pytest.fixture(scope="module")
def npu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    with npu_ge_triton(tmp_path_factory.mktemp("npu_page")) as server:
        yield server


def test_npu_ge_devices_show_with_the_models_on_each(
        npu_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", npu_server.http_url)
    # no metrics URL given: the page finds it on the server's host at GEADMIN_METRICS_PORT
    monkeypatch.setenv("GEADMIN_METRICS_PORT", str(npu_server.ports.metrics))
    at = npu_page()
    assert not at.error and not at.info, [e.value for e in at.error] + [i.value for i in at.info]
    devices = at.dataframe[0].value.set_index("device")
    assert list(devices.index) == [0, 1]
    assert devices.loc[0, "models"] == "pair" and devices.loc[1, "models"] == "pair, single"
    assert devices.loc[1, "HBM total GiB"] > 0
    assert pd.isna(devices.loc[1, "temperature °C"])  # npu_ge publishes none: unknown, not 0

    placement = at.dataframe[1].value
    assert sorted(zip(placement["model"], placement["device"], placement["instances"], strict=True)) == [
        ("pair", 0, 1), ("pair", 1, 1), ("single", 1, 1)]
    assert set(placement["from"]) == {"npu_ge placements"}
    assert (placement["HBM total GiB"] > 0).all()
    assert any("2 NPUs (triton)" in c.value for c in at.caption)

    chart = at.get("plotly_chart")
    assert len(chart) == 1
    spec = chart[0].proto.spec
    assert '"pair, single"' in spec and '"NPU 0"' in spec and '"NPU 1"' in spec


def test_the_page_keeps_the_last_devices_through_an_outage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with npu_ge_triton(tmp_path / "server") as server:
        monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
        monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", server.metrics_url)
        at = npu_page()
        assert list(at.dataframe[0].value["device"]) == [0, 1]
    at = npu_page(at)  # Triton is gone
    assert at.error and "Connection refused" in at.error[0].value
    assert at.warning and "the last data received" in at.warning[0].value
    assert list(at.dataframe[0].value["device"]) == [0, 1]


def test_the_config_fallback_places_instances_where_npu_ge_really_runs_them(
        npu_server: TritonProcess) -> None:
    """For a backend that publishes no placements (the older Ascend GE backend), the map comes
    from the configs: here, read from the real Triton, it must agree with npu_ge's own."""
    page = scrape(npu_server.metrics_url)
    devices = devices_from_triton(page)
    by_placements = model_map(devices)
    with TritonClient(npu_server.http_url) as client:
        configs = loaded_npu_ge_configs(client)
        assert sorted(configs) == ["pair", "single"]
        assert loaded_npu_ge_configs(client, skip=["pair"]).keys() == {"single"}
    unplaced = [replace(d, models=None) for d in devices]
    by_config = model_map(unplaced, configs)
    assert {r.source for r in by_config.rows} == {FROM_CONFIG}
    assert [(r.device, r.model, r.instances) for r in by_config.rows] == \
        [(r.device, r.model, r.instances) for r in by_placements.rows]


HISTORY_TITLES = ("AI-core utilization over time", "HBM used over time")


def history_figures(at: AppTest) -> dict[str, dict[str, Any]]:
    """The page's over-time charts by title (not the current HBM bars)."""
    figures = [json.loads(element.proto.spec) for element in at.get("plotly_chart")]
    return {f["layout"]["title"]["text"]: f for f in figures
            if f["layout"]["title"]["text"] in HISTORY_TITLES}


def test_without_history_one_calm_caption_says_the_sampler_records_it(
        npu_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", npu_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", npu_server.metrics_url)
    at = npu_page()
    (note,) = [c.value for c in at.caption if "history" in c.value]
    assert note.startswith("No NPU history yet") and "`geadmin up`" in note and "`geadmin sampler`" in note
    assert history_figures(at) == {} and len(at.get("plotly_chart")) == 1  # the current HBM bars only
    assert not [s for s in at.selectbox if s.label == "Time range"]
    assert not at.error and not at.warning and not at.info


def test_with_a_sampler_running_the_page_charts_each_device_over_time(
        npu_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"  # the page's workspace (_clean_env)
    monkeypatch.setenv("GEADMIN_TRITON_URL", npu_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", npu_server.metrics_url)

    def sampled_points() -> list[int]:
        found = history.npu_series(npu_server.metrics_url, history.window_since(10), home=home)
        return [s.points for s in found]

    thread = SamplerThread(SamplerOptions(npu_server.metrics_url, home, 0.5), say=lambda message: None)
    thread.start()
    try:  # a few seconds: at least 3 windows for each device
        assert wait_for(lambda: len(sampled_points()) == 2 and min(sampled_points()) >= 3, 30), \
            sampled_points()
    finally:
        thread.stop()

    at = npu_page()
    assert not at.error and not at.warning, [e.value for e in at.error]
    assert not [c.value for c in at.caption if c.value.startswith("No NPU history")]
    (range_box,) = [s for s in at.selectbox if s.label == "Time range"]
    assert range_box.value == "15 min"
    source = f"`{npu_server.metrics_url}` from the sampler's history in "
    assert any(c.value.startswith(source) for c in at.caption)
    figures = history_figures(at)
    assert set(figures) == set(HISTORY_TITLES)
    for title, figure in figures.items():
        lines = {t["name"]: t for t in figure["data"]}
        assert sorted(lines) == ["NPU 0", "NPU 1"], title
        for name, line in lines.items():
            assert line["connectgaps"] is False
            assert sum(1 for y in line["y"] if y is not None) >= 3, (title, name, line["y"])
    hbm = {t["name"]: t["y"] for t in figures["HBM used over time"]["data"]}
    assert all(y > 0 for ys in hbm.values() for y in ys if y is not None)  # the double's HBM, in GiB
    assert all(y < 1024 for ys in hbm.values() for y in ys if y is not None)  # GiB, not bytes

    assert round(span_min(figures["HBM used over time"])) == 15

    at.selectbox(key=keys.NPU_RANGE).set_value("5 min")  # the range choice redraws the charts
    at = npu_page(at)
    figures = history_figures(at)
    assert set(figures) == set(HISTORY_TITLES)
    assert [round(span_min(f)) for f in figures.values()] == [5, 5]


def span_min(figure: dict[str, Any]) -> float:
    """The minutes the chart's time axis covers."""
    start, end = (datetime.fromisoformat(x) for x in figure["layout"]["xaxis"]["range"])
    return (end - start).total_seconds() / 60
