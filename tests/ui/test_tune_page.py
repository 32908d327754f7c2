"""The Tune page's saved runs, without a server: each names the server it measured and its
limits in words ("no limit", never 0.00); "Apply the winner" is disabled, with the reason, on
another server than the run measured and after the config file changed since the run. Its two
forms against the session's tritonserver: a run that cannot start says why under its own title
(another measurement holds the server, no objective set, no repository), never a traceback."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.ops.bench.params import server_lock
from geadmin.ops.tune.objective import ObjectivePlan, ObjectiveSearch
from geadmin.ops.tune.results import save_document
from geadmin.ops.tune.search import Trial, TuneResult, TuneSettings
from geadmin.ops.tune.space import Candidate
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad
from pages.ui import keys
from tests.support.apptest import APP, button, isolate, point_at, run

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


def test_an_objective_run_shows_its_objective_the_load_replayed_and_the_winner_s_curve(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    page(monkeypatch, tmp_path)
    until = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    load = RecordedLoad(MODEL, until - timedelta(hours=1), until, 22.0, 30.0, source="Prometheus at http://p:9090",
                        samples=12)
    search = ObjectiveSearch(ObjectivePlan(Objective(MODEL, p99_ms=50.0, error_budget=0.01), load))
    best = Trial(Candidate(0, 0, 2), "objective", True, 29.5, 20.0, 41.0, rate_rps=30.0, requests=120)
    search.curve = [Trial(Candidate(0, 0, 2), "curve", True, 44.0, 30.0, 48.0, rate_rps=45.0, requests=180)]
    result = TuneResult(MODEL, HERE, TuneSettings(MODEL, max_p99_ms=50.0), Candidate(0),
                        (best, *search.curve), best, CONFIG, notes=(f"load replayed: {load.describe()}",),
                        run="0123abcd",
                        summary=search.summary(best, [best]), extra=search.document(best, [best]))
    save_document(MODEL, HERE, "alice", result.to_json(), home=tmp_path / "home")
    at = open_tune(tmp_path)
    captions = [c.value for c in at.caption]
    assert any(f"Measured on {HERE} at 30 req/s · objective: p99 at most 50 ms, error budget 1 %" in c
               for c in captions), captions
    assert any("load replayed: resnet: mean 22 req/s, peak 30 req/s over 2026-12-06 11:00–12:00 UTC "
               "(60 min) in Prometheus at http://p:9090" in c for c in captions), captions
    assert "meets it up to at least 45 req/s" in at.markdown[0].value
    assert len(at.get("plotly_chart")) == 1


SERVED = "digits_classifier"


def submit(at: AppTest, goal: str, label: str) -> AppTest:
    at.radio(key=keys.TUNE_GOAL).set_value(goal)
    run(at)
    at.selectbox(key=keys.TUNE_MODEL).set_value(SERVED)
    button(at, label).click()  # type: ignore[attr-defined]
    return run(at)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_a_tune_while_another_measurement_holds_the_server_says_so_under_its_title(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_server: TritonProcess) -> None:
    isolate(monkeypatch, tmp_path / "home")
    point_at(monkeypatch, triton_server)
    at = open_tune(tmp_path)
    with server_lock(tmp_path / "home", triton_server.http_url, "resnet"):
        submit(at, "Most throughput under limits", "Tune")
    busy = (f"**Tuning stopped:** cannot tune {SERVED} now: another load test runs against "
            f"{triton_server.http_url} now (resnet, pid ")
    fix = "**Next step:** wait for the load test or tuning run that holds it to finish (or cancel it)"
    assert any(e.startswith(busy) and fix in e for e in errors(at)), errors(at)
    assert keys.TUNE_RUN not in at.session_state


def test_tuning_to_an_objective_that_is_not_set_names_the_command_that_sets_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_server: TritonProcess) -> None:
    isolate(monkeypatch, tmp_path / "home")
    point_at(monkeypatch, triton_server)
    at = submit(open_tune(tmp_path), "Meet the objective at the recorded load", "Tune to the objective")
    assert any(e.startswith("**Not tuned:** ") and "geadmin objectives" in e for e in errors(at)), errors(at)


def test_a_server_without_a_known_repository_cannot_be_tuned_and_says_why(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_server: TritonProcess) -> None:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    at = submit(open_tune(tmp_path), "Most throughput under limits", "Tune")
    assert any(e.startswith("The model repository is not known for this server (GEADMIN_REPOSITORY)")
               for e in errors(at)), errors(at)
