"""The PromQL geadmin asks a Prometheus, and how the answers land on a chart's grid.

Every value of the sampler's history (history.store's MODEL_VALUES and NPU_VALUES) is one
expression here, over Triton's families and npu_ge's or npu-exporter's; `{S` stands for a
scrape target's selector, `[W]` for the rate window and `[STEP]` for the step (`fill`).
`tagged` joins a chart set into one expression, each result labelled with its name, so a
refresh is one round trip; `series_on_grid` turns the answer into a Series whose empty steps
are gaps, never spikes. The client that sends them: geadmin.telemetry.history.prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from geadmin.telemetry.history.store import Series

VALUE_LABEL = "geadmin_value"
MIB = 1024 * 1024

REQUESTS = "(sum by (model, version) (rate(nv_inference_request_success{S}[W])) + " \
           "sum by (model, version) (rate(nv_inference_request_failure{S}[W])))"
SUCCESSES = "sum by (model, version) (rate(nv_inference_request_success{S}[W]))"


def _per_success(stage: str) -> str:
    return f"sum by (model, version) (rate(nv_inference_{stage}_duration_us{{S}}[W])) / {SUCCESSES} / 1000"


def _quantile(q: str) -> str:
    return f'max by (model, version) (nv_inference_request_summary_us{{S, quantile="{q}"}}) / 1000'


def _by_device(vector: str) -> str:
    """npu-exporter's chips are labelled `id`; npu_ge's devices `device`."""
    return f'label_replace({vector}, "device", "$1", "id", "(.+)")'


# history.MODEL_VALUES -> PromQL; {S} is the target's selector, [W] the rate window.
MODEL_QUERIES: dict[str, str] = {
    "inferences_per_s": "sum by (model, version) (rate(nv_inference_count{S}[W]))",
    "requests_per_s": REQUESTS,
    "failures_per_s": "sum by (model, version) (rate(nv_inference_request_failure{S}[W]))",
    "executions_per_s": "sum by (model, version) (rate(nv_inference_exec_count{S}[W]))",
    "avg_batch_size": "sum by (model, version) (rate(nv_inference_count{S}[W])) / "
                      "sum by (model, version) (rate(nv_inference_exec_count{S}[W]))",
    "avg_request_ms": _per_success("request"),
    "avg_queue_ms": _per_success("queue"),
    "avg_compute_input_ms": _per_success("compute_input"),
    "avg_compute_infer_ms": _per_success("compute_infer"),
    "avg_compute_output_ms": _per_success("compute_output"),
    "p50_ms": _quantile("0.5"),
    "p90_ms": _quantile("0.9"),
    "p99_ms": _quantile("0.99"),
    "pending_requests": "sum by (model, version) (nv_inference_pending_request_count{S})",
}
# Failed requests per step and reason (history keeps counts per window, not rates).
FAILURES_BY_REASON = "sum by (model, version, reason) (increase(nv_inference_request_failure{S}[STEP]))"
# history.NPU_VALUES -> PromQL over npu_ge's families (by device) or npu-exporter's (by id).
NPU_QUERIES: dict[str, str] = {
    "aicore_util_pct": f"max by (device) (npu_ge_device_utilization{{S}} or "
                       f"{_by_device('npu_chip_info_utilization{S}')})",
    "hbm_used_bytes": f"max by (device) (npu_ge_hbm_used_bytes{{S}} or "
                      f"{_by_device(f'npu_chip_info_hbm_used_memory{{S}} * {MIB}')})",
    "hbm_total_bytes": f"max by (device) (npu_ge_hbm_total_bytes{{S}} or "
                       f"{_by_device(f'npu_chip_info_hbm_total_memory{{S}} * {MIB}')})",
    "temperature_c": f"max by (device) ({_by_device('npu_chip_info_temperature{S}')})",
    "power_w": f"max by (device) ({_by_device('npu_chip_info_power{S}')})",
}
NPU_PRESENCE = "group by (job, instance) (last_over_time(npu_ge_device_utilization[5m]) or " \
               "last_over_time(npu_chip_info_utilization[5m]))"

@dataclass(frozen=True)
class Grid:
    """The steps of one range query: `start`, `start + step`, ... up to `end` (epoch seconds)."""

    start: float
    end: float
    step: float
    window: str  # the rate window, e.g. "60s"

    def steps(self) -> list[float]:
        count = int((self.end - self.start) // self.step) + 1
        return [self.start + i * self.step for i in range(count)]


def fill(template: str, selector: str, grid: Grid) -> str:
    """`selector` (a target's label matchers) for `{S` (as in `{S}` and `{S, quantile="0.5"}`),
    the windows for `[W]` and `[STEP]`."""
    return template.replace("{S", "{" + selector).replace("[W]", f"[{grid.window}]") \
        .replace("[STEP]", f"[{int(grid.step)}s]")


def tagged(queries: Mapping[str, str], selector: str, grid: Grid) -> str:
    """One expression for all `queries`: each result tagged with its name in `geadmin_value`."""
    return " or ".join(f'label_replace({fill(q, selector, grid)}, "{VALUE_LABEL}", "{name}", "", "")'
                       for name, q in queries.items())


def series_on_grid(name: str, columns: Mapping[str, Mapping[float, float]], names: Sequence[str], grid: Grid,
                   failures: Mapping[float, Mapping[str, float]] | None = None) -> Series:
    """Points on the grid's steps where any column has a value; a run of empty steps between
    two points becomes one None point (a gap)."""
    times: list[float] = []
    values: dict[str, list[float | None]] = {n: [] for n in names}
    by_reason: list[Mapping[str, float]] = []
    spans: list[float] = []
    drawn = False
    pending_gap: float | None = None
    for at in grid.steps():
        row = {n: _finite(columns.get(n, {}).get(at)) for n in names}
        if all(v is None for v in row.values()):
            if drawn and pending_gap is None:
                pending_gap = at
            continue
        if pending_gap is not None:
            times.append(pending_gap)
            for n in names:
                values[n].append(None)
            by_reason.append({})
            spans.append(0.0)
            pending_gap = None
        times.append(at)
        for n in names:
            values[n].append(row[n])
        by_reason.append(dict((failures or {}).get(at, {})))
        spans.append(grid.step)
        drawn = True
    return Series(name, tuple(datetime.fromtimestamp(t, timezone.utc) for t in times),
                  {n: tuple(v) for n, v in values.items()}, tuple(by_reason) if failures is not None else (),
                  tuple(spans))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
