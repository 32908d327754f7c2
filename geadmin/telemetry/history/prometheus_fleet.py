"""A fleet in Prometheus: the servers of one scrape job side by side, joined to their nodes'
NPUs, and triaged as one.

A history source `fleet:JOB` (geadmin.telemetry.history.prometheus lists one per job with two or more
Triton servers) charts the whole job as one server: rates summed, averages weighted by each
server's requests, quantiles the worst server's. What this module adds over it:

- `server_series`: one model on each server of a fleet, named by pod (else instance), so the
  replica that stands out is a line of its own;
- `node_map`: each node's NPU sources (npu-exporter, or npu_ge's families on a Triton's own
  page) with the Triton servers on that node and the models they serve, joined on the targets'
  node label (Kubernetes service discovery's `node` / `kubernetes_node`, or a static label);
- `fleet_bottlenecks`: the triage card's verdicts over the fleet's last minute (`minute_window`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

from geadmin.errors import PrometheusError
from geadmin.telemetry.bottleneck import Bottleneck, assess, with_traffic
from geadmin.telemetry.derive import ModelWindow, Quantiles
from geadmin.telemetry.history.prometheus import PrometheusHistory, ScrapeTarget, fleet_job
from geadmin.telemetry.history.promql import (
    MODEL_QUERIES,
    NPU_PRESENCE,
    VALUE_LABEL,
    escape,
    series_on_grid,
    tagged,
)
from geadmin.telemetry.history.store import MODEL_VALUES, RATE_VALUES, Series

# Our label -> the target labels that carry it, first found wins (Kubernetes SD relabelled
# the usual ways, or static labels).
NAMESPACE_LABELS = ("namespace", "kubernetes_namespace")
POD_LABELS = ("pod", "kubernetes_pod_name", "pod_name")
NODE_LABELS = ("node", "kubernetes_node", "nodename", "node_name", "host")
PER_SERVER_QUERIES = {name: q.replace("by (model, version)", "by (model, version, instance)")
                      for name, q in MODEL_QUERIES.items()}
MAP_LOOKBACK = "5m"  # a server serves a model when Triton published its counters this recently
TRIAGE_MINUTES = 1.0


@dataclass(frozen=True)
class NodeRow:
    """One node: the NPU sources scraped there, the Triton servers on it and what they serve."""

    node: str
    npu_sources: tuple[str, ...]
    servers: tuple[str, ...]
    models: tuple[str, ...]


def first_label(labels: Mapping[str, str], names: Sequence[str]) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def server_name(target: ScrapeTarget) -> str:
    return first_label(target.labels, POD_LABELS) or target.instance


def node_of(target: ScrapeTarget) -> str:
    return first_label(target.labels, NODE_LABELS) or urlsplit(target.scrape_url).hostname or target.instance


def server_series(history: PrometheusHistory, source: str, model: str, since: datetime,
                  until: datetime | None = None) -> list[Series]:
    """`model` on each server of the fleet source, one Series per server (and version, where the
    servers serve more than one), named by pod, else instance."""
    job = fleet_job(source)
    if job is None:
        raise PrometheusError(f"{source} is one server, not a fleet: per-server lines need a "
                              "fleet:JOB source")
    fleet = replace(history.target(source), match=f'model="{escape(model)}"')
    names = {t.instance: server_name(t) for t in history.targets() if t.job == job}
    grid = history.grid(since, until, fleet.interval_s)
    by_key: dict[tuple[str, str], dict[str, dict[float, float]]] = {}
    for labels, points in history.range_query(tagged(PER_SERVER_QUERIES, fleet.selector, grid), grid):
        key = (labels.get("instance", ""), labels.get("version", ""))
        by_key.setdefault(key, {})[labels[VALUE_LABEL]] = points
    versions = {version for _, version in by_key}

    def name(instance: str, version: str) -> str:
        return names.get(instance, instance) + (f" v{version}" if len(versions) > 1 else "")

    lines = (series_on_grid(name(*key), columns, MODEL_VALUES, grid) for key, columns in by_key.items())
    return sorted(lines, key=lambda s: s.name)


def node_map(history: PrometheusHistory) -> list[NodeRow]:
    """Every node with an NPU source or a Triton server, by node name. A node whose NPUs no
    target reports has no NPU sources; Triton's own page with npu_ge's families counts as one."""
    targets = {(t.job, t.instance): t for t in history.targets()}
    npu = {(m.get("job", ""), m.get("instance", "")) for m, _ in history.instant(NPU_PRESENCE)}
    served: dict[tuple[str, str], set[str]] = {}
    for labels, _ in history.instant(f"group by (job, instance, model) "
                                     f"(last_over_time(nv_inference_count[{MAP_LOOKBACK}]))"):
        served.setdefault((labels.get("job", ""), labels.get("instance", "")), set()).add(labels["model"])
    rows: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for key, target in targets.items():
        if key not in npu and key not in served:
            continue
        sources, servers, models = rows.setdefault(node_of(target), (set(), set(), set()))
        if key in npu:
            sources.add(target.scrape_url)
        if key in served:
            servers.add(server_name(target))
            models.update(served[key])
    return [NodeRow(node, tuple(sorted(s)), tuple(sorted(v)), tuple(sorted(m)))
            for node, (s, v, m) in sorted(rows.items())]


def fleet_bottlenecks(history: PrometheusHistory, source: str,
                      now: datetime | None = None) -> tuple[Bottleneck, ...]:
    """Each busy model's verdict over the source's last minute. Without NPU figures per model,
    infer-dominated is compute-bound; ensembles are triaged as their own stages (the fleet view
    has no members)."""
    until = now or datetime.now(timezone.utc)
    since = until - timedelta(minutes=TRIAGE_MINUTES)
    series = history.model_series(source, since - timedelta(minutes=1), until)
    return with_traffic(assess(window) for s in series if (window := minute_window(s, since)) is not None)


QUANTILE_VALUES = ("p50_ms", "p90_ms", "p99_ms")


def minute_window(s: Series, since: datetime, window_s: float = 60 * TRIAGE_MINUTES) -> ModelWindow | None:
    """The points from `since` on as one window the bottleneck rules read: rates averaged,
    per-request averages weighted by each point's requests, quantiles the worst; None when no
    point has figures (a gap, or nothing scraped)."""
    rows = [{name: s.column(name)[i] for name in MODEL_VALUES} for i, at in enumerate(s.times)
            if at >= since and s.column("requests_per_s")[i] is not None]
    if not rows:
        return None

    def known(name: str) -> list[float]:
        return [v for r in rows if (v := r[name]) is not None]

    def mean(name: str) -> float | None:
        values = known(name)
        return sum(values) / len(values) if values else None

    def weighted(name: str) -> float | None:
        pairs = [(v, r["requests_per_s"] or 0.0) for r in rows if (v := r[name]) is not None]
        total = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total if total > 0 else None

    def worst(name: str) -> float | None:
        return max(known(name), default=None)

    rates = {name: mean(name) for name in RATE_VALUES}
    model, sep, version = s.name.rpartition(" v")  # history names a second version "model v2"
    if not sep or not version.isdigit():
        model, version = s.name, ""
    return ModelWindow(
        model=model, version=version, window_s=window_s, successes_per_s=None, **rates,
        avg_batch_size=weighted("avg_batch_size"), avg_request_ms=weighted("avg_request_ms"),
        avg_queue_ms=weighted("avg_queue_ms"), avg_compute_input_ms=weighted("avg_compute_input_ms"),
        avg_compute_infer_ms=weighted("avg_compute_infer_ms"),
        avg_compute_output_ms=weighted("avg_compute_output_ms"),
        quantiles=(("request", Quantiles(*(worst(name) for name in QUANTILE_VALUES))),),
        failures_by_reason=(), pending_requests=next(reversed(known("pending_requests")), None),
        counters_reset=False, first_seen=False)
