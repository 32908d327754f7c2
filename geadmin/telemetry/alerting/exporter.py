"""geadmin's own Prometheus endpoint, served by the sampler (`geadmin up`, `geadmin sampler`
with `--metrics-port` / GEADMIN_SAMPLER_METRICS_PORT).

Everything is read from the workspace database at scrape time, so the page says what the
sampler last recorded and nothing it did not: probes (`geadmin.ops.probe`), model states
and since when (`geadmin.telemetry.history.watch`; a state not read again for STATE_FRESH_S is left
out, so a server that left stops firing), the NPU faults present and the instances each model
lost to them (`geadmin.telemetry.alerting.fault_metrics`), the sampler's last sample per source
(`geadmin.telemetry.history.store`), the objectives (`geadmin.telemetry.alerting.objectives`). Names are
prefixed `geadmin_`; Triton's own families are never re-exported or renamed. The alert
rules in deploy/prometheus/geadmin-alerts.yml read these and Triton's metrics. geadmin's own
tuning trials are left out: loading, refusing and unloading them is the tuner's work, never an
alert. The prober neither probes nor records them (`geadmin.ops.probe`, which can read a
trial's marker or see its tuning run); nothing is left out here by its name, which proves
nothing (`llama__tune_20240601` may be a production model, and must page like any other).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from threading import Thread
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from geadmin import __version__
from geadmin.errors import WorkspaceDatabaseError
from geadmin.telemetry.alerting import objectives
from geadmin.telemetry.alerting.fault_metrics import FAULT_FRESH_S, fault_families
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history import watch

PROBE_FRESH_S = 600.0  # a probe older than this is not exported (a stopped prober leaves nothing standing)
# A model state the sampler has not read again for this long is not exported: its server left
# the fleet (a pod killed while LOADING) or nothing watches it any more, so its alerts resolve.
STATE_FRESH_S = 600.0


class GeadminCollector(Collector):
    def __init__(self, home: Path | None, *, dashboard_url: str = "",
                 clock: Callable[[], float] = time.time, state_fresh_s: float = STATE_FRESH_S,
                 fault_fresh_s: float = FAULT_FRESH_S) -> None:
        self.home = home
        self.fault_fresh_s = fault_fresh_s
        self.dashboard_url = dashboard_url
        self.clock = clock
        self.state_fresh_s = state_fresh_s

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        info = InfoMetricFamily("geadmin", "geadmin's version and the dashboard alerts link to")
        info.add_metric([], {"version": __version__, "dashboard_url": self.dashboard_url})
        yield info
        scrape_ok = GaugeMetricFamily("geadmin_exporter_database_up",
                                      "1 when the workspace database could be read for this scrape")
        try:
            families = list(self._families(now))
        except WorkspaceDatabaseError:
            scrape_ok.add_metric([], 0.0)
            yield scrape_ok
            return
        scrape_ok.add_metric([], 1.0)
        yield scrape_ok
        yield from families

    def _families(self, now: float) -> Iterator[Metric]:
        yield from self._probe_families(now)
        yield from self._state_families(now)
        last = GaugeMetricFamily("geadmin_sampler_last_sample_timestamp_seconds",
                                 "When the sampler last recorded a sample (or a gap) of this Triton",
                                 labels=["source"])
        down = GaugeMetricFamily("geadmin_sampler_source_up",
                                 "1 when the sampler's latest sample of this Triton has data, 0 at a gap",
                                 labels=["source"])
        for overview in history.sources(home=self.home):
            if overview.last_at is not None:
                last.add_metric([overview.source], overview.last_at.timestamp())
                down.add_metric([overview.source], 0.0 if overview.down else 1.0)
        yield last
        yield down
        yield from self._objective_families()
        yield from self._own_traffic_families(now)
        yield from fault_families(self.home, now, self.fault_fresh_s)

    def _probe_families(self, now: float) -> Iterator[Metric]:
        success = GaugeMetricFamily("geadmin_probe_success",
                                    "1 when the latest synthetic request to a READY model was answered",
                                    labels=["server", "model"])
        latency = GaugeMetricFamily("geadmin_probe_latency_seconds", "Latency of the latest answered "
                                    "synthetic request", labels=["server", "model"])
        at = GaugeMetricFamily("geadmin_probe_timestamp_seconds", "When the latest synthetic request "
                               "was sent", labels=["server", "model"])
        for server in watch.probed_servers(home=self.home):
            latest = watch.latest_probes(server, newer_than_s=now - PROBE_FRESH_S,
                                         until_s=now + watch.FUTURE_SLACK_S, home=self.home)
            for model, probe in latest.items():
                success.add_metric([server, model], 1.0 if probe.ok else 0.0)
                at.add_metric([server, model], probe.at_s)
                if probe.ok and probe.latency_ms is not None:
                    latency.add_metric([server, model], probe.latency_ms / 1000.0)
        yield from (success, latency, at)

    def _state_families(self, now: float) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "geadmin_model_state", "1 for the state a model is in (READY, LOADING, UNLOADING, UNAVAILABLE, "
            "NOT_LOADED); operator_unload=\"true\" when an operator unloaded it on purpose",
            labels=["server", "model", "state", "operator_unload"])
        seconds = GaugeMetricFamily("geadmin_model_state_seconds", "How long the model has been in its state",
                                    labels=["server", "model", "state"])
        changed = GaugeMetricFamily("geadmin_model_state_change_timestamp_seconds",
                                    "When the model entered its current state", labels=["server", "model"])
        for record in watch.model_states(home=self.home, seen_after_s=now - self.state_fresh_s):
            state.add_metric([record.server, record.model, record.state,
                              "true" if record.operator_unload else "false"], 1.0)
            seconds.add_metric([record.server, record.model, record.state], record.for_s(now))
            changed.add_metric([record.server, record.model], record.since_s)
        yield from (state, seconds, changed)

    def _objective_families(self) -> Iterator[Metric]:
        p99 = GaugeMetricFamily("geadmin_objective_p99_seconds", "The model's p99 latency objective",
                                labels=["model"])
        budget = GaugeMetricFamily("geadmin_objective_error_budget_ratio",
                                   "The model's error budget: the fraction of requests that may fail",
                                   labels=["model"])
        for objective in objectives.objectives(home=self.home).values():
            if objective.p99_ms is not None:
                p99.add_metric([objective.model], objective.p99_ms / 1000.0)
            if objective.error_budget is not None:
                budget.add_metric([objective.model], objective.error_budget)
        yield from (p99, budget)


    def _own_traffic_families(self, now: float) -> Iterator[Metric]:
        """What the alert rules subtract so that geadmin's own work never fires them: its probe
        requests, and the queue time each model's batcher is configured to wait."""
        probes = GaugeMetricFamily("geadmin_probe_requests_per_second", "Synthetic requests per second "
                                   "geadmin's probes sent to the model over the last 5 minutes",
                                   labels=["server", "model"])
        for (server, model), rate in watch.all_probe_rates(now_s=now, home=self.home).items():
            probes.add_metric([server, model], rate)
        delay = GaugeMetricFamily("geadmin_model_max_queue_delay_seconds", "The model's dynamic batching "
                                  "max_queue_delay as served: queue time up to it is by design",
                                  labels=["server", "model"])
        for (server, model), seconds in watch.queue_delays(home=self.home).items():
            delay.add_metric([server, model], seconds)
        yield from (probes, delay)


class MetricsEndpoint:
    """geadmin's /metrics on `host:port`, in a daemon thread, until `stop`."""

    def __init__(self, home: Path | None, port: int, host: str = "127.0.0.1", *,
                 dashboard_url: str = "", state_fresh_s: float = STATE_FRESH_S) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(GeadminCollector(home, dashboard_url=dashboard_url,
                                                state_fresh_s=state_fresh_s))
        self.host, self.port = host, port
        self._server: Any = None
        self._thread: Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsEndpoint:
        self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
