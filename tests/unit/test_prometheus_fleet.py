"""The pure parts of a fleet read from Prometheus: which jobs are fleets, the selectors, the
per-server queries, and the triage window taken from a history line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from geadmin.telemetry.history.prometheus import ScrapeTarget, fleet_job, fleet_overviews, fleet_target
from geadmin.telemetry.history.prometheus_fleet import PER_SERVER_QUERIES, minute_window, node_of, server_name
from geadmin.telemetry.history.promql import MODEL_QUERIES
from geadmin.telemetry.history.store import MODEL_VALUES, Series

AT = datetime(2026, 12, 5, tzinfo=timezone.utc)


def target(job: str, instance: str, health: str = "up", **labels: str) -> ScrapeTarget:
    return ScrapeTarget(f"http://{instance}/metrics", job, instance, health, "", AT, 15.0, labels)


def test_a_job_is_a_fleet_from_two_servers_and_down_only_when_every_server_is() -> None:
    targets = [target("triton", "a:8002"), target("triton", "b:8002", "down"), target("solo", "c:8002")]
    models = {("triton", "a:8002"): {"m1"}, ("triton", "b:8002"): {"m2"}, ("solo", "c:8002"): {"m1"}}
    [fleet] = fleet_overviews(targets, models)
    assert fleet.source == "fleet:triton" and fleet.models == ("m1", "m2") and fleet.down == ""
    [down] = fleet_overviews([target("triton", "a:8002", "down"), target("triton", "b:8002", "down")],
                             {("triton", "a:8002"): {"m1"}, ("triton", "b:8002"): {"m1"}})
    assert "every server of job 'triton' down" in down.down
    assert fleet_job("fleet:triton") == "triton" and fleet_job("http://a:8002/metrics") is None


def test_a_fleet_selects_its_job_without_an_instance_and_a_model_when_asked() -> None:
    fleet = fleet_target("tri\"ton", [target("tri\"ton", "a:8002"), target("tri\"ton", "b:8002")], "P")
    assert fleet.selector == 'job="tri\\"ton"'
    assert target("triton", "a:8002").selector == 'job="triton", instance="a:8002"'
    assert ScrapeTarget("s", "j", "", "up", "", None, 1.0, {}, 'model="m"').selector == 'job="j", model="m"'


def test_every_per_server_query_keeps_the_instance() -> None:
    assert PER_SERVER_QUERIES.keys() == MODEL_QUERIES.keys()
    for query in PER_SERVER_QUERIES.values():
        assert "by (model, version)" not in query and "by (model, version, instance)" in query


def test_servers_are_named_by_pod_and_placed_by_node_label_else_host() -> None:
    assert server_name(target("t", "10.0.0.5:8002", pod="triton-0")) == "triton-0"
    assert server_name(target("t", "10.0.0.5:8002")) == "10.0.0.5:8002"
    assert node_of(target("t", "10.0.0.5:8002", kubernetes_node="ascend-7")) == "ascend-7"
    assert node_of(target("t", "10.0.0.5:8002")) == "10.0.0.5"


def series(name: str, requests: list[float | None], p99: list[float | None] | None = None) -> Series:
    """One point every 10 s up to AT; every value column is `requests` unless given."""
    values: dict[str, tuple[float | None, ...]] = {n: tuple(requests) for n in MODEL_VALUES}
    if p99 is not None:
        values["p99_ms"] = tuple(p99)
    values["avg_queue_ms"] = tuple(None if r is None else 10.0 * r for r in requests)
    times = tuple(AT - timedelta(seconds=10 * (len(requests) - 1 - i)) for i in range(len(requests)))
    return Series(name, times, values)


def test_the_triage_window_is_the_last_minute_averaged_and_the_version_is_split_off() -> None:
    minute_ago = AT - timedelta(minutes=1)
    s = series("resnet v2", [50.0, 2.0, 4.0, None, 6.0], p99=[500.0, 7.0, 9.0, None, 8.0])
    s = Series(s.name, (AT - timedelta(minutes=5), *s.times[1:]), s.values)  # the first point: too old
    window = minute_window(s, minute_ago)
    assert window is not None and (window.model, window.version) == ("resnet", "2")
    assert window.requests_per_s == 4.0  # (2 + 4 + 6) / 3: the gap and the old point left out
    request = window.quantiles_for("request")
    assert request is not None and request.p99_ms == 9.0  # the worst in the minute
    # queue ms 20, 40, 60 weighted by 2, 4, 6 requests/s
    assert window.avg_queue_ms == (20 * 2 + 40 * 4 + 60 * 6) / 12
    named = minute_window(series("my vision", [1.0]), minute_ago)
    assert named is not None and (named.model, named.version) == ("my vision", "")
    assert minute_window(series("idle", [None, None]), minute_ago) is None
