"""The dashboard in real Chromium (Debian's, driven by Playwright), against a real Triton."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.local import LocalDriver
from geadmin.stack.processes import free_triton_ports
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import Workspace
from geadmin.triton.client import TritonClient
from tests.support.processes import wait_for
from tests.support.samples import SAMPLE_MODELS
from tests.support.stack import running_up


def test_dashboard_lists_the_sample_models(dashboard: DashboardProcess, page: Page, tmp_path: Path) -> None:
    page.goto(dashboard.url, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("OK: Triton serves", exact=False)).to_be_visible(timeout=30_000)
    # Dataframes render to a canvas; the model names are in its accessible grid.
    grid = page.locator("[data-testid='stDataFrame']").last
    expect(grid).to_be_visible()
    for model in SAMPLE_MODELS:
        expect(grid.get_by_text(model, exact=True)).to_have_count(1, timeout=10_000)
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)


def test_models_page_draws_the_ensemble_graph(dashboard: DashboardProcess, page: Page) -> None:
    page.goto(f"{dashboard.url}/models", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible(timeout=30_000)
    detail = page.locator("[data-testid='stSelectbox']").filter(has_text="Model").last
    detail.click()
    page.get_by_role("option", name="digits_pipeline").click()
    page.get_by_role("tab", name="Ensemble graph").click()
    graph = page.locator("[data-testid='stGraphVizChart'] svg")
    expect(graph).to_be_visible(timeout=30_000)
    for step in ("digits_preprocess", "digits_classifier", "digits_postprocess"):
        expect(graph.get_by_text(step, exact=True)).to_have_count(1)


def test_pages_recover_by_themselves_when_triton_comes_back(
    page: Page, tmp_path: Path, sample_repository: Path
) -> None:
    ports = free_triton_ports()
    triton = TritonProcess(sample_repository, ports=ports, log_path=tmp_path / "triton.log")
    dashboard = DashboardProcess(triton_url=triton.http_url, home=tmp_path)
    dashboard.start()
    try:
        second = page.context.new_page()
        page.goto(f"{dashboard.url}/models", wait_until="domcontentloaded")
        second.goto(dashboard.url, wait_until="domcontentloaded")
        expect(page.get_by_text("unreachable").first).to_be_visible(timeout=30_000)
        expect(second.get_by_text("unreachable").first).to_be_visible(timeout=30_000)

        triton.start()  # nobody touches either page from here on
        grid = page.locator("[data-testid='stDataFrame']").first
        expect(grid.get_by_text("digits_pipeline", exact=True)).to_have_count(1, timeout=30_000)
        expect(second.get_by_text("OK: Triton serves", exact=False)).to_be_visible(timeout=30_000)
        expect(page.get_by_text("unreachable")).to_have_count(0)
    finally:
        dashboard.stop()
        triton.stop()


def test_models_page_shows_a_state_change_by_itself(
    page: Page, tmp_path: Path, triton_factory: Callable[..., TritonProcess]
) -> None:
    triton = triton_factory()
    dashboard = DashboardProcess(triton_url=triton.http_url, home=tmp_path, triton_log=triton.log_path,
                                 repository=triton.repository)
    dashboard.start()
    try:
        page.goto(f"{dashboard.url}/models", wait_until="domcontentloaded")
        grid = page.locator("[data-testid='stDataFrame']").first
        expect(grid.get_by_text("UNAVAILABLE", exact=True)).to_have_count(0, timeout=30_000)
        expect(grid.get_by_text("text_normalize", exact=True)).to_have_count(1, timeout=30_000)
        with TritonClient(triton.http_url) as client:  # someone else unloads it
            client.unload("text_normalize")
        # Nobody touches the page: the table refreshes in place within a period or two.
        expect(grid.get_by_text("UNAVAILABLE", exact=True)).to_have_count(1, timeout=20_000)
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
    finally:
        dashboard.stop()


def test_stack_page_restarts_the_embedded_triton(page: Page, tmp_path: Path) -> None:
    with running_up(tmp_path / "home", wait_for="models: ") as up:
        driver = LocalDriver(Workspace(up.home))
        page.goto(up.dashboard_link("/stack"), wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Stack", exact=True)).to_be_visible(timeout=30_000)
        expect(page.get_by_text("Driver: local")).to_be_visible(timeout=30_000)
        page.get_by_role("button", name="Apply…").click()  # defaults: triton, restart
        expect(page.get_by_text("Restart triton?")).to_be_visible(timeout=15_000)
        assert driver.history("triton") == []
        page.get_by_role("button", name="Yes, restart triton").click()
        expect(page.get_by_text("Asked to restart triton")).to_be_visible(timeout=15_000)
        assert wait_for(lambda: len(driver.history("triton")) == 1, 15)
        note = driver.history("triton")[0].note  # the page's user: the OS user, without sign-in here
        assert note.startswith("restart asked from the Stack page by "), note
        assert note.endswith(" (dashboard)"), note
        # The page shows the restart by itself (the services table refreshes in place).
        expect(page.get_by_text("triton: 1 exits recorded")).to_be_visible(timeout=30_000)
        assert wait_for(lambda: driver.services()[0].health == "healthy", 30), up.collector.text


def open_dropdown(page: Page, combobox: Locator) -> None:
    """Click until the options show: a click while the app still reruns is lost."""
    for _ in range(10):
        combobox.click()
        try:
            page.get_by_role("listbox").wait_for(state="visible", timeout=2_000)
            return
        except PlaywrightTimeoutError:
            page.keyboard.press("Escape")
    raise AssertionError("the dropdown never opened")


def test_config_editor_edits_applies_and_rolls_back(
    page: Page, tmp_path: Path, triton_factory: Callable[..., TritonProcess]
) -> None:
    model = "digits_classifier"
    triton = triton_factory(models=[model])
    config = triton.repository / model / "config.pbtxt"
    original = config.read_text()
    dashboard = DashboardProcess(triton_url=triton.http_url, home=tmp_path, triton_log=triton.log_path,
                                 repository=triton.repository)
    dashboard.start()
    try:
        page.goto(f"{dashboard.url}/editor", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Config editor")).to_be_visible(timeout=30_000)
        text = page.get_by_role("textbox", name="config.pbtxt")
        expect(text).to_have_value(original, timeout=30_000)
        text.fill(original.replace("max_queue_delay_microseconds: 1000",
                                   "max_queue_delay_microseconds: 4000"))
        text.press("Control+Enter")  # Streamlit commits a text area on Ctrl+Enter (or blur)
        expect(page.get_by_text("+  max_queue_delay_microseconds: 4000")).to_be_visible(timeout=15_000)
        page.get_by_role("button", name="Apply", exact=True).click()
        applied = page.get_by_text("applied the new config of 'digits_classifier'")
        expect(applied).to_be_visible(timeout=60_000)
        assert "max_queue_delay_microseconds: 4000" in config.read_text()
        with TritonClient(triton.http_url) as client:
            assert client.model_config(model).dynamic_batching.max_queue_delay_microseconds == 4000

        revision = page.get_by_role("combobox", name="Revision")
        expect(revision).to_have_value(re.compile(r"^revision 2 "), timeout=15_000)
        open_dropdown(page, revision)
        page.get_by_role("option", name=re.compile(r"^revision 1 ")).click()
        expect(revision).to_have_value(re.compile(r"^revision 1 "), timeout=15_000)
        page.get_by_role("button", name="Roll back to revision 1").click()
        page.get_by_role("button", name="Confirm rollback").click()  # a rollback asks like any change
        expect(page.get_by_text("rollback to revision 1")).to_have_count(0)  # the note is for the audit
        assert wait_for(lambda: config.read_text() == original, 60), "the rollback never wrote the file"
        expect(page.get_by_role("textbox", name="config.pbtxt")).to_have_value(original, timeout=30_000)
        with TritonClient(triton.http_url) as client:
            assert client.model_config(model).dynamic_batching.max_queue_delay_microseconds == 1000
        page.screenshot(path=str(tmp_path / "editor.png"), full_page=True)
    finally:
        dashboard.stop()


def test_playground_sends_an_uploaded_digit_image_and_shows_its_label(
    page: Page, tmp_path: Path, triton_factory: Callable[..., TritonProcess]
) -> None:
    from tests.support.samples import DIGIT_NAMES, EXAMPLES, digit_png

    index = 7
    expected = DIGIT_NAMES[int(EXAMPLES["labels"][index])]
    image = tmp_path / "digit.png"
    image.write_bytes(digit_png(index))
    triton = triton_factory()
    dashboard = DashboardProcess(triton_url=triton.http_url, home=tmp_path, triton_log=triton.log_path,
                                 repository=triton.repository)
    dashboard.start()
    try:
        page.goto(f"{dashboard.url}/playground", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Playground")).to_be_visible(timeout=30_000)
        model = page.get_by_role("combobox", name="Model")
        open_dropdown(page, model)
        page.get_by_role("option", name="digits_pipeline", exact=True).click()
        expect(page.get_by_text("IMAGE · UINT8 [-1, 8, 8]")).to_be_visible(timeout=15_000)
        open_dropdown(page, page.get_by_role("combobox", name="Source"))
        page.get_by_role("option", name="image upload").click()
        uploader = page.locator("[data-testid='stFileUploader'] input[type='file']")
        expect(uploader).to_have_count(1, timeout=15_000)
        uploader.set_input_files(str(image))
        expect(page.get_by_text("digit.png")).to_be_visible(timeout=15_000)
        page.get_by_role("button", name="Send", exact=True).click()
        expect(page.get_by_text("LABEL_NAME · BYTES [1, 1]")).to_be_visible(timeout=30_000)
        tables = page.locator("[data-testid='stDataFrame']")
        expect(tables.get_by_text(expected, exact=True)).to_have_count(1, timeout=15_000)
        page.screenshot(path=str(tmp_path / "playground.png"), full_page=True)
    finally:
        dashboard.stop()


def test_npu_page_shows_devices_and_the_model_map_of_npu_ge(page: Page, tmp_path: Path) -> None:
    from tests.support.npu_ge import npu_ge_triton

    with npu_ge_triton(tmp_path / "npu") as triton:
        dashboard = DashboardProcess(triton_url=triton.http_url, home=tmp_path / "home",
                                     extra_env={"GEADMIN_TRITON_METRICS_URL": triton.metrics_url})
        dashboard.start()
        try:
            page.goto(f"{dashboard.url}/npu", wait_until="domcontentloaded")
            expect(page.get_by_role("heading", name="NPUs", exact=True)).to_be_visible(timeout=30_000)
            expect(page.get_by_text("2 NPUs (triton)")).to_be_visible(timeout=30_000)
            devices = page.locator("[data-testid='stDataFrame']").first
            expect(devices.get_by_text("pair, single", exact=True)).to_have_count(1, timeout=15_000)
            placements = page.locator("[data-testid='stDataFrame']").nth(1)  # the model <-> NPU map
            expect(placements.get_by_text("single", exact=True)).to_have_count(1, timeout=15_000)
            expect(placements.get_by_text("pair", exact=True)).to_have_count(2)
            chart = page.locator("[data-testid='stPlotlyChart']")
            expect(chart.get_by_text("HBM per device")).to_be_visible(timeout=30_000)
            for label in ("NPU 0", "NPU 1", "pair", "pair, single", "free"):
                expect(chart.get_by_text(label, exact=True).first).to_be_visible()
            # nobody touches the page: the fragment redraws it in place every few seconds
            refreshed = page.get_by_text(re.compile(r"refreshed \d\d:\d\d:\d\d UTC"))
            first = refreshed.inner_text(timeout=15_000)
            expect(refreshed).not_to_have_text(first, timeout=20_000)
            shot = tmp_path / "npu.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            dashboard.stop()


def test_metrics_page_draws_the_charts_of_a_model_with_traffic(
    page: Page, tmp_path: Path, triton_factory: Callable[..., TritonProcess]
) -> None:
    from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread
    from tests.support.samples import LOAD_MODEL as MODEL
    from tests.support.samples import load_until

    home = tmp_path / "home"
    triton = triton_factory(models=[MODEL])
    sampler = SamplerThread(SamplerOptions(triton.metrics_url, home, 0.5), say=lambda message: None)
    sampler.start()
    dashboard = DashboardProcess(triton_url=triton.http_url, home=home, triton_log=triton.log_path,
                                 repository=triton.repository,
                                 extra_env={"GEADMIN_TRITON_METRICS_URL": triton.metrics_url})
    dashboard.start()
    try:
        load_until(triton, home, 3)  # the history has 3 windows with traffic
        page.goto(f"{dashboard.url}/metrics", wait_until="domcontentloaded")
        expect(page.get_by_role("heading", name="Metrics", exact=True)).to_be_visible(timeout=30_000)
        charts = page.locator("[data-testid='stPlotlyChart']")
        titles = ("Throughput", "Request latency (average, p50/p90/p99)", "Pending requests", "Batch size",
                  "Failures", f"Queue vs compute — {MODEL}")
        # Each chart's box on screen, holding its title. (Not the title's own <tspan>: on a loaded
        # CI host plotly's redraw every sampler interval left it with an empty box for 30 s while
        # the chart itself was on screen.)
        for title in titles:
            chart = charts.filter(has=page.get_by_text(title, exact=True))
            expect(chart).to_have_count(1, timeout=60_000)
            expect(chart).to_be_visible(timeout=60_000)
        expect(charts).to_have_count(len(titles))
        # one trace (no legend): plotly drew the model's line, a path with a segment ("L") between points
        throughput = charts.filter(has_text="Throughput")
        expect(throughput).to_have_count(1)
        drawn = throughput.locator("path.js-line")
        expect(drawn.first).to_be_attached(timeout=15_000)
        assert any("L" in (d or "") for d in (drawn.nth(i).get_attribute("d") for i in range(drawn.count())))
        expect(page.get_by_text("Cannot read the telemetry history")).to_have_count(0)
        shot = tmp_path / "metrics.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        dashboard.stop()
        sampler.stop()
