"""Telemetry history from Prometheus: the same series the sampler's history gives, computed
with PromQL range queries when `GEADMIN_PROMETHEUS_URL` names a Prometheus that scrapes
Triton's /metrics (and, for NPUs, npu-exporter or npu_ge's metrics on Triton's page).

A source is one scrape target, named by its scrape URL (`http://host:8002/metrics`, as the
sampler names its source), found through `/api/v1/targets`; its `job` and `instance` labels
select its series. One range query per chart set: every value is one PromQL expression,
tagged with a `geadmin_value` label through `label_replace` and joined with `or`, so a page
refresh is one round trip per source, not one per line.

The rates follow geadmin.telemetry.derive (the same names and divisors) over a rate window
Grafana's way, `max(step + scrape interval, 4 x scrape interval)`; Prometheus's `rate`
handles counter resets, so a restart is never negative. A step where a series has no value
(Triton down, not scraped) becomes one None point, so plotly draws a gap, not a spike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import requests

from geadmin import outside
from geadmin.errors import PrometheusError
from geadmin.telemetry.history.promql import (
    FAILURES_BY_REASON,
    MIB,
    MODEL_QUERIES,
    NPU_PRESENCE,
    NPU_QUERIES,
    VALUE_LABEL,
    Grid,
    escape,
    fill,
    series_on_grid,
    tagged,
)
from geadmin.telemetry.history.store import MODEL_VALUES, NPU_VALUES, Overview, Series

TIMEOUT_S = 5.0
MAX_POINTS = 300  # per line: enough for a 24 h chart at ~5 min, cheap to draw
DEFAULT_SCRAPE_S = 15.0  # Prometheus's default, when the target does not say
MODELS_LOOKBACK = "1d"  # a model is listed when it had a sample in this long
UNSET_HINT = "unset GEADMIN_PROMETHEUS_URL to chart the sampler's history"
MAX_ANSWER_BYTES = 64 * MIB  # a range query: MAX_POINTS per line, a few thousand lines


@dataclass(frozen=True)
class ScrapeTarget:
    """One active scrape target: what geadmin calls a source."""

    scrape_url: str
    job: str
    instance: str
    health: str
    last_error: str
    last_scrape: datetime | None
    interval_s: float
    labels: Mapping[str, str] = field(default_factory=dict)  # every target label (pod, node, ...)
    match: str = ""  # more label matchers, e.g. 'model="resnet50"'

    @property
    def selector(self) -> str:
        """Its series; a fleet's target (no instance) selects every server of its job."""
        instance = f', instance="{escape(self.instance)}"' if self.instance else ""
        return f'job="{escape(self.job)}"{instance}' + (f", {self.match}" if self.match else "")


class PrometheusHistory:
    """The reads geadmin.telemetry.history.store offers, answered by a Prometheus server."""

    def __init__(self, url: str, *, session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = session or requests.Session()

    @property
    def label(self) -> str:
        return f"Prometheus at {self.url}"

    # -- the history interface ---------------------------------------------------------------
    def sources(self) -> list[Overview]:
        """Every target that publishes Triton's model counters, the most recently scraped first."""
        targets = {(t.job, t.instance): t for t in self.targets()}
        models: dict[tuple[str, str], set[str]] = {}
        for labels, _ in self.instant(f"group by (job, instance, model) "
                                       f"(last_over_time(nv_inference_count[{MODELS_LOOKBACK}]))"):
            models.setdefault((labels.get("job", ""), labels.get("instance", "")), set()).add(labels["model"])
        found = []
        for key, names in models.items():
            target = targets.get(key)
            if target is None:  # no longer scraped: its history stays, named by its instance
                target = ScrapeTarget(f"http://{key[1]}/metrics", *key, "gone", "", None, DEFAULT_SCRAPE_S)
            down = f"Prometheus reports the target down: {target.last_error or 'no reason given'}" \
                if target.health == "down" else ""
            found.append(Overview(target.scrape_url, None, target.last_scrape, tuple(sorted(names)), down))
        epoch = datetime.fromtimestamp(0, timezone.utc)
        servers = sorted(found, key=lambda o: o.last_at or epoch, reverse=True)
        return fleet_overviews(list(targets.values()), models) + servers

    def model_series(self, source: str, since: datetime, until: datetime | None = None,
                     models: Sequence[str] | None = None) -> list[Series]:
        target = self.target(source)
        grid = self.grid(since, until, target.interval_s)
        values = self.range_query(tagged(MODEL_QUERIES, target.selector, grid), grid)
        reasons = self.range_query(fill(FAILURES_BY_REASON, target.selector, grid), grid)
        by_key: dict[tuple[str, str], dict[str, dict[float, float]]] = {}
        for labels, points in values:
            key = (labels.get("model", ""), labels.get("version", ""))
            if models is None or key[0] in models:
                by_key.setdefault(key, {})[labels[VALUE_LABEL]] = points
        failures: dict[tuple[str, str], dict[float, dict[str, float]]] = {}
        for labels, points in reasons:
            per_step = failures.setdefault((labels.get("model", ""), labels.get("version", "")), {})
            for at, count in points.items():
                if count > 0:
                    per_step.setdefault(at, {})[labels.get("reason", "")] = count
        versions: dict[str, int] = {}
        for model, _ in by_key:
            versions[model] = versions.get(model, 0) + 1
        return [series_on_grid(model if versions[model] == 1 else f"{model} v{version}", columns,
                               MODEL_VALUES, grid, failures.get((model, version), {}))
                for (model, version), columns in sorted(by_key.items())]

    def npu_sources(self) -> list[str]:
        present = {(m.get("job", ""), m.get("instance", "")) for m, _ in self.instant(NPU_PRESENCE)}
        return [t.scrape_url for t in self.targets() if (t.job, t.instance) in present]

    def npu_series(self, source: str, since: datetime, until: datetime | None = None) -> list[Series]:
        target = self.target(source)
        grid = self.grid(since, until, target.interval_s)
        by_device: dict[str, dict[str, dict[float, float]]] = {}
        for labels, points in self.range_query(tagged(NPU_QUERIES, target.selector, grid), grid):
            by_device.setdefault(labels.get("device", ""), {})[labels[VALUE_LABEL]] = points
        return [series_on_grid(f"NPU {device}", columns, NPU_VALUES, grid)
                for device, columns in sorted(by_device.items(), key=lambda kv: _device_order(kv[0]))]

    # -- Prometheus's HTTP API ---------------------------------------------------------------
    def targets(self) -> list[ScrapeTarget]:
        data = self._get("/api/v1/targets", {"state": "active"})
        found = []
        for t in data.get("activeTargets", []):
            labels = t.get("labels", {})
            found.append(ScrapeTarget(t.get("scrapeUrl", ""), labels.get("job", ""),
                                      labels.get("instance", ""), t.get("health", "unknown"),
                                      t.get("lastError", ""), _parse_time(t.get("lastScrape")),
                                      parse_duration(t.get("scrapeInterval")) or DEFAULT_SCRAPE_S,
                                      {str(k): str(v) for k, v in labels.items()}))
        return found

    def target(self, source: str) -> ScrapeTarget:
        """The scrape target named `source`; one Prometheus no longer scrapes but whose series
        it still holds (sources() lists those too) is found by its instance label; `fleet:JOB`
        is every server of the job at once."""
        job = fleet_job(source)
        if job is not None:
            return fleet_target(job, self.targets(), self.label)
        for target in self.targets():
            if target.scrape_url == source:
                return target
        for target in self._retired():
            if target.scrape_url == source:
                return target
        raise PrometheusError(f"{self.label} does not scrape {source}: add it to a scrape job, "
                              f"or {UNSET_HINT}")

    def _retired(self) -> list[ScrapeTarget]:
        return [ScrapeTarget(f"http://{m.get('instance', '')}/metrics", m.get("job", ""),
                             m.get("instance", ""), "gone", "", None, DEFAULT_SCRAPE_S)
                for m, _ in self.instant(f"group by (job, instance) "
                                          f"(last_over_time(nv_inference_count[{MODELS_LOOKBACK}]))")]

    def grid(self, since: datetime, until: datetime | None, scrape_s: float) -> Grid:
        end = (until or datetime.now(timezone.utc)).timestamp()
        start = since.timestamp()
        step = max(scrape_s, math.ceil((end - start) / MAX_POINTS))
        start = math.floor(start / step) * step  # aligned: the same steps on every refresh
        return Grid(start, end, step, f"{int(max(step + scrape_s, 4 * scrape_s))}s")

    def instant(self, query: str) -> list[tuple[dict[str, str], float]]:
        data = self._get("/api/v1/query", {"query": query})
        return [(r["metric"], float(r["value"][1])) for r in data.get("result", [])]

    def range_query(self, query: str, grid: Grid) -> list[tuple[dict[str, str], dict[float, float]]]:
        data = self._get("/api/v1/query_range",
                         {"query": query, "start": grid.start, "end": grid.end, "step": grid.step})
        return [(r["metric"], {float(at): float(v) for at, v in r.get("values", [])})
                for r in data.get("result", [])]

    def _get(self, path: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One API call, its answer read with the size and nesting bounds of geadmin.outside."""
        status, what = 0, f"the answer of {self.label} to {path}"
        try:
            with self._http.get(self.url + path, params=params, timeout=TIMEOUT_S, stream=True) as response:
                status = response.status_code
                raw = outside.read_limited(response.iter_content(65536), what=what, error=PrometheusError,
                                           max_bytes=MAX_ANSWER_BYTES)
            body = outside.loads(raw, what=what, error=PrometheusError, max_bytes=MAX_ANSWER_BYTES)
        except requests.Timeout as exc:
            raise PrometheusError(f"{self.label} did not answer within {TIMEOUT_S:g} s: check that it "
                                  f"runs, or {UNSET_HINT}") from exc
        except requests.RequestException as exc:
            raise PrometheusError(f"{self.label} is unreachable ({type(exc).__name__}): check the URL, "
                                  f"or {UNSET_HINT}") from exc
        except ValueError:  # not JSON (requests' own ValueErrors are RequestExceptions, caught above)
            body = None
        if not isinstance(body, dict) or "status" not in body:  # not Prometheus's API answering
            raise PrometheusError(f"{self.label} answered HTTP {status} to {path}, not as "
                                  "Prometheus's API does: is GEADMIN_PROMETHEUS_URL its base URL "
                                  "(http://host:9090)?")
        if body["status"] != "success":
            raise PrometheusError(f"{self.label} refused the query ({body.get('errorType', 'error')}): "
                                  f"{body.get('error', 'no reason given')}")
        data: dict[str, Any] = body.get("data", {})
        return data


FLEET_PREFIX = "fleet:"  # `fleet:JOB`: every Triton target of a scrape job, read as one source


def fleet_job(source: str) -> str | None:
    return source.removeprefix(FLEET_PREFIX) if source.startswith(FLEET_PREFIX) else None


def fleet_overviews(targets: Sequence[ScrapeTarget],
                    models: Mapping[tuple[str, str], set[str]]) -> list[Overview]:
    """One source per job with two or more servers publishing model counters: rates summed over
    the servers, averages weighted by their requests, quantiles the worst server's."""
    by_job: dict[str, list[tuple[str, str]]] = {}
    for key in models:
        by_job.setdefault(key[0], []).append(key)
    found = []
    for job, keys in sorted(by_job.items()):
        servers = [t for t in targets if t.job == job]
        if len(keys) < 2:
            continue
        scraped = [t.last_scrape for t in servers if t.last_scrape is not None]
        down = "" if any(t.health == "up" for t in servers) else \
            f"Prometheus reports every server of job {job!r} down"
        found.append(Overview(FLEET_PREFIX + job, None, max(scraped, default=None),
                              tuple(sorted(set().union(*(models[k] for k in keys)))), down))
    return found


def fleet_target(job: str, targets: Sequence[ScrapeTarget], label: str) -> ScrapeTarget:
    servers = [t for t in targets if t.job == job]
    if not servers:
        raise PrometheusError(f"{label} scrapes no target in job {job!r}: the fleet's servers are gone "
                              f"from its scrape configuration, or {UNSET_HINT}")
    health = "up" if any(t.health == "up" for t in servers) else "down"
    return ScrapeTarget(FLEET_PREFIX + job, job, "", health, "",
                        max((t.last_scrape for t in servers if t.last_scrape), default=None),
                        max(t.interval_s for t in servers))


def _device_order(device: str) -> tuple[int, str]:
    return (int(device), "") if device.isdigit() else (1 << 30, device)


def parse_duration(text: str | None) -> float | None:
    """Prometheus durations as the targets API writes them: "15s", "1m", "1m30s", "500ms"."""
    if not text:
        return None
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        if text[i].isdigit() or text[i] == ".":
            number += text[i]
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else text[i]
        if unit not in units or not number:
            return None
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    return total if not number and total > 0 else None


def _parse_time(text: str | None) -> datetime | None:
    if not text or text.startswith("0001-"):  # Go's zero time: never scraped
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
