"""The fleet's pure parts: source texts, named fleets from the servers file, members found
twice, skew and outlier wording (geadmin.fleet). The real servers are in
tests/integration/test_fleet.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from geadmin.diagnose.health import ServerSnapshot
from geadmin.domain import ModelEntry, ModelState
from geadmin.errors import ConfigError, DiscoverySourceError, InvalidArgumentError
from geadmin.fleet import dns, prometheus_targets
from geadmin.fleet.discovery import (
    MAX_MEMBERS,
    Discovery,
    Fleet,
    Found,
    _merged,
    _with_fleet_settings,
    capped,
    check_source,
    fleet_named,
    fleets,
)
from geadmin.fleet.gate import GateSettings, Measured, compare
from geadmin.fleet.members import READY, Member
from geadmin.fleet.status import Figures, FleetStatus, ServerView, _stand_out
from geadmin.triton.servers import ServerSpec


def member(name: str, url: str, source: str = "servers", **labels: str) -> Member:
    return Member(ServerSpec(name, url), source, labels)


def test_dns_members_are_every_address_with_the_ports_given() -> None:
    found = dns.discover("triton:8000?metrics_port=9002", timeout_s=1,
                         resolver=lambda host, port: ["10.0.0.5", "10.0.0.6", "fd00::7"])
    assert [m.url for m in found.members] == ["http://10.0.0.5:8000", "http://10.0.0.6:8000", "http://[fd00::7]:8000"]
    assert found.members[0].spec.metrics_url == "http://10.0.0.5:9002/metrics"
    assert found.members[2].spec.grpc_url == "grpc://[fd00::7]:8001"
    assert [m.name for m in found.members] == ["triton@10.0.0.5", "triton@10.0.0.6", "triton@fd00::7"]


@pytest.mark.parametrize("target", ["triton", "triton:http", ":8000", "triton:8000?metrics_port=x",
                                    "triton:8000?nope=1"])
def test_a_malformed_dns_source_names_the_form(target: str) -> None:
    with pytest.raises(ConfigError, match=r"dns:HOST:PORT"):
        dns.discover(target, timeout_s=1)


def test_a_name_that_does_not_resolve_is_a_source_error_with_the_cause() -> None:
    with pytest.raises(DiscoverySourceError, match="does not resolve"):
        dns.discover("no-such-host.invalid:8000", timeout_s=1)


@pytest.mark.parametrize("target", ["prom:9090?job=triton", "http://prom:9090", "http://prom:9090?job=",
                                    "http://prom:9090?job=t&http_port=x", "http://prom:9090?job=t&what=1"])
def test_a_malformed_prometheus_source_names_the_form(target: str) -> None:
    with pytest.raises(ConfigError, match="prometheus"):
        prometheus_targets.discover(target, timeout_s=1)


@pytest.mark.parametrize("source", ["consul:x", "triton:8000", "", "dnss:a:1"])
def test_an_unknown_source_lists_the_known_ones(source: str) -> None:
    with pytest.raises(ConfigError, match="use servers, dns:HOST:PORT, prometheus:"):
        check_source(source)


def test_fleets_come_from_the_servers_file_and_geadmin_fleet(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nurl = "http://10.0.0.1:8000"\n\n[[fleet]]\nname = "prod"\n'
                    'sources = ["servers", "dns:triton:8000"]\nrepository = "/srv/models"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    monkeypatch.setenv("GEADMIN_FLEET", "dns:triton:8000, prometheus:http://p:9090?job=triton")
    named = fleets()
    prod = named["prod"]
    assert (prod.name, prod.sources) == ("prod", ("servers", "dns:triton:8000"))
    assert prod.repository == Path("/srv/models")
    assert not prod.proof.configured  # nothing proves a discovered member belongs: all read-only
    assert named["default"].sources == ("dns:triton:8000", "prometheus:http://p:9090?job=triton")
    assert fleet_named(None, ["dns:x:1"]).sources == ("dns:x:1",)
    with pytest.raises(ConfigError, match="no fleet named 'staging'; known: default, prod"):
        fleet_named("staging")


def test_a_fleet_table_without_sources_is_refused_with_the_form(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nurl = "http://10.0.0.1:8000"\n\n[[fleet]]\nname = "prod"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    with pytest.raises(ConfigError, match=r'fleet #1 needs name = "prod" and sources'):
        fleets()


def test_a_server_found_by_two_sources_is_one_member_with_both_labels() -> None:
    merged = _merged([
        Found("servers", (member("a", "http://10.0.0.1:8000"), member("b", "http://10.0.0.2:8000"))),
        Found("prometheus:x", (member("pod-1", "http://10.0.0.1:8000", "prometheus:x", node="n1"),
                               member("a", "http://10.0.0.3:8000", "prometheus:x"))),
    ])
    assert [(m.name, m.url) for m in merged] == [("a", "http://10.0.0.1:8000"), ("b", "http://10.0.0.2:8000"),
                                                 ("a~2", "http://10.0.0.3:8000")]
    assert merged[0].labels == {"node": "n1"} and merged[0].source == "servers"


def snapshot(name: str, *models: tuple[str, str, ModelState]) -> ServerSnapshot:
    return ServerSnapshot(name, f"http://{name}:8000", "http", datetime.now(timezone.utc), live=True,
                          ready=True, models=tuple(ModelEntry(n, v, s, "") for n, v, s in models))


def fleet_of(*views: ServerView) -> FleetStatus:
    return FleetStatus(Discovery(Fleet("f", ("servers",)), tuple(v.member for v in views), ()), views, 0.1)


def test_skew_says_how_many_serve_which_version_and_where_it_is_not_ready() -> None:
    ready = ModelState.READY
    views = [ServerView(member(f"t{i}", f"http://t{i}:8000"), snapshot(f"t{i}", ("m", "3", ready)))
             for i in range(3)]
    views.append(ServerView(member("t3", "http://t3:8000"), snapshot("t3", ("m", "2", ready))))
    down = snapshot("t4", ("m", "3", ModelState.UNAVAILABLE))
    views.append(ServerView(member("t4", "http://t4:8000"), down))
    status = fleet_of(*views)
    assert status.skew() == ["m: READY on 4 of 5; v3 on 3, v2 on 1; not READY on t4"]
    assert status.headline().startswith("FLEET DEGRADED: 5 of 5 servers serving; 1 model(s) failed, 1 skewed")


def test_a_model_that_failed_everywhere_is_no_skew_but_never_ok() -> None:
    failed = ModelEntry("npu", "1", ModelState.UNAVAILABLE, "cannot load libascendcl.so\nmore")
    unloaded = ModelEntry("old", "1", ModelState.UNAVAILABLE, "unloaded")
    views = [ServerView(member(n, f"http://{n}:8000"),
                        ServerSnapshot(n, f"http://{n}:8000", "http", datetime.now(timezone.utc), live=True,
                                       ready=True, models=(failed, unloaded))) for n in ("a", "b")]
    status = fleet_of(*views)
    assert status.skew() == [] and status.failed() == ["npu: failed on 2 of 2: cannot load libascendcl.so"]
    assert status.headline() == ("FLEET DEGRADED: 2 of 2 servers serving; 1 model(s) failed, 0 skewed — "
                                 "first: npu: failed on 2 of 2: cannot load libascendcl.so")


def test_a_server_that_did_not_answer_by_the_deadline_is_down_not_skew() -> None:
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    late = ServerView(member("b", "http://b:8000"), None, took_s=6.0)
    status = fleet_of(ok, late)
    assert status.down() == ["b (http://b:8000): no answer within 6 s"] and status.skew() == []


def test_an_outlier_stands_out_from_the_median_of_its_siblings_by_factor_and_margin() -> None:
    quick = Figures(requests=100, failures=0, avg_request_ms=10.0, p99_ms=None)
    slow = Figures(requests=100, failures=0, avg_request_ms=31.0, p99_ms=None)
    failing = Figures(requests=100, failures=20, avg_request_ms=10.0, p99_ms=None)
    assert _stand_out("m", {"a": quick, "b": quick, "c": slow}) == [
        "m on c: average latency 31.0 ms, its 2 sibling(s) 10.0 ms"]
    assert _stand_out("m", {"a": quick, "b": quick, "c": failing}) == [
        "m on c: 20% of requests failed, its 2 sibling(s) 0%"]
    tiny = Figures(requests=100, failures=0, avg_request_ms=0.3, p99_ms=None)
    little = Figures(requests=100, failures=0, avg_request_ms=1.0, p99_ms=None)
    assert _stand_out("m", {"a": tiny, "b": tiny, "c": little}) == []  # 3x, but under 5 ms apart
    few = Figures(requests=5, failures=0, avg_request_ms=300.0, p99_ms=None)
    assert _stand_out("m", {"a": quick, "b": quick, "c": few}) == []  # a fresh reload's few requests
    p99 = Figures(requests=100, failures=0, avg_request_ms=10.0, p99_ms=90.0)
    assert _stand_out("m", {"a": quick, "b": quick, "c": p99})[0].startswith("m on c: p99 90.0 ms")


@pytest.mark.parametrize("kwargs", [{"requests": -1}, {"requests": 101}, {"latency_margin": -0.1},
                                    {"error_margin": 1.5}])
def test_gate_settings_out_of_bounds_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidArgumentError):
        GateSettings(**kwargs)  # type: ignore[arg-type]


def test_a_comma_starts_a_new_source_only_before_a_source_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEADMIN_SERVERS_FILE", raising=False)
    monkeypatch.setenv("GEADMIN_FLEET", "servers, kubernetes:ns?selector=app=t,tier in (a,b),dns:triton:8000")
    assert fleets()["default"].sources == ("servers", "kubernetes:ns?selector=app=t,tier in (a,b)",
                                           "dns:triton:8000")


def test_discovered_members_get_the_fleets_key_only_when_proven_configured_servers_keep_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "fleet.key"
    key.write_text("s3cret\n")
    file = tmp_path / "servers.toml"
    table = f'[[fleet]]\nname = "prod"\nsources = ["servers"]\nadmin_key_file = "{key}"\n'
    file.write_text('[[server]]\nname = "a"\nurl = "http://10.0.0.1:8000"\n\n' + table)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    fleet = fleets()["prod"]
    assert fleet.admin_key == "s3cret" and "s3cret" not in repr(fleet)
    configured = _with_fleet_settings(member("a", "http://10.0.0.1:8000"), fleet)
    assert configured.spec.admin_key is None and configured.trust.trusted
    found = _with_fleet_settings(member("pod-1", "http://10.0.0.9:8000", "kubernetes:ns?selector=a"), fleet)
    assert found.spec.admin_key is None and not found.trust.trusted  # no proof configured
    assert found.trust.why == ("no proof configured: set trusted_networks or workload in [[fleet]] 'prod' "
                               "(trusted_networks, workload or tls_ca_file in fleet #1 (prod))")
    file.write_text('[[server]]\nname = "a"\nurl = "http://10.0.0.1:8000"\n\n' + table
                    + 'trusted_networks = ["10.0.0.0/24"]\n')
    fleet = fleets()["prod"]
    found = _with_fleet_settings(member("pod-1", "http://10.0.0.9:8000", "kubernetes:ns?selector=a"), fleet)
    assert found.spec.admin_key == "s3cret" and found.trust.why == "10.0.0.9 in trusted network 10.0.0.0/24"
    key.write_text("")
    with pytest.raises(ConfigError, match=r"admin_key_file .* is empty"):
        fleets()


def test_the_gate_compares_failures_and_median_latency_with_before() -> None:
    settings = GateSettings(latency_margin=1.0, latency_slack_ms=50.0)
    before = Measured(0, 3, 20.0)
    assert compare(before, Measured(0, 3, 89.0), settings) == ""  # 20 x 2 + 50 = 90 allowed
    assert compare(before, Measured(0, 3, 91.0), settings) == (
        "smoke requests take 91 ms (median), before 20 ms (allowed 90 ms)")
    assert compare(before, Measured(1, 3, 20.0, "boom"), settings) == (
        "1 of 3 smoke requests failed (before: 0 of 3): boom")
    assert compare(Measured(1, 3, 20.0), Measured(1, 3, 20.0, "boom"), settings) == ""  # no worse
    assert compare(None, Measured(0, 3, 500.0), settings) == ""  # nothing to compare with


def test_a_server_not_ready_only_by_strict_readiness_serves_and_is_not_down() -> None:
    failed = ModelEntry("npu", "1", ModelState.UNAVAILABLE, "cannot load libascendcl.so")
    serving = ModelEntry("m", "1", ModelState.READY, "")
    strict = ServerSnapshot("a", "http://a:8000", "http", datetime.now(timezone.utc), live=True, ready=False,
                            models=(failed, serving))
    idle = ServerSnapshot("b", "http://b:8000", "http", datetime.now(timezone.utc), live=True, ready=False)
    status = fleet_of(ServerView(member("a", "http://a:8000"), strict),
                      ServerView(member("b", "http://b:8000"), idle))
    assert status.down() == [
        "b (http://b:8000): LIVE, NOT READY (Triton says it is not ready, and no model is READY)"]
    assert status.failed() == [
        "npu: failed on 1 of 1: cannot load libascendcl.so (Triton's readiness is false on a)"]


def test_a_server_whose_models_cannot_be_read_is_never_counted_as_serving_nothing() -> None:
    """A restricted index without the key: 'FLEET OK: 1 server, 0 models' would be green
    while nothing is known; the server is down in the view, and with none readable the fleet is."""
    refused = ServerSnapshot("a", "http://a:8000", "http", datetime.now(timezone.utc), live=True, ready=True,
                             error="list the model repository: This API is restricted, expecting header "
                                   "'admin-key'\nmore")
    status = fleet_of(ServerView(member("a", "http://a:8000"), refused))
    assert status.down() == ["a (http://a:8000): its models cannot be read: list the model repository: "
                             "This API is restricted, expecting header 'admin-key'"]
    assert status.headline().startswith("FLEET DOWN: none of 1 servers serving — first: a (http://a:8000)")
    ok = ServerView(member("b", "http://b:8000"), snapshot("b", ("m", "1", ModelState.READY)))
    assert fleet_of(ok, ServerView(member("a", "http://a:8000"), refused)).headline().startswith(
        "FLEET DEGRADED: 1 of 2 servers serving")


def fleet_found(views: tuple[ServerView, ...], *found: Found) -> FleetStatus:
    """`views` found by the configured servers, beside what the other sources in `found` said."""
    sources = (Found("servers", tuple(v.member for v in views)), *found)
    fleet = Fleet("f", tuple(f.source for f in sources))
    return FleetStatus(Discovery(fleet, tuple(v.member for v in views), sources), views, 0.1)


def test_a_source_that_did_not_answer_makes_the_fleet_degraded_naming_the_source_first() -> None:
    """Its servers are silently missing from the matrix: never "FLEET OK, with warnings"."""
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    status = fleet_found((ok,), Found("dns:triton-b:8000", error="DNS: 'triton-b' does not resolve"))
    assert status.headline() == ("FLEET DEGRADED: source dns:triton-b:8000 did not answer, its servers are "
                                 "missing: DNS: 'triton-b' does not resolve — found: 1 of 1 servers serving; "
                                 "0 model(s) failed, 0 skewed")
    assert status.degraded() == status.missing()


def test_a_pod_a_source_left_out_makes_the_fleet_degraded_naming_the_source() -> None:
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    note = "pod triton-1 is Unknown (on node n1): left out until it runs"
    status = fleet_found((ok,), Found("kubernetes:ns?selector=app=triton", notes=(note,)))
    assert status.headline().startswith(
        f"FLEET DEGRADED: source kubernetes:ns?selector=app=triton left servers out: {note} — found: 1 of 1")
    assert status.to_json()["missing"] == [
        f"source kubernetes:ns?selector=app=triton left servers out: {note}"]


def test_a_member_not_ready_with_every_model_ready_is_degraded_and_named() -> None:
    """As `geadmin status` on that server: Triton says it is not ready (a readiness probe sends it
    nothing), whatever its models say."""
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    unready = ServerSnapshot("b", "http://b:8000", "http", datetime.now(timezone.utc), live=True, ready=False,
                             models=(ModelEntry("m", "1", ModelState.READY, ""),))
    status = fleet_of(ok, ServerView(member("b", "http://b:8000"), unready))
    assert status.down() == [] and status.failed() == [] and status.skew() == []
    assert status.unready() == ["b (http://b:8000): Triton says it is not ready, and no model explains why "
                                "(read its log) — probes of /v2/health/ready fail while it serves; fix: load "
                                "the model once its cause is fixed, or restart Triton"]
    assert status.headline() == ("FLEET DEGRADED: 2 of 2 servers serving, 1 of them not ready; 0 model(s) "
                                 f"failed, 0 skewed — first: {status.unready()[0]}")


def test_a_member_its_source_calls_not_ready_is_degraded_whatever_triton_answers() -> None:
    """A Kubernetes pod not Ready (or a Prometheus target down) gets no traffic: the fleet read
    OK while its Triton answered us directly."""
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    pod = member("b", "http://b:8000", "kubernetes:prod", **{READY: "false"})
    status = fleet_of(ok, ServerView(pod, snapshot("b", ("m", "1", ModelState.READY))))
    assert status.unready() == ["b (http://b:8000): its source says it is not ready (kubernetes:prod): "
                                "it gets no traffic there; see why where it runs (`kubectl describe pod`, "
                                "the target's last error)"]
    assert status.headline().startswith("FLEET DEGRADED: 2 of 2 servers serving")
    ready = member("b", "http://b:8000", "kubernetes:prod", **{READY: "true"})
    assert fleet_of(ok, ServerView(ready, snapshot("b", ("m", "1", ModelState.READY)))).unready() == []


def test_a_server_not_ready_because_a_model_failed_is_said_once_by_its_failed_model() -> None:
    failed = ModelEntry("npu", "1", ModelState.UNAVAILABLE, "cannot load libascendcl.so")
    strict = ServerSnapshot("a", "http://a:8000", "http", datetime.now(timezone.utc), live=True, ready=False,
                            models=(failed, ModelEntry("m", "1", ModelState.READY, "")))
    status = fleet_of(ServerView(member("a", "http://a:8000"), strict))
    assert status.unready() == [] and status.headline().startswith(
        "FLEET DEGRADED: 1 of 1 servers serving; 1 model(s) failed, 0 skewed — first: npu: failed on 1 of 1")


def test_a_source_with_more_members_than_the_cap_is_cut_with_a_note_naming_it_and_is_degraded() -> None:
    """5000 targets of one Prometheus job, every one with the same name: at most MAX_MEMBERS
    (the DNS source's cap) are members, each named once, and the note says how many were left out."""
    assert MAX_MEMBERS == dns.MAX_ADDRESSES
    many = tuple(member("triton", f"http://10.0.{i // 250}.{i % 250 + 1}:8000", "prometheus:x")
                 for i in range(5000))
    found = capped(Found("prometheus:x", many))
    assert len(found.members) == MAX_MEMBERS
    assert found.notes == (f"5000 members found, {5000 - MAX_MEMBERS} left out: at most {MAX_MEMBERS} per "
                           "source (geadmin.fleet.discovery.MAX_MEMBERS); narrow the source (its job or "
                           "selector) or split it into several sources",)
    merged = _merged([found])
    assert [m.name for m in merged[:3]] == ["triton", "triton~2", "triton~3"]
    assert len({m.name for m in merged}) == MAX_MEMBERS
    ok = ServerView(member("a", "http://a:8000"), snapshot("a", ("m", "1", ModelState.READY)))
    assert fleet_found((ok,), found).headline().startswith(
        "FLEET DEGRADED: source prometheus:x left servers out: 5000 members found, 4936 left out")
    configured = Found("servers", many[:MAX_MEMBERS + 1])
    assert capped(configured) == configured  # the operator's own list is never cut


def test_same_named_members_are_numbered_once_each_without_restarting_the_count() -> None:
    taken = member("triton~2", "http://10.9.0.1:8000", "dns:x")  # already called what a rename would pick
    many = [member("triton", f"http://10.0.{i // 250}.{i % 250 + 1}:8000", "prometheus:x")
            for i in range(5000)]
    merged = _merged([Found("dns:x", (taken,)), Found("prometheus:x", tuple(many))])
    names = [m.name for m in merged]
    assert len(set(names)) == len(names) == 5001
    assert names[:4] == ["triton~2", "triton", "triton~3", "triton~4"] and names[-1] == "triton~5001"


def test_a_member_that_is_the_stacks_triton_is_read_at_the_stacks_metrics_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded dashboard's fleet is the stack's Triton, named by GEADMIN_TRITON_URL alone:
    its faults, figures and capacity were read at the default metrics port 8002 ("faults not
    read: nothing answers") while the stack published another."""
    import os

    from geadmin.domain import Ports
    from geadmin.fleet.members import member_metrics_url
    from geadmin.stack.workspace import StackInfo, Workspace

    workspace = Workspace(tmp_path / "home")
    monkeypatch.setenv("GEADMIN_HOME", str(workspace.home))
    monkeypatch.delenv("GEADMIN_TRITON_METRICS_URL", raising=False)
    workspace.home.mkdir(parents=True)
    workspace.write_stack(StackInfo(pid=os.getpid(), http_url="http://127.0.0.1:18000",
                                    grpc_url="grpc://127.0.0.1:18001", metrics_url="http://127.0.0.1:18002/metrics",
                                    ports=Ports(18000, 18001, 18002), dashboard_url="",
                                    triton_log=workspace.triton_log, repository=workspace.repository,
                                    home=workspace.home))
    assert member_metrics_url(member("local", "http://127.0.0.1:18000")) == "http://127.0.0.1:18002/metrics"
    own = Member(ServerSpec("x", "http://10.0.0.5:8000", metrics_url="http://10.0.0.5:9102/metrics"),
                 "servers")
    assert member_metrics_url(own) == "http://10.0.0.5:9102/metrics"  # its own first
