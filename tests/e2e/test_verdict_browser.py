"""The verdict in real Chromium against `geadmin up` (real tritonserver, real supervisor):
the DEGRADED banner and `geadmin status`'s exit code for a failed model, the drift flag for a
hand-edited config, and the crash shown on the Overview after SIGKILL of the embedded Triton.
Screenshots are kept in the test's tmp dir."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from playwright.sync_api import Page, expect

from geadmin.triton.client import TritonClient
from tests.support.processes import wait_for
from tests.support.samples import add_python_model, set_answers
from tests.support.stack import geadmin, running_up

CLASSIFIER = "digits_classifier"
TIMEOUT_MS = 30_000


def triton_state(home: Path) -> dict[str, object]:
    return dict(json.loads((home / "stack.json").read_text())["triton"])


def test_degraded_banner_drift_flag_and_the_crash_on_the_overview(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_up(home, wait_for="models: ") as up:
        page.goto(up.dashboard_link("/overview"), wait_until="domcontentloaded")  # the link `up` printed
        expect(page.get_by_text("OK: Triton serves; 5 model(s) READY", exact=False)).to_be_visible(
            timeout=TIMEOUT_MS)

        # A model that fails to load: DEGRADED on the page and in `geadmin status` (exit 4).
        repository = home / "model_repository"
        add_python_model(repository, "broken_init", "raise RuntimeError('weights.bin is missing')")
        key = (home / "triton-admin-key").read_text().strip()
        with TritonClient(up.url, admin_key=key, load_timeout_s=60) as client:
            try:
                client.load("broken_init")
            except Exception as exc:  # the load is meant to fail
                assert "weights.bin is missing" in str(exc)
        expect(page.get_by_text("DEGRADED: model 'broken_init' failed", exact=False).first).to_be_visible(
            timeout=TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "degraded_banner.png"), full_page=True)
        status = geadmin("status", home=home)
        assert status.returncode == 4, status.stdout + status.stderr
        assert status.stdout.startswith("DEGRADED: model 'broken_init' failed")
        sidebar = page.locator("[data-testid='stSidebar']")
        expect(sidebar.get_by_text(re.compile(r"DEGRADED$"))).to_be_visible(timeout=TIMEOUT_MS)
        # The operator fixes the cause and loads it again: OK everywhere.
        (repository / "broken_init" / "1" / "model.py").write_text(
            "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n")
        set_answers(repository / "broken_init")  # and it answers (the probe checks that too)
        with TritonClient(up.url, admin_key=key, load_timeout_s=60) as client:
            client.load("broken_init")
        expect(sidebar.get_by_text(re.compile(r"(^|\W)OK$"))).to_be_visible(timeout=TIMEOUT_MS)

        # A hand-edited config: the drift flag, with the validator's verdict and the fix.
        path = repository / CLASSIFIER / "config.pbtxt"
        path.write_text(path.read_text().replace("max_queue_delay_microseconds: 1000",
                                                 "max_queue_delay_microseconds: 5000"))
        expect(page.get_by_text(f"{CLASSIFIER} — on disk: valid, but not what Triton serves",
                                exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_role("button", name="Put back served").first).to_be_visible()
        expect(page.get_by_text(f"DEGRADED: model '{CLASSIFIER}' serves a config that differs from its file",
                                exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "drift_flag.png"), full_page=True)
        drifted = geadmin("status", home=home)
        assert drifted.returncode == 4 and f"DRIFT: {CLASSIFIER}: on disk: valid" in drifted.stdout

        # kill -9 of the embedded tritonserver: the supervisor restarts it; the Overview says so.
        pid = int(triton_state(home)["pid"])  # type: ignore[call-overload]
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: triton_state(home)["state"] == "running"
                        and triton_state(home)["pid"] not in (None, pid), 60)
        crashed = page.get_by_text("Triton crashed and was restarted", exact=False)
        expect(crashed).to_be_visible(timeout=TIMEOUT_MS)
        expect(crashed).to_contain_text("killed by SIGKILL")
        expect(crashed).to_contain_text("restarts since geadmin up: 1")  # `geadmin up` renders as code
        page.screenshot(path=str(tmp_path / "crash_on_overview.png"), full_page=True)
        said = geadmin("status", home=home).stdout.splitlines()  # the CLI too, right under its verdict
        assert said[1].startswith("CRASHED: Triton crashed and was restarted: "), said
        assert "killed by SIGKILL" in said[1]
