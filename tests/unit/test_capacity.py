"""geadmin.diagnose.capacity: every figure says where it came from, a model with no objective
names the command that sets one, headroom and needs follow from the measured and recorded
figures, a model under its headroom or forecast to saturate is flagged; the saved sweep is
read back as "measured at T" and never for another model or server."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.diagnose.capacity import DeviceMemory, Saturation, SweepStep, assess
from geadmin.diagnose.forecast import DAY_S, fit_trend
from geadmin.errors import PrometheusError
from geadmin.ops.capacity import saved
from geadmin.ops.capacity.report import memory_of, traffic_of
from geadmin.ops.capacity.tuned import from_tuner
from geadmin.ops.tune.results import save_document
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad
from geadmin.telemetry.npu_map import FROM_CONFIG, MapRow, ModelMap
from geadmin.telemetry.sources.npu import NpuDevice

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
GOAL = Objective("m", p99_ms=100.0, error_budget=0.001)


def load(peak: float | None, mean: float | None = None, samples: int = 10) -> RecordedLoad:
    return RecordedLoad("m", NOW - timedelta(hours=24), NOW, mean if mean is not None else peak, peak,
                        source="the sampler's history in /w/geadmin.db, source http://h:8002/metrics",
                        samples=samples if peak is not None else 0)


def measured(rate: float | None, instances: int = 2) -> Saturation:
    return Saturation("m", rate, instances, 100.0,
                      "measured now (capacity sweep abc on the trial copy m__tune_abc)",
                      NOW.isoformat(), (SweepStep(10.0, 10.0, 20.0, 0.0, True),))



def test_a_model_without_an_objective_names_the_command_that_sets_one() -> None:
    found = assess("m", None, load(50.0), measured(100.0), trend=None, horizon_days=30, min_headroom=1.2)
    assert "geadmin objectives set m --p99-ms" in found.objective
    assert found.saturation.value is None and found.saturation.source == "no objective"
    assert found.short == "" and found.needs is None


def test_every_figure_says_where_it_came_from() -> None:
    trend = fit_trend([NOW.timestamp() - i * 3600 for i in range(24)], [40.0 - i * 0.05 for i in range(24)])
    found = assess("m", GOAL, load(50.0, 30.0), measured(100.0), trend=trend, horizon_days=30,
                   min_headroom=1.2)
    assert found.saturation.source.startswith("measured now (capacity sweep abc")
    assert found.peak.source.startswith("recorded, 2026-12-05 12:00")
    assert "http://h:8002/metrics" in found.peak.source and found.mean.value == 30.0
    assert found.headroom.value == pytest.approx(2.0)
    assert found.headroom.source == "saturation rate / recorded peak"
    assert found.trend.source.startswith("forecast: ") and "least squares" in found.trend.source
    assert found.forecast_peak.source.startswith("forecast: ")
    assert found.needs is not None and found.needs.instances.source.startswith("forecast: ")


def test_headroom_under_the_minimum_is_flagged() -> None:
    found = assess("m", GOAL, load(90.0), measured(100.0), trend=None, horizon_days=30, min_headroom=1.2)
    assert found.headroom.value == pytest.approx(100 / 90)
    assert found.short.startswith("headroom 1.11x is under 1.2x")


def test_a_peak_over_the_saturation_rate_is_saturated() -> None:
    found = assess("m", GOAL, load(120.0), measured(100.0), trend=None, horizon_days=30, min_headroom=1.2)
    assert found.short.startswith("saturated")


def test_a_model_that_holds_no_rate_is_short_with_no_load_recorded() -> None:
    """A new model (no history) whose lowest step failed: exit 0 and no warning before."""
    failing = replace(measured(100.0), rate_rps=None)
    found = assess("m", GOAL, None, failing, trend=None, horizon_days=30, min_headroom=1.2)
    assert found.saturation.value == 0.0 and found.peak.value is None
    assert found.short.startswith("holds its objective at no rate measured")


def test_a_flat_trend_forecasts_the_recorded_peak_as_the_saturation_forecast_reads_it() -> None:
    """+3 +/- 2 req/s per day reaches zero: saturation 'not within 30 days', yet the forecast peak
    carried +3/day to 140 req/s and asked for 2 replicas."""
    hours = [NOW.timestamp() - (71 - i) * 3600 for i in range(72)]
    noisy = [20.0 + 3.0 * (t - hours[0]) / DAY_S + (40.0 if i % 2 else -40.0) for i, t in enumerate(hours)]
    trend = fit_trend(hours, noisy)
    assert trend is not None and trend.flat and trend.slope_per_day > 0
    found = assess("m", GOAL, load(50.0), measured(100.0), trend=trend, horizon_days=30, min_headroom=1.2)
    assert found.saturates.startswith("not within 30 days") and found.short == ""
    assert found.forecast_peak.value == 50.0
    assert found.forecast_peak.source.startswith("recorded: the recorded peak, the trend shows no growth")
    assert found.needs is not None and found.needs.replicas.value == 1.0


def test_growth_that_reaches_saturation_within_the_horizon_is_flagged_with_its_day() -> None:
    hours = [NOW.timestamp() - (47 - i) * 3600 for i in range(48)]
    trend = fit_trend(hours, [20.0 + 5.0 * (t - hours[0]) / DAY_S for t in hours])  # +5 req/s per day
    found = assess("m", GOAL, load(50.0), measured(100.0), trend=trend, horizon_days=30, min_headroom=1.2)
    assert found.saturates.startswith("in 10.0 days")
    assert found.short.startswith("forecast to saturate in 10.0 days")
    assert found.forecast_peak.value == pytest.approx(50.0 + 5.0 * 30)


def test_needs_count_instances_npus_and_replicas_for_the_forecast_peak() -> None:
    hours = [NOW.timestamp() - (47 - i) * 3600 for i in range(48)]
    trend = fit_trend(hours, [20.0 + 2.0 * (t - hours[0]) / DAY_S for t in hours])
    memory = DeviceMemory(device=3, per_instance_bytes=10 << 30, total_bytes=64 << 30)  # 6 fit one NPU
    found = assess("m", GOAL, load(50.0), measured(100.0, instances=2), trend=trend, horizon_days=30,
                   min_headroom=1.2, memory=memory, npus_here=1)
    assert found.needs is not None
    # forecast peak 50 + 2 x 30 = 110 req/s at 50 req/s per instance -> 3 instances -> 1 NPU
    assert found.needs.instances.value == 3
    assert found.needs.npus.value == 1 and "6 instances fit one NPU" in found.needs.npus.source
    assert found.needs.replicas.value == 1


def test_no_measured_rate_says_how_to_measure_and_judges_nothing() -> None:
    found = assess("m", GOAL, load(50.0), None, trend=None, horizon_days=30, min_headroom=1.2)
    assert "geadmin capacity MODEL --measure" in found.saturation.source
    assert found.headroom.value is None and found.short == "" and found.needs is None


def test_no_recorded_traffic_is_said_with_its_window_and_source() -> None:
    found = assess("m", GOAL, load(None), measured(100.0), trend=None, horizon_days=30, min_headroom=1.2)
    assert found.peak.value is None and found.peak.source.startswith("no requests recorded, ")


def test_a_rate_that_never_held_is_zero_with_the_reason() -> None:
    never = Saturation("m", None, 1, 100.0, "measured now (capacity sweep x)", NOW.isoformat(),
                       (SweepStep(1.0, 0.5, 900.0, 0.0, False, "p99 900.0 ms over 100 ms"),))
    found = assess("m", GOAL, load(5.0), never, trend=None, horizon_days=30, min_headroom=1.2)
    assert found.saturation.value == 0.0 and found.short.startswith("saturated")
    assert "p99 900.0 ms over 100 ms" in found.notes[0]


def test_a_saved_sweep_reads_back_as_measured_at_its_time_for_its_model_and_server_only(
        tmp_path: Path) -> None:
    saved.save(measured(100.0), "http://127.0.0.1:8000", home=tmp_path)
    back = saved.latest("m", "http://127.0.0.1:8000", home=tmp_path, now=NOW + timedelta(hours=1))
    assert back is not None and back.rate_rps == 100.0 and back.curve == measured(100.0).curve
    assert back.source.startswith("measured at 2026-12-06 12:00 UTC (capacity sweep abc")
    assert saved.latest("other", "http://127.0.0.1:8000", home=tmp_path) is None
    assert saved.latest("m", "http://127.0.0.1:9000", home=tmp_path) is None
    assert saved.latest("m", "http://127.0.0.1:8000", home=tmp_path, max_age_s=60,
                        now=NOW + timedelta(hours=1)) is None


def test_a_damaged_saved_sweep_is_absent_not_an_error(tmp_path: Path) -> None:
    path = saved.save(measured(100.0), "http://127.0.0.1:8000", home=tmp_path)
    path.write_text("{not json")
    assert saved.latest("m", "http://127.0.0.1:8000", home=tmp_path) is None
    path.write_text('{"server": "http://127.0.0.1:8000", "model": "m"}')
    assert saved.latest("m", "http://127.0.0.1:8000", home=tmp_path) is None


def tuner_run(home: Path, server: str, instances: int, *, rate: float = 80.0, lower: bool = False) -> int:
    document = {"kind": "objective", "model": "m", "server": server, "saturation_rps": rate,
                "saturation_lower_bound": lower, "objective": {"p99_ms": 100.0, "error_budget": 0.001},
                "best": {"instances": instances, "ok": True},
                "curve": [{"rate_rps": 40.0, "p99_ms": 30.0, "throughput": 40.0, "ok": True},
                          {"rate_rps": rate, "p99_ms": 90.0, "throughput": rate, "ok": True},
                          {"rate_rps": rate * 1.5, "p99_ms": 400.0, "throughput": rate, "ok": False}]}
    return save_document("m", server, "alice", document, home=home)


def test_the_objective_tuners_curve_is_a_saturation_measured_at_its_run(tmp_path: Path) -> None:
    run = tuner_run(tmp_path, "http://127.0.0.1:8000", 2)
    found = from_tuner("m", "http://127.0.0.1:8000", live_instances=2, home=tmp_path)
    assert found is not None and found.rate_rps == 80.0 and found.instances == 2
    assert found.source.startswith("measured at ")
    assert f"(tune run {run}, the objective tuning's curve" in found.source
    assert [s.ok for s in found.curve] == [True, True, False]


def test_the_tuners_curve_is_not_used_for_another_instance_count_server_or_kind(tmp_path: Path) -> None:
    tuner_run(tmp_path, "http://127.0.0.1:8000", 3)
    assert from_tuner("m", "http://127.0.0.1:8000", live_instances=2, home=tmp_path) is None
    assert from_tuner("m", "http://127.0.0.1:9000", live_instances=3, home=tmp_path) is None
    save_document("m", "http://127.0.0.1:9000", "alice", {"model": "m", "server": "http://127.0.0.1:9000",
                                                          "best": {"instances": 3}}, home=tmp_path)
    assert from_tuner("m", "http://127.0.0.1:9000", live_instances=3, home=tmp_path) is None
    tuner_run(tmp_path, "http://127.0.0.1:8000", 3, lower=True)
    found = from_tuner("m", "http://127.0.0.1:8000", live_instances=3, home=tmp_path)
    assert found is not None and "a lower bound" in found.source


def test_hbm_per_instance_comes_only_from_an_npu_that_holds_the_model_alone() -> None:
    shared = NpuDevice(0, "npu-smi", hbm_used_bytes=30 << 30, hbm_total_bytes=64 << 30)
    alone = NpuDevice(1, "npu-smi", hbm_used_bytes=20 << 30, hbm_total_bytes=64 << 30)
    found = ModelMap((MapRow(0, "m", "", 1, FROM_CONFIG), MapRow(0, "other", "", 1, FROM_CONFIG),
                      MapRow(1, "m", "", 2, FROM_CONFIG)))
    assert memory_of("m", [shared, alone], found) == DeviceMemory(1, 10 << 30, 64 << 30)
    assert memory_of("other", [shared, alone], found) is None  # never split between models


class UnreadableHistoryDouble:
    """A history whose every read fails as a Prometheus that is down does."""

    label = "Prometheus at http://127.0.0.1:9"

    def model_series(self, *args: object, **kwargs: object) -> list[object]:
        raise PrometheusError("Prometheus at http://127.0.0.1:9 does not answer: connection refused")


def test_a_history_that_cannot_be_read_is_a_note_not_the_end_of_the_report() -> None:
    notes: list[str] = []
    history = UnreadableHistoryDouble()
    assert traffic_of(history, "http://h:8002/metrics", "m", NOW, NOW, notes) is None  # type: ignore[arg-type]
    assert notes == ["m: the recorded load was not read from Prometheus at http://127.0.0.1:9: Prometheus at "
                     "http://127.0.0.1:9 does not answer: connection refused"]
