"""The NPUs page's fault cards as on-call reads them, in real Chromium against the real
dashboard and a real tritonserver running npu_ge on the ACL test double (`pair` on devices 0
and 1, `single` on 1: tests/support/npu_fault_servers.py), with a double of npu-exporter
reporting an ECC fault on chip 0 (where one of `pair`'s two instances runs) and an unknown code
on chip 2, reported unhealthy, where no model runs; a fault on chip 3 recorded earlier clears at
the page's read. Each card leads with the chip, the code and the level, says what it means for
the models and the next step; the page is drawn to a screenshot beside the test's files."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from geadmin import settings
from geadmin.stack.dashboard import DashboardProcess
from geadmin.telemetry.history.faults import record_reading
from geadmin.telemetry.sources.fault_reading import FaultReading
from geadmin.telemetry.sources.npu_faults import SOURCE_EXPORTER, ChipFault
from tests.support.faults import HBM_ECC, UNLISTED
from tests.support.npu_exporter_double import ChipState, npu_exporter_double
from tests.support.npu_fault_servers import start_fault_server

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

OVERRIDE = {"RestartNPUCodes": ["80E18402"]}
CHIPS = {0: ChipState(codes=(HBM_ECC,)), 1: ChipState(), 2: ChipState(healthy=False, codes=(UNLISTED,)),
         3: ChipState()}


@pytest.fixture(scope="module")
def faulted_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    root = tmp_path_factory.mktemp("npu_faults_browser")
    (root / "faultCode.json").write_text(json.dumps(OVERRIDE))
    home = root / "home"
    earlier = FaultReading((ChipFault(3, HBM_ECC, SOURCE_EXPORTER, "", True),), (SOURCE_EXPORTER,))
    record_reading(earlier, home=home, now_s=time.time() - 600)  # chip 3's fault, ten minutes ago
    triton = start_fault_server(root, "one")
    try:
        with npu_exporter_double(CHIPS) as exporter:
            process = DashboardProcess(
                triton_url=triton.http_url, home=home, repository=root / "one" / "repo",
                extra_env={settings.TRITON_METRICS_URL.env_name: triton.metrics_url,
                           settings.NPU_EXPORTER_URL.env_name: exporter,
                           settings.NPU_FAULT_TABLE.env_name: str(root / "faultCode.json")},
                log_path=root / "dashboard.log")
            process.start()
            try:
                yield process
            finally:
                process.stop()
    finally:
        triton.stop()


def test_the_fault_cards_read_right_for_an_ecc_fault_an_unknown_code_and_a_cleared_fault(
        faulted_dashboard: DashboardProcess, page: Page, tmp_path: Path) -> None:
    page.goto(f"{faulted_dashboard.url}/npu", wait_until="domcontentloaded")
    ecc = page.get_by_text("NPU 0 · 0x80E18402 · RestartNPU", exact=True)
    expect(ecc).to_be_visible(timeout=60_000)
    expect(page.get_by_test_id("stStatusWidget").get_by_text("Running")).to_have_count(0, timeout=30_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("NPU 2 · 0x8FFFFFFF · unknown · chip unhealthy", exact=True)).to_be_visible()
    expect(page.get_by_text("the chip is reported unhealthy, so this counts as a fault whatever its code",
                            exact=False)).to_be_visible()
    # no model on chip 2: nothing to drain, so the reset is the next step (not "then reset")
    expect(page.get_by_text("Next: reset NPU 2 (the chip is reported unhealthy) — run by you; no model runs "
                            "on it", exact=False)).to_be_visible()
    expect(page.get_by_text("NPU 3 · 0x80E18402 · RestartNPU · cleared", exact=True)).to_be_visible()
    expect(page.get_by_text("No longer reported by npu-exporter: ", exact=False)).to_be_visible()
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=30_000)  # widgets drawn
    page.screenshot(path=str(tmp_path / "npu_faults.png"), full_page=True)
    text = page.inner_text("body").replace("\u2060", "")  # the page's guard against links in outside text
    assert "drain NPU 0 of pair: device_ids 1 (without 0)" in text, text
    assert "look 0x8FFFFFFF up in the driver's fault list" in text, text
    # the ECC code, moved to RestartNPU by the operator's table, reads as RestartNPU, not its old level
    card = text.split("NPU 0 · 0x80E18402 · RestartNPU", 1)[1].split("NPU 2 ·", 1)[0]
    assert "SeparateNPU" not in card and "does not repair" not in card, card
