"""The Fleet page in Chromium against three real tritonservers (tests/support/fleet_lab.py):
Ctrl+Enter in the config's text area starts no rollout, only "Confirm rollout" after the summary
does; and with nobody touching the page, its headline turns DEGRADED when a server stops."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from geadmin import audit
from geadmin.diagnose import rollouts
from geadmin.stack.dashboard import DashboardProcess
from tests.support.browser import choose
from tests.support.fleet_lab import BASE, MODEL, FleetLab, config, fleet_lab

TIMEOUT_MS = 30_000


@dataclass
class Setup:
    lab: FleetLab
    dashboard: DashboardProcess


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("fleet_browser")
    with fleet_lab(root) as lab:
        # The default fleet: the configured servers, a, b and c, each with its repository.
        dashboard = DashboardProcess(triton_url=lab.servers["a"].http_url, home=root / "home",
                                     extra_env={"GEADMIN_SERVERS_FILE": str(lab.servers_file)})
        dashboard.start()
        try:
            yield Setup(lab, dashboard)
        finally:
            dashboard.stop()



def no_rollout(home: Path) -> bool:
    """No rollout journaled and no fleet change audited in `home`."""
    return rollouts.journals(home=home) == [] and not any(
        e.action.startswith("fleet ") for e in audit.query(home=home))


def open_fleet(page: Page, dashboard: DashboardProcess) -> None:
    page.goto(f"{dashboard.url}/fleet", wait_until="domcontentloaded")
    expect(page.get_by_text("FLEET OK: 3 servers, 1 model, the same state and version everywhere "
                            "(configs not compared)")).to_be_visible(
        timeout=TIMEOUT_MS)


def test_ctrl_enter_in_the_config_starts_nothing_only_confirm_rollout_does(
    page: Page, fleet: Setup
) -> None:
    lab, home = fleet.lab, fleet.dashboard.home
    open_fleet(page, fleet.dashboard)
    choose(page, page.get_by_role("combobox", name="Change"), "apply")
    slack = page.get_by_role("spinbutton", name="Latency slack (ms)")
    slack.fill("10000")
    slack.press("Enter")
    text = page.get_by_role("textbox", name="New config.pbtxt (apply)")
    text.fill(config("v2"))
    text.press("Control+Enter")  # in a form this submitted it: a rollout to every server
    page.wait_for_timeout(5_000)  # long enough for a rollout to have journaled and written
    expect(text).to_have_value(config("v2"))
    assert no_rollout(home)
    assert lab.files() == (BASE.encode(), BASE.encode())
    expect(page.get_by_text("Rollout: ")).to_have_count(0)
    expect(page.get_by_role("button", name="Confirm rollout")).to_have_count(0)
    try:
        page.get_by_role("button", name="Start rollout…").click()
        expect(page.get_by_text(f"Roll out apply {MODEL} on fleet 'default': 3 server(s) in 3 wave(s) "
                                "(wave 1: a; wave 2: b; wave 3: c)?")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_text("1 line(s) added, 1 removed")).to_be_visible()
        assert no_rollout(home)
        assert lab.files() == (BASE.encode(), BASE.encode())
        page.get_by_role("button", name="Confirm rollout").click()
        expect(page.get_by_text(f"ROLLOUT DONE: apply {MODEL} on 3 server(s)")).to_be_visible(timeout=180_000)
        assert lab.files() == (config("v2").encode(),) * 2
        assert all(lab.mode_served(name) == "v2" for name in lab.servers)
        assert audit.query(action="fleet apply", home=home)
    finally:
        lab.put_back()


def test_the_headline_turns_degraded_by_itself_when_a_server_stops(page: Page, fleet: Setup) -> None:
    open_fleet(page, fleet.dashboard)
    fleet.lab.servers["b"].stop()  # nobody touches the page from here on
    expect(page.get_by_text("FLEET DEGRADED: 2 of 3 servers serving")).to_be_visible(timeout=20_000)
    expect(page.get_by_text("As of ")).to_be_visible()  # the time it was read, UTC
    expect(page.get_by_text("FLEET OK: 3 servers")).to_have_count(0)
    expect(page.get_by_role("heading", name="Fleet", exact=True)).to_be_visible()
