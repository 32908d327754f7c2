"""The Stack page through AppTest, against a real `geadmin up` (supervised tritonserver)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.stack.local import LocalDriver
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import Workspace
from geadmin.triton.client import TritonClient
from tests.support.processes import wait_for
from tests.support.stack import Up, running_up

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    with running_up(tmp_path_factory.mktemp("stack_page"), wait_for="models: ") as stack:
        yield stack


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "STACK", "COMPOSE_PROJECT"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def stack_page(at: AppTest | None = None) -> AppTest:
    if at is None:
        at = AppTest.from_file(APP, default_timeout=30)
        at.run()
        at.switch_page("stack.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_lists_the_stacks_services_with_state_and_health(up: Up, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(up.home))
    at = stack_page()
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value.set_index("service")
    assert table.loc["triton", "state"] == "running" and table.loc["triton", "health"] == "healthy"
    assert table.loc["dashboard", "state"] == "running"
    assert any("Driver: local" in c.value for c in at.caption)


def test_restarting_triton_asks_first_then_the_supervisor_restarts_it(
        up: Up, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(up.home))
    driver = LocalDriver(Workspace(up.home))
    exits = len(driver.history("triton"))
    at = stack_page()
    at.selectbox(key="stack.service").set_value("triton")
    at.selectbox(key="stack.action").set_value("restart")
    at.button(key="stack.apply").click()
    at = stack_page(at)
    assert any("Restart **triton**?" in w.value for w in at.warning)
    assert len(driver.history("triton")) == exits  # nothing happens before the confirmation
    at.button(key="stack.confirm").click()
    at = stack_page(at)
    assert any("Asked to restart triton" in s.value for s in at.success)
    assert wait_for(lambda: len(driver.history("triton")) > exits, 15)
    assert wait_for(lambda: driver.services()[0].health == "healthy", 30), up.collector.text
    at = stack_page(at)
    assert any("exits recorded" in c.value for c in at.caption)


def test_logs_are_tailed_and_filtered(up: Up, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(up.home))
    at = stack_page()
    at.selectbox(key="stack.log_service").set_value("triton")
    at.text_input(key="stack.log_filter").set_value("Started GRPCInferenceService")
    at = stack_page(at)
    code = at.code[0].value
    assert "Started GRPCInferenceService" in code
    assert all("started grpcinferenceservice" in line.lower() for line in code.splitlines())


def test_without_a_stack_the_page_says_so_and_keeps_the_log_level_control(
        triton_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    at = stack_page()
    assert any("manages no stack" in i.value for i in at.info)
    before = TritonClient(triton_server.http_url).log_settings()["log_verbose_level"]
    at.number_input(key="stack.log_verbose").set_value(2)
    at.button(key="stack.log_apply").click()
    at = stack_page(at)
    try:
        assert any("verbose level is now 2" in s.value for s in at.success)
        assert TritonClient(triton_server.http_url).log_settings()["log_verbose_level"] == 2
    finally:
        TritonClient(triton_server.http_url).update_log_settings(log_verbose_level=before)
