"""geadmin.telemetry.derive: rates, averages and quantiles per model from two scrapes; counter
resets and models that come and go never give a negative or spiking rate.

Pages are the Triton 2.51 reference pages (assets/telemetry) or built here in the same
format (same families, labels and types) with chosen counter values.
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geadmin.errors import TelemetryError
from geadmin.telemetry.derive import ModelWindow, derive, server_stats
from geadmin.telemetry.sources.scrape import parse
from tests.support.hypothesis_profiles import examples
from tests.support.metrics_pages import FAMILIES, Counters, page

ASSETS = Path(__file__).parent / "assets" / "telemetry"
DEFAULT_PAGE = (ASSETS / "metrics_2.51_default.txt").read_text()
SUMMARY_PAGE = (ASSETS / "metrics_2.51_summary_latencies.txt").read_text()
def rates_of(window: ModelWindow) -> dict[str, float | None]:
    return {f.name: getattr(window, f.name) for f in fields(window)
            if f.name.endswith(("_per_s", "_ms", "_size"))}


# -- a normal window -----------------------------------------------------------------------
def test_rates_and_averages_from_counter_deltas() -> None:
    before = page({"m": Counters(success=100, inferences=400, executions=50, request_us=200_000,
                                 queue_us=50_000, compute_input_us=10_000, compute_infer_us=100_000,
                                 compute_output_us=5_000)}, timestamp_s=1000.0)
    after = page({"m": Counters(success=300, inferences=1200, executions=150, request_us=800_000,
                                queue_us=250_000, compute_input_us=30_000, compute_infer_us=400_000,
                                compute_output_us=15_000, failures={"BACKEND": 5, "REJECTED": 3},
                                pending=7)}, timestamp_s=1010.0)
    window = derive(before, after)
    assert window.window_s == 10.0
    m = window.model("m", "1")
    assert m is not None and not m.counters_reset and not m.first_seen
    assert m.inferences_per_s == 80.0  # (1200 - 400) / 10
    assert m.successes_per_s == 20.0
    assert m.failures_per_s == 0.8
    assert m.requests_per_s == 20.8  # success + failure
    assert m.executions_per_s == 10.0
    assert m.avg_request_ms == 3.0  # 600_000 us / 200 requests / 1000
    assert m.avg_queue_ms == 1.0
    assert m.avg_compute_input_ms == 0.1
    assert m.avg_compute_infer_ms == 1.5
    assert m.avg_compute_output_ms == 0.05
    assert m.avg_ms("queue") == m.avg_queue_ms
    assert dict(m.failures_by_reason) == {"BACKEND": 5, "CANCELED": 0, "OTHER": 0, "REJECTED": 3}
    assert m.pending_requests == 7


def test_average_batch_size_is_inferences_over_executions_in_the_window() -> None:
    before = page({"m": Counters(inferences=131, executions=33)}, timestamp_s=0.0)
    after = page({"m": Counters(inferences=231, executions=58)}, timestamp_s=5.0)
    m = derive(before, after).model("m")
    assert m is not None and m.avg_batch_size == 4.0  # 100 / 25, not 231 / 58


def test_a_window_without_traffic_has_zero_rates_and_no_averages() -> None:
    same = Counters(success=10, inferences=10, executions=10, request_us=5000)
    m = derive(page({"m": same}, timestamp_s=0.0), page({"m": same}, timestamp_s=2.0)).model("m")
    assert m is not None
    assert (m.inferences_per_s, m.requests_per_s, m.executions_per_s) == (0.0, 0.0, 0.0)
    assert m.avg_batch_size is None and m.avg_request_ms is None and m.avg_queue_ms is None


def test_reference_pages_derive_per_model_and_version_with_server_stats() -> None:
    before = parse(DEFAULT_PAGE, timestamp_s=0.0)
    after = parse(DEFAULT_PAGE.replace('nv_inference_count{model="probe_identity",version="1"} 131',
                                       'nv_inference_count{model="probe_identity",version="1"} 171')
                  .replace('nv_inference_exec_count{model="probe_identity",version="1"} 33',
                           'nv_inference_exec_count{model="probe_identity",version="1"} 43'),
                  timestamp_s=4.0)
    window = derive(before, after)
    assert [(m.model, m.version) for m in window.models] == [("probe_identity", "1"), ("py_np", "1")]
    probe = window.model("probe_identity")
    assert probe is not None and probe.inferences_per_s == 10.0 and probe.avg_batch_size == 4.0
    assert window.server.cpu_utilization_pct == pytest.approx(45.5)
    assert window.server.cpu_memory_used_bytes == 409071616
    assert window.server.cpu_memory_total_bytes == 25275973632
    assert window.server.pinned_memory_total_bytes == 268435456


# -- quantiles -------------------------------------------------------------------------------
def test_quantiles_come_from_the_summaries_in_milliseconds() -> None:
    before = parse(SUMMARY_PAGE, timestamp_s=0.0)
    after = parse(SUMMARY_PAGE, timestamp_s=1.0)
    m = derive(before, after).model("py_np", "1")
    assert m is not None
    request = m.quantiles_for("request")
    assert request is not None
    assert (request.p50_ms, request.p90_ms, request.p99_ms) == (1.053, 3.443, 4.248)
    queue = m.quantiles_for("queue")
    assert queue is not None and queue.p50_ms == 0.128
    assert [stage for stage, _ in m.quantiles] == [
        "request", "queue", "compute_input", "compute_infer", "compute_output"]


def test_without_summary_latencies_there_are_no_quantiles() -> None:
    m = derive(parse(DEFAULT_PAGE, timestamp_s=0.0), parse(DEFAULT_PAGE, timestamp_s=1.0)).model("py_np")
    assert m is not None and m.quantiles == () and m.quantiles_for("request") is None


def test_a_nan_quantile_is_unknown_not_zero() -> None:
    line = 'nv_inference_request_summary_us{model="py_np",version="1",quantile="0.9"} '
    text = SUMMARY_PAGE.replace(line + "3443", line + "NaN")
    m = derive(parse(text, timestamp_s=0.0), parse(text, timestamp_s=1.0)).model("py_np")
    request = m.quantiles_for("request") if m else None
    assert request is not None and request.p90_ms is None and request.p50_ms == 1.053


# -- resets and models that come and go ------------------------------------------------------
def test_a_counter_reset_gives_no_negative_rate_and_counts_the_new_values() -> None:
    before = page({"m": Counters(success=5000, inferences=9000, executions=3000, request_us=9_000_000,
                                 failures={"BACKEND": 40})}, timestamp_s=0.0)
    # Triton restarted inside the window: every counter starts again from zero
    after = page({"m": Counters(success=20, inferences=40, executions=10, request_us=60_000,
                                failures={"BACKEND": 1})}, timestamp_s=10.0)
    m = derive(before, after).model("m")
    assert m is not None and m.counters_reset
    assert m.inferences_per_s == 4.0 and m.successes_per_s == 2.0 and m.executions_per_s == 1.0
    assert m.avg_batch_size == 4.0 and m.avg_request_ms == 3.0  # consistent with its divisor
    assert dict(m.failures_by_reason)["BACKEND"] == 1
    assert all(v is None or v >= 0 for v in rates_of(m).values())


def test_one_reset_counter_resets_the_whole_model_window() -> None:
    """Not 'success went down, inferences went up': numerators and divisors from one epoch."""
    before = page({"m": Counters(success=100, inferences=100, executions=100, request_us=100_000)},
                  timestamp_s=0.0)
    after = page({"m": Counters(success=10, inferences=150, executions=120, request_us=110_000)},
                 timestamp_s=10.0)
    m = derive(before, after).model("m")
    assert m is not None and m.counters_reset
    assert m.successes_per_s == 1.0 and m.inferences_per_s == 15.0  # the new values alone
    assert m.avg_request_ms == 11.0  # 110_000 us / 10 requests, not 10_000 / -90


def test_a_reset_does_not_spike_the_rate_above_the_new_traffic() -> None:
    before = page({"m": Counters(success=1_000_000, inferences=1_000_000)}, timestamp_s=0.0)
    after = page({"m": Counters(success=3, inferences=3)}, timestamp_s=1.0)
    m = derive(before, after).model("m")
    assert m is not None and m.inferences_per_s == 3.0


def test_a_model_only_in_the_later_scrape_is_counted_from_zero() -> None:
    before = page({"a": Counters(success=10, inferences=10, executions=10)}, timestamp_s=0.0)
    after = page({"a": Counters(success=20, inferences=20, executions=20),
                  "b": Counters(success=6, inferences=12, executions=3, request_us=12_000)}, timestamp_s=2.0)
    window = derive(before, after)
    b = window.model("b")
    assert b is not None and b.first_seen and not b.counters_reset
    assert b.inferences_per_s == 6.0 and b.avg_batch_size == 4.0 and b.avg_request_ms == 2.0
    a = window.model("a")
    assert a is not None and not a.first_seen and a.inferences_per_s == 5.0


def test_a_model_only_in_the_earlier_scrape_is_listed_as_gone() -> None:
    before = page({"a": Counters(success=1), "old": Counters(success=50)}, timestamp_s=0.0)
    after = page({"a": Counters(success=3)}, timestamp_s=1.0)
    window = derive(before, after)
    assert window.gone == (("old", "1"),)
    assert window.model("old") is None and [m.model for m in window.models] == ["a"]


def test_triton_restart_between_different_runs_is_a_reset_on_the_reference_pages() -> None:
    """The two reference pages come from two runs: py_np's request time went down."""
    window = derive(parse(DEFAULT_PAGE, timestamp_s=0.0), parse(SUMMARY_PAGE, timestamp_s=10.0))
    py = window.model("py_np")
    assert py is not None and py.counters_reset and window.reset
    assert py.inferences_per_s == 2.0  # 20 inferences of the new run over 10 s
    assert py.avg_request_ms == pytest.approx(80071 / 20 / 1000)


def test_scrapes_out_of_time_order_are_refused() -> None:
    one = page({"m": Counters()}, timestamp_s=5.0)
    with pytest.raises(TelemetryError, match="time order"):
        derive(one, one)
    with pytest.raises(TelemetryError):
        derive(page({"m": Counters()}, timestamp_s=6.0), one)


def test_server_stats_are_unknown_when_triton_does_not_publish_them() -> None:
    stats = server_stats(parse("", timestamp_s=0.0))
    assert stats.cpu_utilization_pct is None and stats.cpu_memory_used_bytes is None


def test_server_stats_before_tritons_first_host_poll_are_unknown_not_zero() -> None:
    """Seen on the real server: right after start every nv_cpu_* gauge reads 0."""
    text = ("# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0\n"
            "# TYPE nv_cpu_memory_total_bytes gauge\nnv_cpu_memory_total_bytes 0\n"
            "# TYPE nv_cpu_memory_used_bytes gauge\nnv_cpu_memory_used_bytes 0\n")
    stats = server_stats(parse(text, timestamp_s=0.0))
    assert (stats.cpu_utilization_pct, stats.cpu_memory_used_bytes, stats.cpu_memory_total_bytes) == (
        None, None, None)
    idle = server_stats(parse(text.replace("total_bytes 0", "total_bytes 8000"), timestamp_s=0.0))
    assert (idle.cpu_utilization_pct, idle.cpu_memory_used_bytes, idle.cpu_memory_total_bytes) == (
        0.0, 0, 8000)


# -- property: whatever the counters do, rates are never negative ----------------------------
counter = st.floats(min_value=0, max_value=1e12, allow_nan=False)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(counter, min_size=16, max_size=16), st.floats(min_value=0.01, max_value=3600))
def test_rates_are_never_negative_whatever_the_counters_do(values: list[float], window_s: float) -> None:
    names = [attr for _, attr in FAMILIES]
    before = Counters(**dict(zip(names, values[:8], strict=True)))
    after = Counters(**dict(zip(names, values[8:], strict=True)))
    m = derive(page({"m": before}, timestamp_s=0.0), page({"m": after}, timestamp_s=window_s)).model("m")
    assert m is not None
    for name, value in rates_of(m).items():
        assert value is None or (value >= 0 and math.isfinite(value)), (name, value)
    # no spike: a rate never exceeds what the later counter alone could give over the window
    assert m.inferences_per_s is not None and m.inferences_per_s <= after.inferences / window_s * (1 + 1e-9)
