"""`geadmin capacity` without a server: Triton down exits 3, bad figures and a fleet asked to
measure are refused with 2 (the message names the bound), and the text output puts every
figure beside its source."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.cli.capacity import render
from geadmin.cli.main import main
from geadmin.diagnose.capacity import CapacityReport, Saturation, SweepStep, assess
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def workspace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "REPOSITORY", "STACK", "PROMETHEUS_URL"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path


def test_triton_down_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--url", "http://127.0.0.1:9", "--timeout", "1"]) == 3
    assert "127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "says"), [
    (["--min-headroom", "0.5"], "minimum headroom is 1 to 100"),
    (["--horizon-days", "0"], "forecast horizon is above 0"),
    (["--window-h", "-1"], "history window is above 0"),
])
def test_bad_figures_are_refused_with_the_bound(flags: list[str], says: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--url", "http://127.0.0.1:9", *flags]) == 2
    assert says in capsys.readouterr().err


def test_a_fleet_is_never_measured(workspace: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    servers = workspace / "servers.toml"
    servers.write_text('[[server]]\nurl = "http://127.0.0.1:9"\n\n'
                       '[[fleet]]\nname = "lab"\nsources = ["servers"]\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    assert main(["capacity", "--fleet", "lab", "--measure"]) == 2
    assert "a fleet is read, never measured" in capsys.readouterr().err


def test_the_text_output_puts_each_figure_beside_its_source() -> None:
    load = RecordedLoad("m", NOW - timedelta(hours=24), NOW, 30.0, 50.0,
                        source="Prometheus at http://p:9090", samples=24)
    sweep = Saturation("m", 100.0, 2, 100.0, "measured at 2026-12-06 11:00 UTC (capacity sweep abc)",
                       NOW.isoformat(), (SweepStep(100.0, 99.0, 40.0, 0.0, True),))
    report = CapacityReport("http://127.0.0.1:8000", 30.0, 1.2, (
        assess("m", Objective("m", 100.0), load, sweep, trend=None, horizon_days=30, min_headroom=1.2),
        assess("n", None, None, None, trend=None, horizon_days=30, min_headroom=1.2)))
    text = render(report)
    assert "saturation rate  100 req/s" in text
    assert "measured at 2026-12-06 11:00 UTC (capacity sweep abc)" in text
    assert "recorded peak    50 req/s" in text and "Prometheus at http://p:9090" in text
    assert "headroom         2 x" in text
    assert "n: no p99 objective: set one with `geadmin objectives set n --p99-ms" in text


def test_a_window_perf_analyzer_refuses_is_refused_before_anything_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--url", "http://127.0.0.1:9", "--measure", "--window-ms", "10"]) == 2
    assert "window per step is 100 to 60000 ms" in capsys.readouterr().err
