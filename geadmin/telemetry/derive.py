"""Rates and latencies per model and version from two scrapes of Triton's /metrics.

Triton publishes cumulative counters (FACTS.md): requests, inferences, executions and the
time spent in each stage, in microseconds. Over the window between two scrapes:

- `inferences_per_s` = Δnv_inference_count / window; `requests_per_s` = Δ(success + failure)
  / window; `executions_per_s` = Δnv_inference_exec_count / window;
- `avg_batch_size` = Δinferences / Δexecutions (None without executions);
- `avg_<stage>_ms` = Δnv_inference_<stage>_duration_us / Δsuccess / 1000. Triton adds a
  request's durations when it succeeds (failed requests add none), once per request — in a
  batch each request carries the batch's compute time. Compute stages exclude response-cache
  hits, so their divisor is Δsuccess − Δnv_cache_num_hits_per_model when the cache reports;
- `quantiles` (p50/p90/p99, ms) come from `nv_inference_<stage>_summary_us{quantile=...}`
  when Triton runs with `--metrics-config summary_latencies=true`; they are Triton's own
  sliding-window summaries, read from the later scrape;
- `failures_by_reason`: failed requests in the window, per `reason` label.

A counter that went down between the scrapes was reset (Triton restarted, the model was
unloaded and loaded again): the whole model's window is then counted from the new values
alone, so every rate stays consistent with its divisor and none is ever negative or a
spike. A model only in the later scrape is counted the same way (its counters started at
zero inside the window); one only in the earlier scrape is listed in `Window.gone`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from geadmin.errors import TelemetryError
from geadmin.telemetry.sources.scrape import Labels, Scrape

STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
COMPUTE_STAGES = frozenset(("compute_input", "compute_infer", "compute_output"))
QUANTILES = (("p50_ms", "0.5"), ("p90_ms", "0.9"), ("p99_ms", "0.99"))

SUCCESS = "nv_inference_request_success"
FAILURE = "nv_inference_request_failure"
INFERENCES = "nv_inference_count"
EXECUTIONS = "nv_inference_exec_count"
CACHE_HITS = "nv_cache_num_hits_per_model"
PENDING = "nv_inference_pending_request_count"
COUNTERS = (SUCCESS, FAILURE, INFERENCES, EXECUTIONS, CACHE_HITS,
            *(f"nv_inference_{stage}_duration_us" for stage in STAGES))
US_PER_MS = 1000.0

ModelKey = tuple[str, str]  # (model, version)
SeriesKey = tuple[str, Labels]  # (counter name, labels other than model and version)


@dataclass(frozen=True)
class Quantiles:
    """Latency quantiles of one stage, in milliseconds (None: Triton reports none / NaN)."""

    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class ModelWindow:
    """One model version over the window. Rates are None when Triton does not publish the
    counter; averages are None when nothing happened to average over."""

    model: str
    version: str
    window_s: float
    inferences_per_s: float | None
    requests_per_s: float | None
    successes_per_s: float | None
    failures_per_s: float | None
    executions_per_s: float | None
    avg_batch_size: float | None
    avg_request_ms: float | None
    avg_queue_ms: float | None
    avg_compute_input_ms: float | None
    avg_compute_infer_ms: float | None
    avg_compute_output_ms: float | None
    quantiles: tuple[tuple[str, Quantiles], ...]  # (stage, quantiles) for the stages reported
    failures_by_reason: tuple[tuple[str, float], ...]  # failed requests in the window
    pending_requests: float | None
    counters_reset: bool  # a counter went down: counted from the new values alone
    first_seen: bool  # not in the earlier scrape: counted from zero

    def quantiles_for(self, stage: str) -> Quantiles | None:
        return dict(self.quantiles).get(stage)

    def avg_ms(self, stage: str) -> float | None:
        value: float | None = getattr(self, f"avg_{stage}_ms")
        return value


@dataclass(frozen=True)
class ServerStats:
    """Triton's host gauges, from the later scrape."""

    cpu_utilization_pct: float | None
    cpu_memory_used_bytes: int | None
    cpu_memory_total_bytes: int | None
    pinned_memory_used_bytes: int | None
    pinned_memory_total_bytes: int | None


@dataclass(frozen=True)
class Window:
    start_s: float
    end_s: float
    models: tuple[ModelWindow, ...]
    server: ServerStats
    gone: tuple[ModelKey, ...] = ()  # in the earlier scrape only (unloaded, or Triton restarted)

    @property
    def window_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def reset(self) -> bool:
        return any(m.counters_reset for m in self.models)

    def model(self, name: str, version: str | None = None) -> ModelWindow | None:
        for entry in self.models:
            if entry.model == name and (version is None or entry.version == version):
                return entry
        return None


def derive(before: Scrape, after: Scrape) -> Window:
    """Everything the window between two scrapes of one Triton says, per model version."""
    window_s = after.timestamp_s - before.timestamp_s
    if not (window_s > 0 and math.isfinite(window_s)):
        raise TelemetryError(f"the scrapes are not in time order (window {window_s:.3f} s): pass the "
                             "earlier one first", url=after.url)
    old, new = _by_model(before), _by_model(after)
    models = tuple(_model_window(key, old.get(key), new[key], window_s) for key in sorted(new))
    gone = tuple(sorted(set(old) - set(new)))
    return Window(before.timestamp_s, after.timestamp_s, models, server_stats(after), gone)


def since_start(scrape: Scrape) -> tuple[ModelWindow, ...]:
    """Each model version's figures since its counters started (one scrape, no window): the
    averages, failures and quantiles are meaningful; every `*_per_s` is a total count."""
    return tuple(_model_window(key, None, series, 1.0) for key, series in sorted(_by_model(scrape).items()))


def server_stats(scrape: Scrape) -> ServerStats:
    """Host CPU and memory. Until Triton first polls the host (its metrics interval, 2 s by
    default, after start) every CPU gauge reads 0: a total of 0 bytes means "not yet", so all
    three are None then."""
    cpu = scrape.value("nv_cpu_utilization")
    total = _int(scrape.value("nv_cpu_memory_total_bytes"))
    polled = total is not None and total > 0
    return ServerStats(
        cpu_utilization_pct=None if cpu is None or not polled else cpu * 100.0,
        cpu_memory_used_bytes=_int(scrape.value("nv_cpu_memory_used_bytes")) if polled else None,
        cpu_memory_total_bytes=total if polled else None,
        pinned_memory_used_bytes=_int(scrape.value("nv_pinned_memory_pool_used_bytes")),
        pinned_memory_total_bytes=_int(scrape.value("nv_pinned_memory_pool_total_bytes")),
    )


# -- per model -------------------------------------------------------------------------
@dataclass
class _Series:
    """What one scrape says about one model version."""

    counters: dict[SeriesKey, float] = field(default_factory=dict)
    pending: float | None = None
    quantiles_us: dict[str, dict[str, float]] = field(default_factory=dict)  # stage -> {quantile: us}


_KIND: dict[str, tuple[str, str]] = {  # sample name (either counter spelling) -> (kind, name or stage)
    **{c: ("counter", c) for c in COUNTERS}, **{c + "_total": ("counter", c) for c in COUNTERS},
    PENDING: ("pending", PENDING),
    **{f"nv_inference_{stage}_summary_us": ("summary", stage) for stage in STAGES},
}


def _by_model(scrape: Scrape) -> dict[ModelKey, _Series]:
    """One pass over the page: every model version's counters, pending gauge and quantiles."""
    found: dict[ModelKey, _Series] = {}
    for sample in scrape.samples:
        kind = _KIND.get(sample.name)
        if kind is None:
            continue
        model, version, rest = None, "", []
        for key, value in sample.labels:
            if key == "model":
                model = value
            elif key == "version":
                version = value
            else:
                rest.append((key, value))
        if model is None:
            continue
        series = found.setdefault((model, version), _Series())
        what, name = kind
        if math.isnan(sample.value):
            continue
        if what == "counter":
            series.counters[(name, tuple(rest))] = max(0.0, sample.value)
        elif what == "pending":
            series.pending = sample.value
        elif (quantile := dict(rest).get("quantile")) is not None:
            series.quantiles_us.setdefault(name, {})[quantile] = sample.value
    return found


def _model_window(key: ModelKey, old: _Series | None, now: _Series, window_s: float) -> ModelWindow:
    new = now.counters
    reset = old is not None and any(new[k] < old.counters[k] for k in new if k in old.counters)
    fresh = old is None
    base = old.counters if old is not None and not reset else {}
    delta: dict[str, float] = {}
    for (name, labels), value in new.items():
        delta[name] = delta.get(name, 0.0) + value - base.get((name, labels), 0.0)

    def rate(name: str, plus: float = 0.0) -> float | None:
        return None if name not in delta else (delta[name] + plus) / window_s

    success = delta.get(SUCCESS, 0.0)
    compute_divisor = success - delta.get(CACHE_HITS, 0.0)
    averages = {stage: _ratio(delta.get(f"nv_inference_{stage}_duration_us"),
                              compute_divisor if stage in COMPUTE_STAGES else success, US_PER_MS)
                for stage in STAGES}
    model, version = key
    return ModelWindow(
        model=model, version=version, window_s=window_s,
        inferences_per_s=rate(INFERENCES),
        requests_per_s=rate(SUCCESS, plus=delta.get(FAILURE, 0.0)),
        successes_per_s=rate(SUCCESS), failures_per_s=rate(FAILURE),
        executions_per_s=rate(EXECUTIONS),
        avg_batch_size=_ratio(delta.get(INFERENCES), delta.get(EXECUTIONS, 0.0)),
        avg_request_ms=averages["request"], avg_queue_ms=averages["queue"],
        avg_compute_input_ms=averages["compute_input"], avg_compute_infer_ms=averages["compute_infer"],
        avg_compute_output_ms=averages["compute_output"],
        quantiles=tuple(_quantiles(now)),
        failures_by_reason=_failures(new, base),
        pending_requests=now.pending,
        counters_reset=reset, first_seen=fresh,
    )


def _failures(new: dict[SeriesKey, float], base: dict[SeriesKey, float]) -> tuple[tuple[str, float], ...]:
    by_reason: dict[str, float] = {}
    for (name, labels), value in new.items():
        if name == FAILURE:
            reason = dict(labels).get("reason", "")
            by_reason[reason] = by_reason.get(reason, 0.0) + value - base.get((name, labels), 0.0)
    return tuple(sorted(by_reason.items()))


def _quantiles(series: _Series) -> Iterable[tuple[str, Quantiles]]:
    for stage in STAGES:
        by_q = series.quantiles_us.get(stage)
        if by_q:
            yield stage, Quantiles(**{field: _scaled(by_q.get(q)) for field, q in QUANTILES})


def _ratio(numerator: float | None, count: float, scale: float = 1.0) -> float | None:
    """numerator per counted event; None without events (Triton's counts are whole numbers:
    less than one is none)."""
    if numerator is None or count < 1:
        return None
    value = numerator / count / scale
    return value if math.isfinite(value) else None


def _scaled(value_us: float | None) -> float | None:
    return None if value_us is None or not math.isfinite(value_us) else value_us / US_PER_MS


def _int(value: float | None) -> int | None:
    return None if value is None or not math.isfinite(value) else int(value)
