"""An apply cut short (its CLI process SIGKILLed after writing the file, GEADMIN_FAULT_POINT):
the dashboard's start closes it, the Models page shows it with the revision to go back to, and
its button opens the Config editor on that revision — through Streamlit's AppTest, against a
real tritonserver. A background run a killed dashboard left gets its `interrupted` row at the
next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.ops import runs as background
from geadmin.repository import revisions
from geadmin.repository.revisions import sha256_of
from geadmin.stack.tritonserver import TritonProcess
from pages.ui import keys
from tests.support.apptest import APP, button, isolate, point_at, run
from tests.support.processes import killed_mid_run
from tests.support.samples import copy_samples

ROOT = Path(__file__).resolve().parents[2]
MODEL = "digits_classifier"


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    st.cache_data.clear()
    st.cache_resource.clear()  # the dashboard reconciles once per process: this test is a new start
    yield
    st.cache_resource.clear()


def test_an_interrupted_apply_is_shown_on_the_models_page_with_the_way_back(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    isolate(monkeypatch, home)
    server = point_at(monkeypatch, triton_factory(copy_samples(tmp_path / "repo"), models=[MODEL]))
    path = server.repository / MODEL / "config.pbtxt"
    old = path.read_bytes()
    (tmp_path / "new.pbtxt").write_bytes(old.replace(b"max_queue_delay_microseconds: 1000",
                                                     b"max_queue_delay_microseconds: 2500"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEADMIN_")}
    killed = subprocess.run(
        [sys.executable, "-m", "geadmin.cli", "config", "apply", MODEL, str(tmp_path / "new.pbtxt"),
         "--url", server.http_url, "--repository", str(server.repository)],
        cwd=ROOT, env={**env, "GEADMIN_HOME": str(home), "GEADMIN_FAULT_POINT": "apply.written"},
        capture_output=True, text=True, timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    kept = revisions.revision_with_hash(server.repository, MODEL, sha256_of(old))
    assert kept is not None

    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("models.py")
    run(at)
    assert [r.result for r in audit.query(model=MODEL)] == ["interrupted", "started"]  # closed at start
    notices = [w.value for w in at.warning if "Interrupted change" in w.value]
    assert len(notices) == 1 and f"an interrupted apply of {MODEL!r}" in notices[0]
    assert f"geadmin config rollback {MODEL} {kept.number}" in notices[0]

    button(at, f"Review rollback to revision {kept.number}").click()  # type: ignore[attr-defined]
    run(at)
    assert at.session_state[keys.EDITOR_MODEL] == MODEL
    assert at.selectbox(key=keys.EDITOR_REVISION).value == kept.number
    assert any(b.label == f"Roll back to revision {kept.number}" for b in at.button)


def test_a_background_run_a_killed_dashboard_left_is_closed_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    isolate(monkeypatch, home)
    killed_mid_run(home, "http://127.0.0.1:8000")
    at = AppTest.from_file(APP, default_timeout=90)
    run(at)
    (closed,) = audit.query(action=background.ACTION, result=audit.Result.INTERRUPTED, home=home)
    assert (closed.model, closed.origin) == ("m", "dashboard"), closed
    assert "interrupted — the process that ran it ended before its outcome" in closed.message
