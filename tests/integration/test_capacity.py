"""Capacity on a real tritonserver: a short measured sweep with perf_analyzer on a trial copy
of a python model with a known service time finds its saturation rate (k instances sleeping S
per request saturate at k / S), leaves no trial and the live model untouched, is audited and
saved; `geadmin capacity` then reads it back as "measured at T" beside the recorded peak of
the sampler's history, and exits 4 when that peak leaves too little headroom."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.cli.main import main
from geadmin.errors import TuneRefusedError
from geadmin.ops.capacity import saved
from geadmin.ops.capacity.sweep import run_saturation_sweep
from geadmin.repository.trials import parse_name
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.alerting.objectives import store as store_objective
from geadmin.triton.client import TritonClient
from tests.support.capacity_models import add_paced_model, record_ramp

SERVICE_S, INSTANCES = 0.05, 2  # saturates at 40 req/s
MODEL = "paced"


@pytest.fixture
def paced(tmp_path: Path, triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    repository = tmp_path / "repo"
    repository.mkdir()
    add_paced_model(repository, MODEL, service_s=SERVICE_S, instances=INSTANCES)
    return triton_factory(repository, models=[MODEL])


def test_a_short_sweep_finds_the_known_saturation_rate_on_a_trial_and_leaves_nothing(
        paced: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    goal = Objective(MODEL, p99_ms=250.0, error_budget=0.01)
    before = (paced.repository / MODEL / "config.pbtxt").read_text()
    with TritonClient(paced.http_url) as client:
        result = run_saturation_sweep(client, paced.repository, MODEL, goal, auth=guard.os_user(), home=home,
                                    start_rps=10.0, refine=2, window_ms=1000)
        names = {m.name for m in client.repository_index()}
    assert result.rate_rps is not None
    assert 0.6 * 40 <= result.rate_rps <= 1.1 * 40, result.curve
    assert any(not p.ok for p in result.curve), "the sweep never went past saturation"
    assert result.instances == INSTANCES and result.source.startswith("measured now (capacity sweep ")
    # the trial is gone from Triton and disk; the live model's file never changed
    assert not any(parse_name(n) for n in names) and names == {MODEL}
    assert not any(parse_name(p.name) for p in paced.repository.iterdir())
    assert (paced.repository / MODEL / "config.pbtxt").read_text() == before
    rows = audit.query(action="tune", home=home, limit=10)
    assert [r.result for r in rows][:2] == ["ok", "started"] and "capacity sweep" in rows[0].message

    # the CLI reads the saved sweep as "measured at T" and judges it against the recorded peak
    store_objective(goal, "test", home=home)
    record_ramp(paced.metrics_url, MODEL, [30.0, 33.0, 36.0, 38.0], end_s=time.time(), step_s=60.0,
                home=home)
    code = main(["capacity", MODEL, "--url", paced.http_url, "--metrics-url", paced.metrics_url,
                 "--home", str(home), "--json"])
    document = json.loads(capsys.readouterr().out)
    [row] = document["models"]
    assert row["saturation"]["source"].startswith("measured at ")
    assert row["peak"]["value"] == pytest.approx(38.0)
    assert row["peak"]["source"].startswith("recorded, ") and paced.metrics_url in row["peak"]["source"]
    assert code == 4 and row["short"], row  # 38 req/s against ~40: under 1.2x headroom

    # a sweep of another instance count says nothing of the live config's: not used, and said
    saved.save(replace(result, instances=1), paced.http_url, home=home)
    main(["capacity", MODEL, "--url", paced.http_url, "--metrics-url", paced.metrics_url,
          "--home", str(home), "--json"])
    document = json.loads(capsys.readouterr().out)
    [row] = document["models"]
    assert row["saturation"]["value"] is None, row
    assert any(f"{MODEL}: the saved capacity sweep measured 1 instance(s) and the live config has "
               f"{INSTANCES}: not used" in note for note in document["notes"]), document["notes"]


def test_a_model_without_an_objective_is_refused_before_anything_is_loaded(
        paced: TritonProcess, tmp_path: Path) -> None:
    with TritonClient(paced.http_url) as client, pytest.raises(TuneRefusedError, match="objectives set"):
        run_saturation_sweep(client, paced.repository, MODEL, None, auth=guard.os_user(), home=tmp_path)
    assert [p.name for p in paced.repository.iterdir()] == [MODEL]


def test_a_fleet_reads_each_member_and_a_silent_one_is_a_row_not_the_end(
        triton_server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "up"\nurl = "{triton_server.http_url}"\n'
                       f'metrics_url = "{triton_server.metrics_url}"\n\n'
                       '[[server]]\nname = "gone"\nurl = "http://127.0.0.1:9"\n\n'
                       '[[fleet]]\nname = "lab"\nsources = ["servers"]\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    monkeypatch.delenv("GEADMIN_PROMETHEUS_URL", raising=False)
    store_objective(Objective("digits_classifier", p99_ms=50.0), "test", home=home)
    code = main(["capacity", "--fleet", "lab", "--home", str(home), "--json", "--timeout", "2"])
    members = {m["member"]: m for m in json.loads(capsys.readouterr().out)}
    assert set(members) == {"up", "gone"}
    assert members["gone"]["report"] is None and members["gone"]["error"]
    rows = {r["model"]: r for r in members["up"]["report"]["models"]}
    assert "digits_classifier" in rows and rows["digits_classifier"]["objective"] == "p99 at most 50 ms"
    assert rows["digits_preprocess"]["objective"].startswith("no p99 objective")
    assert code == 4  # a member that does not answer needs attention
