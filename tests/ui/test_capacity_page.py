"""The Capacity page through AppTest against the session's tritonserver: a model with an
objective shows its saturation rate from the saved sweep ("measured at"), the recorded peak
with its window and source, the headroom and the flag when it is short; a model without an
objective names the command that sets one; "Measure now" is offered for one model and
disabled without a repository; Triton down is a failure, never a traceback."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.diagnose.capacity import Saturation, SweepStep
from geadmin.ops.capacity import saved
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.alerting.objectives import store as store_objective
from tests.support.apptest import APP, button, isolate, run
from tests.support.capacity_models import record_ramp

MODEL = "digits_classifier"


def capacity_page(at: AppTest | None = None) -> AppTest:
    at = at or AppTest.from_file(APP, default_timeout=60)
    at.switch_page("capacity.py")
    return run(at)


def frames(at: AppTest) -> str:
    return "\n".join(df.value.to_string() for df in at.dataframe)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_server: TritonProcess) -> Path:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    return tmp_path / "home"


def test_figures_say_their_source_and_a_short_model_is_flagged(
        home: Path, triton_server: TritonProcess) -> None:
    store_objective(Objective(MODEL, p99_ms=50.0, error_budget=0.001), "test", home=home)
    saved.save(Saturation(MODEL, 100.0, 1, 50.0, "measured now (capacity sweep 0123abcd on the trial copy x)",
                          datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
                          (SweepStep(100.0, 99.0, 20.0, 0.0, True),)), triton_server.http_url, home=home)
    record_ramp(triton_server.metrics_url, MODEL, [60.0, 75.0, 90.0], end_s=time.time(), step_s=60.0,
                home=home)
    at = capacity_page()
    table = frames(at)
    assert "measured at " in table and "capacity sweep 0123abcd" in table
    assert "90 req/s" in table and "recorded, " in table and triton_server.metrics_url in table
    assert any(f"{MODEL}: headroom 1.11x is under 1.2x" in w.value for w in at.warning), \
        [w.value for w in at.warning]
    # the models with no objective: one line after the figures, naming them and how to set one
    [info] = [i.value for i in at.info if "No p99 objective" in i.value]
    assert "digits_preprocess" in info and MODEL not in info.split(":")[1].split(".")[0], info
    assert "`geadmin objectives set " in info and "--p99-ms 50" in info
    assert [h.value for h in at.subheader] == [MODEL]
    # one model chosen: "Measure now" is offered, but not without a repository to put the trial in
    at.selectbox[0].select(MODEL)
    run(at)
    assert button(at, "Measure now").disabled  # type: ignore[attr-defined]


def test_triton_down_is_a_failure_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_TRITON_URL", "http://127.0.0.1:9")
    at = capacity_page()
    assert at.error or any("Capacity not read" in m.value for m in at.markdown), \
        [m.value for m in at.markdown]
