"""The docs' screenshots, taken in real Chromium of the real dashboard against a real Triton.

Every visible page routed by pages/app.py is visited and drawn to docs/images/<url_path>.png
(1280x800, palette PNG), which the guide page docs/guide/<url_path>.md shows. Run it after
changing a page's look and commit the pictures; tests/unit/test_docs.py checks that every page
has its picture referenced.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import tritonclient.http as triton_http
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from geadmin import settings
from geadmin.access.token import new_token, read_token
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.tritonserver import TritonProcess

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
VIEWPORT = {"width": 1280, "height": 800}
MAX_PNG_BYTES = 400_000  # keeps the repository small; a palette PNG of one screen is far below


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGES = _gen_docs().dashboard_pages()


@pytest.fixture(scope="module")
def docs_dashboard(triton_server: TritonProcess, tmp_path_factory: pytest.TempPathFactory,
                   ) -> Iterator[DashboardProcess]:
    """A dashboard on the session's Triton, told where its metrics are (not the default port),
    with a real sampler recording a little traffic, so the pictures show the pages at work."""
    home = tmp_path_factory.mktemp("docs_dashboard")
    sampler = subprocess.Popen(
        [sys.executable, "-m", "geadmin.cli", "sampler", "--interval", "0.5", "--home", str(home),
         "--metrics-url", triton_server.metrics_url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    process = DashboardProcess(
        triton_url=triton_server.http_url, home=home,
        triton_log=triton_server.log_path, repository=triton_server.repository,
        extra_env={settings.TRITON_METRICS_URL.env_name: triton_server.metrics_url,
                   "GEADMIN_AUTH": "auto"},  # as operators see it: signed in with the token
    )
    new_token(home)
    try:
        process.start()
        send_traffic(triton_server.http_url, seconds=4.0)
        yield process
    finally:
        process.stop()
        os.killpg(sampler.pid, signal.SIGTERM)
        sampler.wait(timeout=30)


def send_traffic(url: str, seconds: float) -> None:
    """A few requests a second to digits_classifier, so the sampler has windows with traffic."""
    client = triton_http.InferenceServerClient(url.removeprefix("http://"))
    features = triton_http.InferInput("features", [4, 64], "FP32")
    features.set_data_from_numpy(np.random.default_rng(0).random((4, 64), dtype=np.float32))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        client.infer("digits_classifier", [features])
        time.sleep(0.05)
    client.close()


@pytest.fixture
def screen(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = context.new_page()
    yield page
    context.close()


def shrink(path: Path) -> None:
    """Rewrite a screenshot as a 256-colour palette PNG (a few times smaller, still sharp)."""
    with Image.open(path) as image:
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    palette.save(path, optimize=True)


@pytest.mark.parametrize("url_path", list(PAGES))
def test_docs_screenshot_of_each_page(docs_dashboard: DashboardProcess, screen: Page, url_path: str) -> None:
    title = PAGES[url_path]
    token = read_token(docs_dashboard.home)
    screen.goto(f"{docs_dashboard.url}/{url_path}?token={token}", wait_until="domcontentloaded")
    expect(screen.locator("h1").filter(has_text=title).first).to_be_visible(timeout=30_000)
    # Let the first run finish (Streamlit's status widget says "Running" while it works).
    expect(screen.get_by_test_id("stStatusWidget").get_by_text("Running")).to_have_count(0, timeout=30_000)
    expect(screen.get_by_test_id("stSkeleton")).to_have_count(0, timeout=30_000)  # widgets drawn
    expect(screen.get_by_test_id("stException")).to_have_count(0)  # a page never shows a traceback
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{url_path}.png"
    screen.screenshot(path=str(path))
    shrink(path)
    with Image.open(path) as image:
        assert image.size == (VIEWPORT["width"], VIEWPORT["height"]), image.size
    assert 5_000 < path.stat().st_size < MAX_PNG_BYTES, f"{path}: {path.stat().st_size} bytes"
