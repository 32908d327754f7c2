"""The Tune page's saved runs, without a server: each names the server it measured and its
limits in words ("no limit", never 0.00); "Apply the winner" is disabled, with the reason, on
another server than the run measured and after the config file changed since the run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.ops.tune.results import save_document
from geadmin.ops.tune.search import Trial, TuneResult, TuneSettings
from geadmin.ops.tune.space import Candidate
from tests.support.apptest import APP, button, isolate, run

MODEL = "resnet"
CONFIG = f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 1\n'
HERE = "http://127.0.0.1:9"  # the page's server (nothing answers there: runs stay visible)


def saved_run(home: Path, server: str, live_sha256: str) -> int:
    best = Trial(Candidate(8, 2000, 1), "shortlist", True, 900.0, 4.0, 9.0, 7.5, 5.0)
    result = TuneResult(MODEL, server, TuneSettings(MODEL), Candidate(1), (best,), best,
                        CONFIG.replace("max_batch_size: 1", "max_batch_size: 8"), run="0123abcd",
                        live_sha256=live_sha256)
    return save_document(MODEL, server, "alice", result.to_json(), home=home)


def page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path / "home")
    repository = tmp_path / "repo"
    (repository / MODEL / "1").mkdir(parents=True)
    (repository / MODEL / "config.pbtxt").write_text(CONFIG)
    monkeypatch.setenv("GEADMIN_TRITON_URL", HERE)
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(repository))
    return repository


def open_tune(tmp_path: Path) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("tune.py")
    return run(at)


def test_a_run_of_another_server_names_it_and_its_winner_is_not_applied_here(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    repository = page(monkeypatch, tmp_path)
    sha = hashlib.sha256((repository / MODEL / "config.pbtxt").read_bytes()).hexdigest()
    saved_run(tmp_path / "home", "http://127.0.0.2:8000", sha)
    at = open_tune(tmp_path)
    assert any("Measured on http://127.0.0.2:8000 · max p99: no limit · min throughput: no minimum" in c.value
               for c in at.caption), [c.value for c in at.caption]
    assert button(at, "Apply the winner").disabled  # type: ignore[attr-defined]
    assert any(f"measured http://127.0.0.2:8000, not {HERE}" in i.value for i in at.info), \
        [i.value for i in at.info]


def test_a_run_whose_file_changed_since_is_not_applied(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    repository = page(monkeypatch, tmp_path)
    saved_run(tmp_path / "home", HERE, hashlib.sha256(CONFIG.encode()).hexdigest())
    (repository / MODEL / "config.pbtxt").write_text(CONFIG + "# edited since the run\n")
    at = open_tune(tmp_path)
    assert any("changed since this run started" in w.value for w in at.warning), [w.value for w in at.warning]
    assert button(at, "Apply the winner").disabled  # type: ignore[attr-defined]
    assert any("the config file changed since this run started" in i.value for i in at.info)
    assert (repository / MODEL / "config.pbtxt").read_text() == CONFIG + "# edited since the run\n"
