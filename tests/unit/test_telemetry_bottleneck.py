"""geadmin.telemetry.bottleneck: the bottleneck verdict per model from a derived window (pages in
Triton 2.51's format, built by the derive tests' `page`), with and without NPU devices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from geadmin.telemetry.bottleneck import (
    DOMINANT_SHARE,
    FIXES,
    MIN_WINDOW_S,
    NPU_BUSY_PCT,
    RECENT_SPAN_S,
    Bottleneck,
    BottleneckKind,
    devices_of,
    find_bottlenecks,
    recent_window,
    with_traffic,
)
from geadmin.telemetry.derive import Window, derive
from geadmin.telemetry.sources.npu import NpuDevice, NpuPlacement
from geadmin.telemetry.sources.scrape import Scrape
from tests.support.metrics_pages import Counters, page

IDLE = Counters(success=10, inferences=10, executions=10, request_us=1000, queue_us=100,
                compute_input_us=100, compute_infer_us=700, compute_output_us=100)


def window_of(queue_us: float, input_us: float, infer_us: float, output_us: float, *, requests: int = 100,
              others: dict[str, Counters] | None = None) -> Window:
    """A 10 s window in which model `m` served `requests` with these per-stage totals."""
    before = {"m": Counters(), **(others or {})}
    total = queue_us + input_us + infer_us + output_us
    after = {"m": Counters(success=requests, inferences=requests, executions=requests, request_us=total,
                           queue_us=queue_us, compute_input_us=input_us, compute_infer_us=infer_us,
                           compute_output_us=output_us, pending=3), **(others or {})}
    return derive(page(before, timestamp_s=100.0), page(after, timestamp_s=110.0))


def npu(device: int, util: float | None, *models: str) -> NpuDevice:
    return NpuDevice(id=device, source="triton", aicore_util_pct=util,
                     models=tuple(NpuPlacement(m, "1", f"{m}_0_{device}") for m in models))


def only(window: Window, devices: list[NpuDevice] | None = None) -> Bottleneck:
    (found,) = [b for b in find_bottlenecks(window, devices) if b.model == "m"]
    return found


def test_queue_time_dominating_is_queue_bound_with_its_numbers() -> None:
    b = only(window_of(queue_us=800_000, input_us=10_000, infer_us=180_000, output_us=10_000))
    assert b.verdict is BottleneckKind.QUEUE_BOUND
    assert b.queue_ms == 8.0 and b.compute_infer_ms == 1.8  # per request: 800 ms / 100
    assert b.queue_share == pytest.approx(0.8)
    assert b.requests_per_s == 10.0
    assert "queue 8.00 ms (80%)" in b.why and "10.0 req/s" in b.why
    assert b.fix == FIXES[BottleneckKind.QUEUE_BOUND] and "instances" in b.fix and "batching" in b.fix


def test_compute_infer_dominating_on_a_busy_npu_is_device_bound() -> None:
    window = window_of(queue_us=50_000, input_us=10_000, infer_us=900_000, output_us=40_000)
    b = only(window, [npu(0, 95.0, "m"), npu(1, 10.0, "other")])
    assert b.verdict is BottleneckKind.DEVICE_BOUND
    assert b.devices == (0,) and b.npu_util_pct == 95.0  # device 1 holds another model
    assert "compute infer 9.00 ms (90%)" in b.why and "NPU 0 95% busy" in b.why
    assert "device_ids" in b.fix


def test_the_busiest_of_the_models_devices_decides() -> None:
    window = window_of(queue_us=0, input_us=0, infer_us=900_000, output_us=100_000)
    b = only(window, [npu(0, 20.0, "m"), npu(1, NPU_BUSY_PCT, "m")])
    assert b.verdict is BottleneckKind.DEVICE_BOUND and b.devices == (0, 1) and b.npu_util_pct == NPU_BUSY_PCT


def test_compute_infer_dominating_with_an_npu_that_has_headroom_is_compute_bound() -> None:
    window = window_of(queue_us=50_000, input_us=10_000, infer_us=900_000, output_us=40_000)
    b = only(window, [npu(0, NPU_BUSY_PCT - 1, "m")])
    assert b.verdict is BottleneckKind.COMPUTE_BOUND
    assert "NPU 0 69% busy" in b.why


def test_compute_infer_dominating_without_npu_data_is_compute_bound_not_device_bound() -> None:
    window = window_of(queue_us=50_000, input_us=10_000, infer_us=900_000, output_us=40_000)
    for devices in (None, [], [npu(0, 99.0, "someone_else")], [npu(0, None, "m")]):
        b = only(window, devices)
        assert b.verdict is BottleneckKind.COMPUTE_BOUND, devices
        assert b.npu_util_pct is None
    assert "utilization unknown" in only(window, [npu(0, None, "m")]).why


def test_compute_input_and_output_dominating_is_host_bound() -> None:
    b = only(window_of(queue_us=100_000, input_us=450_000, infer_us=150_000, output_us=300_000))
    assert b.verdict is BottleneckKind.HOST_BOUND
    assert b.host_share == pytest.approx(0.75)
    assert "compute input+output 7.50 ms (75%)" in b.why


def test_no_stage_at_the_dominant_share_is_balanced() -> None:
    b = only(window_of(queue_us=400_000, input_us=150_000, infer_us=300_000, output_us=150_000))
    assert max(b.queue_share or 0, b.host_share or 0, b.infer_share or 0) < DOMINANT_SHARE
    assert b.verdict is BottleneckKind.BALANCED


def test_exactly_the_dominant_share_dominates() -> None:
    b = only(window_of(queue_us=500_000, input_us=100_000, infer_us=300_000, output_us=100_000))
    assert b.queue_share == DOMINANT_SHARE and b.verdict is BottleneckKind.QUEUE_BOUND


def test_a_model_without_requests_in_the_window_is_idle_and_left_out_of_traffic() -> None:
    window = window_of(queue_us=800_000, input_us=0, infer_us=200_000, output_us=0, others={"quiet": IDLE})
    found = {b.model: b for b in find_bottlenecks(window)}
    assert found["quiet"].verdict is BottleneckKind.IDLE and found["quiet"].fix == ""
    assert found["quiet"].queue_share is None
    assert [b.model for b in with_traffic(found.values())] == ["m"]


def test_no_traffic_anywhere_gives_only_idle_verdicts() -> None:
    quiet = {"a": IDLE, "b": IDLE}
    window = derive(page(quiet, timestamp_s=0.0), page(quiet, timestamp_s=5.0))
    found = find_bottlenecks(window)
    assert [b.verdict for b in found] == [BottleneckKind.IDLE, BottleneckKind.IDLE]
    assert with_traffic(found) == ()


def test_an_empty_window_has_no_verdicts() -> None:
    assert find_bottlenecks(derive(page({}, timestamp_s=0.0), page({}, timestamp_s=1.0))) == ()


def test_requests_that_all_failed_give_no_data_not_a_verdict_on_zeros() -> None:
    before = page({"m": Counters()}, timestamp_s=0.0)
    after = page({"m": Counters(failures={"BACKEND": 20})}, timestamp_s=10.0)
    b = only(derive(before, after))
    assert b.verdict is BottleneckKind.NO_DATA
    assert "2.0 failed/s" in b.why and "failures" in b.fix


def test_a_reset_window_is_judged_on_the_new_counts_and_says_so() -> None:
    # Triton restarted: the counters went down. The old totals must not leak into the shares.
    before = page({"m": Counters(success=10_000, queue_us=90_000_000, compute_infer_us=1_000)},
                  timestamp_s=0.0)
    after = page({"m": Counters(success=50, inferences=50, executions=50, queue_us=5_000,
                                compute_infer_us=95_000)}, timestamp_s=10.0)
    b = only(derive(before, after), [npu(0, 90.0, "m")])
    assert b.verdict is BottleneckKind.DEVICE_BOUND
    assert b.queue_ms == 0.1 and b.compute_infer_ms == 1.9
    assert "counters reset" in b.note


def test_placements_match_by_model_and_version() -> None:
    other_version = NpuDevice(id=2, source="triton", aicore_util_pct=99.0,
                              models=(NpuPlacement("m", "2", "m_0_0"),))
    any_version = NpuDevice(id=3, source="npu-exporter", aicore_util_pct=50.0,
                            models=(NpuPlacement("m", "", ""),))
    unknown = NpuDevice(id=4, source="npu-smi", models=None)
    assert [d.id for d in devices_of("m", "1", [other_version, any_version, unknown])] == [3]


# -- the live view's window ---------------------------------------------------------------------
def scrape_at(t: float, success: int, url: str = "http://triton:8002/metrics") -> Scrape:
    s = page({"m": Counters(success=success, inferences=success, executions=success, queue_us=success * 900,
                            compute_infer_us=success * 100)}, timestamp_s=t)
    return replace(s, url=url)


def test_the_live_window_reaches_back_to_the_oldest_scrape_of_the_last_minute() -> None:
    kept: tuple[Scrape, ...] = ()
    kept, window = recent_window(kept, scrape_at(100.0, 0))
    assert window is None and len(kept) == 1  # one scrape: nothing to judge yet
    kept, window = recent_window(kept, scrape_at(100.0 + MIN_WINDOW_S / 2, 5))
    assert window is None  # too short a window to judge
    for t, n in ((105.0, 50), (110.0, 100)):
        kept, window = recent_window(kept, scrape_at(t, n))
    assert window is not None and window.start_s == 100.0 and window.end_s == 110.0
    assert only(window).verdict is BottleneckKind.QUEUE_BOUND and only(window).requests_per_s == 10.0
    kept, window = recent_window(kept, scrape_at(100.0 + RECENT_SPAN_S + 5, 200))
    assert window is not None and window.start_s == 105.0  # older than a minute: dropped
    assert [s.timestamp_s for s in kept] == [105.0, 110.0, 165.0]


def test_the_live_window_forgets_the_scrapes_of_another_server() -> None:
    kept, _ = recent_window((), scrape_at(0.0, 0, url="http://a:8002/metrics"))
    kept, window = recent_window(kept, scrape_at(5.0, 10, url="http://b:8002/metrics"))
    assert window is None and [s.url for s in kept] == ["http://b:8002/metrics"]


# -- floors: geadmin's own probes and the batcher's configured wait never name a bottleneck ---
def test_a_model_whose_only_traffic_is_geadmins_probes_is_light_not_queue_bound() -> None:
    """Issue 32: three idle models were 'queue-bound … add instances' at 0.3 requests/s, all of it
    geadmin's probes (a lone request waits in the batcher's queue by design)."""
    probes_only = window_of(queue_us=2_400_000, input_us=10_000, infer_us=50_000, output_us=10_000,
                            requests=3)
    (b,) = find_bottlenecks(probes_only, probe_rates={"m": 0.3})
    assert b.verdict is BottleneckKind.LIGHT and not b.has_traffic and b.fix == ""
    assert "0.00 req/s besides geadmin's probes (0.30/s): under the 1 req/s floor" in b.why
    assert with_traffic([b]) == ()
    # the same figures under load are still judged: the floor is a floor, not a mute
    (busy,) = find_bottlenecks(window_of(queue_us=80_000_000, input_us=10_000, infer_us=50_000,
                                         output_us=10_000,
                               requests=100), probe_rates={"m": 0.3})
    assert busy.verdict is BottleneckKind.QUEUE_BOUND


def test_queue_time_within_the_batchers_max_queue_delay_is_by_design_beyond_it_is_queue_bound() -> None:
    # 10 req/s, each queued 8 ms and computed 2 ms: queue-bound by the shares alone
    window = window_of(queue_us=800_000, input_us=10_000, infer_us=180_000, output_us=10_000)
    (waiting,) = find_bottlenecks(window, queue_delay_ms={"m": 10.0})  # the batcher may hold each for 10 ms
    assert waiting.verdict is not BottleneckKind.QUEUE_BOUND and waiting.queue_share == pytest.approx(0.0)
    assert "of it the batcher's max_queue_delay" in waiting.why
    # 7 of the 8 ms are waiting for an instance
    (beyond,) = find_bottlenecks(window, queue_delay_ms={"m": 1.0})
    assert beyond.verdict is BottleneckKind.QUEUE_BOUND and beyond.queue_share == pytest.approx(7 / 9)


# -- geadmin's tuning trials: left out by the caller's word (their markers), never by a name --
def test_a_production_model_named_like_a_trial_gets_a_verdict_and_only_a_named_trial_none() -> None:
    lookalike = "llama__tune_20240601"  # a date is 8 hex digits: a trial's shape, an operator's model
    busy = Counters(success=100, inferences=100, executions=100, request_us=1_000_000, queue_us=800_000,
                    compute_input_us=10_000, compute_infer_us=180_000, compute_output_us=10_000)
    window = derive(page({"m": Counters(), lookalike: Counters()}, timestamp_s=100.0),
                    page({"m": busy, lookalike: busy}, timestamp_s=110.0))
    assert {b.model for b in find_bottlenecks(window)} == {"m", lookalike}
    assert {b.model for b in find_bottlenecks(window, trials={lookalike})} == {"m"}
