"""A failed load on the Models page reads at a glance: the cause in one line, the next step,
what still serves, and Triton's log lines apart in an expander (pages/ui/errors.show_failure)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.domain import ModelState
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, button, isolate, point_at, run

LOG_LINE = re.compile(r"[IWEV]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+\]")


def reload_on_models_page(at: AppTest, name: str) -> AppTest:
    at.switch_page("models.py")
    run(at)
    at.multiselect(key="models.selected").set_value([name])
    at.selectbox(key="models.action").set_value("reload")
    run(at)
    button(at, "Reload…").click()  # type: ignore[attr-defined]
    run(at)
    button(at, "Confirm reload").click()  # type: ignore[attr-defined]
    return run(at)


def test_a_failed_reload_shows_a_one_line_cause_and_the_log_lines_in_an_expander(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path / "home")
    server = point_at(monkeypatch, triton_factory(models=["digits_classifier"]))
    config = server.repository / "digits_classifier" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'platform: "graph_executor"'))

    at = reload_on_models_page(AppTest.from_file(APP, default_timeout=90), "digits_classifier")

    (error,) = [e.value for e in at.error if "digits_classifier failed" in e.value]
    headline = error.split("\n\n")[0]
    assert headline.startswith("**reload digits_classifier failed:** ")
    assert "\n" not in headline and len(headline) < 250, headline
    assert not LOG_LINE.search(error), "log lines are in the expander, not the message"
    assert "**Next step:**" in error and "still serving" in error
    (log,) = [x for x in at.expander if x.label.startswith("Triton's log")]
    lines = "\n".join(c.value for c in log.code).splitlines()
    assert lines and all(LOG_LINE.match(line) for line in lines), lines
    assert any("graph_executor" in line for line in lines)
    assert TritonClient(server.http_url).repository_index()[0].state is ModelState.READY
