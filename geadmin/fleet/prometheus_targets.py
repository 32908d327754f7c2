"""`prometheus:URL?job=JOB[&http_port=8000&grpc_port=8001]`: the active targets of a
Prometheus job are the fleet's members, so any fleet a Prometheus already scrapes is found.
Prometheus scrapes Triton's metrics port; the HTTP and gRPC ports are the target's host with
Triton's ports (override them in the source). The target's labels come along: Kubernetes
service discovery's `namespace`, `pod`, `node` (or their `kubernetes_*` / `__meta_*`-relabelled
names), and `up`/`down` as the member's readiness."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from geadmin.domain import DEFAULT_PORTS, url_host
from geadmin.errors import ConfigError, DiscoverySourceError, PrometheusError
from geadmin.fleet.members import NAMESPACE, NODE, POD, READY, Found, Member
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.prometheus_fleet import (
    NAMESPACE_LABELS,
    NODE_LABELS,
    POD_LABELS,
    first_label,
    server_name,
)
from geadmin.triton.servers import ServerSpec

FORM = "prometheus:http://HOST:9090?job=JOB[&http_port=N&grpc_port=N]"
LABELS = {NAMESPACE: NAMESPACE_LABELS, POD: POD_LABELS, NODE: NODE_LABELS}  # ours -> the target's


def discover(target: str, *, timeout_s: float) -> Found:
    """`timeout_s` bounds the caller's wait (geadmin.fleet.discovery); the API call has its own."""
    del timeout_s
    url, job, ports = _parse(target)
    source = f"prometheus:{target}"
    try:
        targets = PrometheusHistory(url).targets()
    except PrometheusError as exc:
        raise DiscoverySourceError(f"Prometheus at {url}: {str(exc).split(': check')[0]}; check the "
                                   "source's URL (the Prometheus base URL, e.g. http://prometheus:9090)",
                                   source=source) from exc
    chosen = [t for t in targets if t.job == job]
    if not chosen:
        jobs = sorted({t.job for t in targets})
        return Found(source, notes=(f"no active target in job {job!r} (jobs: {', '.join(jobs) or 'none'})",))
    members = []
    for t in chosen:
        host = urlsplit(t.scrape_url).hostname or ""
        shown = url_host(host)
        spec = ServerSpec(name=server_name(t), url=f"http://{shown}:{ports['http_port']}",
                          grpc_url=f"grpc://{shown}:{ports['grpc_port']}", metrics_url=t.scrape_url)
        labels = {key: value for key, names in LABELS.items() if (value := first_label(t.labels, names))}
        labels.setdefault(NODE, host)
        labels[READY] = "true" if t.health == "up" else "false"
        members.append(Member(spec, source, labels))
    return Found(source, tuple(members))


def _parse(target: str) -> tuple[str, str, dict[str, int]]:
    url, _, query = target.partition("?")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"prometheus source {target!r}: use {FORM}")
    ports = {"http_port": DEFAULT_PORTS["http"], "grpc_port": DEFAULT_PORTS["grpc"]}
    job = ""
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key == "job" and len(values) == 1 and values[0]:
            job = values[0]
        elif key in ports and len(values) == 1 and values[0].isdigit():
            ports[key] = int(values[0])
        else:
            raise ConfigError(f"prometheus source {target!r}: unknown or malformed {key!r}; use {FORM}")
    if not job:
        raise ConfigError(f"prometheus source {target!r} names no job; use {FORM}")
    return url.rstrip("/"), job, ports
