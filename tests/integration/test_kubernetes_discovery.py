"""Kubernetes discovery (geadmin/fleet/kubernetes.py) through the official `kubernetes` client,
against the Kubernetes API DOUBLE of tests/support/kubernetes_api_double.py: no API server can
run here (FACTS.md), so the double replays API responses stored in tests/fixtures/kubernetes/
(in the API's JSON shape, validated below against the Kubernetes schemas). No tritonserver is
started: the members' addresses are checked, not called.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import urllib3.exceptions as u3
from referencing import Registry, Resource

from geadmin.errors import ConfigError, DiscoverySourceError
from geadmin.fleet import kubernetes as kube
from geadmin.fleet.members import ASCEND, ASCEND_COUNT, NAMESPACE, NODE, POD, READY
from tests.support.http_doubles import closed_port
from tests.support.kubernetes_api_double import FIXTURES, KubernetesApiDouble, parse_selector, running

pytestmark = pytest.mark.integration

READER = "system:serviceaccount:geadmin:geadmin-dashboard"
STRANGER = "system:serviceaccount:geadmin:default"
SELECTOR = "app.kubernetes.io/name=triton"
# Generous: the bound under test is timeout_s, never a tight figure (a CI host can stall).
BOUND_S = 20.0


@pytest.fixture
def api() -> Iterator[KubernetesApiDouble]:
    with running(tokens={"reader-token": READER, "stranger-token": STRANGER},
                 grants={READER: {"geadmin", "edge"}}) as double:
        yield double


@pytest.fixture
def kubeconfig(api: KubernetesApiDouble, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig", token="reader-token")


def target(kubeconfig: Path, namespace: str = "geadmin", selector: str = SELECTOR, extra: str = "") -> str:
    return f"{namespace}?selector={selector}&kubeconfig={kubeconfig}{extra}"


# -- found ------------------------------------------------------------------------------------
def test_two_running_pods_are_found_at_their_pod_ips_with_node_ascend_and_readiness(kubeconfig: Path) -> None:
    found = kube.discover(target(kubeconfig), timeout_s=10)
    assert [m.name for m in found.members] == ["triton-0", "triton-1"]
    first, second = found.members
    assert first.url == "http://10.244.1.17:8000"
    assert (first.spec.http_url, first.spec.grpc_url, first.spec.metrics_url) == (
        "http://10.244.1.17:8000", "grpc://10.244.1.17:8001", "http://10.244.1.17:8002/metrics")
    assert dict(first.labels) == {NODE: "ascend-node-1", POD: "triton-0", NAMESPACE: "geadmin",
                                  ASCEND: "Ascend910", ASCEND_COUNT: "1", READY: "true"}
    assert dict(second.labels) == {NODE: "ascend-node-2", POD: "triton-1", NAMESPACE: "geadmin",
                                   ASCEND: "Ascend910", ASCEND_COUNT: "2", READY: "false"}
    assert second.url == "http://10.244.2.9:8000"
    assert found.source == first.source == "kubernetes:" + target(kubeconfig)
    assert found.error == "" and first.spec.admin_key is None


def test_a_pending_pod_is_left_out_with_a_note_saying_why(kubeconfig: Path) -> None:
    found = kube.discover(target(kubeconfig), timeout_s=10)
    assert "triton-2" not in [m.name for m in found.members]
    (note,) = found.notes
    assert note.startswith("pod triton-2 is Pending (not scheduled on a node yet; no IP yet; ")
    assert "Insufficient huawei.com/Ascend910" in note


def test_the_selector_is_passed_to_the_api_as_given(api: KubernetesApiDouble, kubeconfig: Path) -> None:
    selector = "app.kubernetes.io/name in (triton,triton-310p),app.kubernetes.io/part-of=geadmin"
    found = kube.discover(target(kubeconfig, selector=selector), timeout_s=10)
    assert [m.name for m in found.members] == ["triton-0", "triton-1"]
    assert api.requests[-1].path == "/api/v1/namespaces/geadmin/pods"
    assert api.requests[-1].query == {"labelSelector": [selector]}
    assert api.requests[-1].user == READER


def test_a_selector_matching_nothing_finds_nothing_and_says_so(kubeconfig: Path) -> None:
    found = kube.discover(target(kubeconfig, selector="app=triton"), timeout_s=10)
    assert found.members == ()
    assert found.notes == ("no pods in namespace geadmin match the selector 'app=triton'",)


def test_the_namespace_scopes_the_search(kubeconfig: Path) -> None:
    found = kube.discover(target(kubeconfig, "edge", "app.kubernetes.io/name=triton-310p"), timeout_s=10)
    (member,) = found.members
    assert (member.name, member.labels[ASCEND], member.labels[ASCEND_COUNT], member.labels[NODE]) == (
        "triton-310p-0", "Ascend310P", "1", "atlas-300i-node-1")
    assert member.labels[NAMESPACE] == "edge"


def test_ports_by_name_or_number_and_substituted_pod_addresses(api: KubernetesApiDouble,
                                                               kubeconfig: Path) -> None:
    api.set_pod("triton-0", ip="127.0.0.1", ports={"http": 18000, "grpc": 18001, "metrics": 18002})
    found = kube.discover(target(kubeconfig), timeout_s=10)
    assert found.members[0].spec.grpc_url == "grpc://127.0.0.1:18001"
    assert found.members[0].spec.metrics_url == "http://127.0.0.1:18002/metrics"
    by_number = kube.discover(target(kubeconfig, extra="&port=9000&grpc_port=grpc&metrics_port=9002"),
                              timeout_s=10)
    assert [m.url for m in by_number.members] == ["http://127.0.0.1:9000", "http://10.244.2.9:9000"]
    assert by_number.members[0].spec.grpc_url == "grpc://127.0.0.1:18001"
    assert by_number.members[1].spec.metrics_url == "http://10.244.2.9:9002/metrics"


def test_an_ipv6_pod_address_is_bracketed(api: KubernetesApiDouble, kubeconfig: Path) -> None:
    api.set_pod("triton-1", ip="fd00:10:244::9")
    found = kube.discover(target(kubeconfig), timeout_s=10)
    assert found.members[1].url == "http://[fd00:10:244::9]:8000"
    assert found.members[1].spec.grpc_url == "grpc://[fd00:10:244::9]:8001"


def test_a_port_name_the_pods_lack_leaves_them_out_with_a_note(kubeconfig: Path) -> None:
    found = kube.discover(target(kubeconfig, extra="&port=web"), timeout_s=10)
    assert found.members == ()
    assert found.notes[0] == ("pod triton-0 has no container port named 'web' (port; its named ports: grpc, "
                              "http, metrics): left out")


def test_unnamed_ports_fall_back_to_tritons_defaults(api: KubernetesApiDouble, kubeconfig: Path) -> None:
    pod = api.pods["geadmin"]["items"][1]
    assert pod["metadata"]["name"] == "triton-0"
    for port in pod["spec"]["containers"][0]["ports"]:
        del port["name"]
    found = kube.discover(target(kubeconfig), timeout_s=10)
    assert (found.members[0].url, found.members[0].spec.grpc_url) == ("http://10.244.1.17:8000",
                                                                     "grpc://10.244.1.17:8001")


def test_a_context_of_the_kubeconfig_is_used(api: KubernetesApiDouble, tmp_path: Path) -> None:
    config = api.write_kubeconfig(tmp_path / "config", token="reader-token", context="prod")
    found = kube.discover(target(config, extra="&context=prod"), timeout_s=10)
    assert len(found.members) == 2
    with pytest.raises(DiscoverySourceError, match="no usable Kubernetes credentials"):
        kube.discover(target(config, extra="&context=staging"), timeout_s=10)


# -- the API says no ----------------------------------------------------------------------------
def test_forbidden_names_the_rbac_role_that_grants_reading_pods(api: KubernetesApiDouble,
                                                                tmp_path: Path) -> None:
    config = api.write_kubeconfig(tmp_path / "config", token="stranger-token")
    with pytest.raises(DiscoverySourceError) as caught:
        kube.discover(target(config), timeout_s=10)
    message = str(caught.value)
    assert message.startswith("kubernetes:geadmin?selector=")
    assert f'User "{STRANGER}" cannot list resource "pods"' in message
    assert "geadmin-pod-reader" in message and "deploy/kubernetes/base/dashboard-rbac.yaml" in message
    assert caught.value.source == "kubernetes:" + target(config)


def test_unknown_credentials_are_unauthorized(api: KubernetesApiDouble, tmp_path: Path) -> None:
    config = api.write_kubeconfig(tmp_path / "config", token="expired-token")
    with pytest.raises(DiscoverySourceError, match=r"refused the credentials \(401 Unauthorized"):
        kube.discover(target(config), timeout_s=10)


def test_a_selector_the_api_cannot_parse_is_a_bad_request(kubeconfig: Path) -> None:
    with pytest.raises(DiscoverySourceError, match=r"rejected the request \(unable to parse requirement"):
        kube.discover(target(kubeconfig, selector="app in (triton"), timeout_s=10)


def test_nothing_listening_fails_fast_as_refused_not_as_a_timeout(tmp_path: Path) -> None:
    double = KubernetesApiDouble().start()
    double.stop()  # only for its kubeconfig writer; the port below has no listener
    config = tmp_path / "config"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}), encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(DiscoverySourceError, match=r"nothing answers at http://127\.0\.0\.1:\d+"):
        kube.discover(target(config), timeout_s=30)
    assert time.monotonic() - started < BOUND_S  # refused at once: never the 30 s timeout


def test_an_api_that_accepts_but_never_answers_is_bounded_by_timeout_s(tmp_path: Path) -> None:
    with socket.socket() as silent:  # listens, never accepts: the kernel completes the handshake
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        config = tmp_path / "config"
        config.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{silent.getsockname()[1]}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}), encoding="utf-8")
        started = time.monotonic()
        with pytest.raises(DiscoverySourceError, match=r"did not answer within 0\.5 s"):
            kube.discover(target(config), timeout_s=0.5)
        assert time.monotonic() - started < BOUND_S  # one attempt, no retries


def test_a_missing_kubeconfig_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DiscoverySourceError, match=r"set KUBECONFIG or add &kubeconfig=PATH"):
        kube.discover(target(tmp_path / "absent"), timeout_s=5)


@pytest.mark.parametrize("bad", [
    "", "geadmin", "geadmin?", "Geadmin?selector=a=b", "geadmin?port=http", "geadmin?selector=",
    "geadmin?selector=a=b&colour=blue", "geadmin?selector=a=b&port=http&port=8000",
    "geadmin?selector=a=b&port=70000", "geadmin?selector=a=b&grpc_port=Not_A_Name", "geadmin?selector=a=b&&",
])
def test_a_malformed_target_is_a_config_error_showing_the_form(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"expected kubernetes:NAMESPACE\?selector=LABEL_SELECTOR"):
        kube.discover(bad, timeout_s=1)


def test_a_timeout_that_is_not_positive_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="timeout must be above 0 s"):
        kube.discover("geadmin?selector=a=b", timeout_s=0)


# -- one table for the failures ---------------------------------------------------------------
def test_every_api_status_has_its_own_explanation() -> None:
    parsed = kube.parse_target("geadmin?selector=a=b")
    texts = {status: kube.explain_status(status, "MSG", "https://api:6443", parsed)
             for status in (0, 400, 401, 403, 404, 429, 500, 503, 418)}
    assert "certificate-authority" in texts[0] and "selector 'a=b'" in texts[400]
    assert "renew it" in texts[401]
    assert "geadmin-pod-reader" in texts[403] and "namespace geadmin" in texts[403]
    assert "Kubernetes API server?" in texts[404] and "throttling" in texts[429]
    assert "control plane" in texts[500] and "control plane" in texts[503]
    assert texts[418] == "the API at https://api:6443 answered 418 (MSG)"  # the catch-all, for nothing listed
    assert len(set(texts.values())) == len(texts)


@pytest.mark.parametrize(("error", "expected"), [
    (u3.NameResolutionError("api", None, OSError("no such host")), "does not resolve"),
    (u3.NewConnectionError(None, "refused"), "nothing answers at"),
    (u3.ConnectTimeoutError("slow"), "could not connect to H within 2 s"),
    (u3.ReadTimeoutError(None, "/", "slow"), "did not answer within 2 s"),
    (u3.SSLError("bad certificate"), "TLS connection"),
    (u3.ProtocolError("reset"), "broke"),
    (u3.MaxRetryError(None, "/", u3.ProtocolError("reset")), "broke"),
    (u3.DecodeError("garbled"), "the request to H failed"),
    (ConnectionRefusedError("refused"), "nothing answers at H (connection refused)"),
    (TimeoutError("slow"), "did not answer within 2 s"),
    (OSError("unreachable"), "the request to H failed"),
])
def test_every_transport_failure_is_named_for_what_it_is(error: BaseException, expected: str) -> None:
    text = kube.explain_transport(error, "H", 2)
    assert text is not None and expected in text, text
    # Never relabelled: only a connection the API refused is called "connection refused".
    refused = type(error) in (ConnectionRefusedError, u3.NewConnectionError)  # not NameResolutionError
    assert ("connection refused" in text) is refused, text


def test_an_error_that_is_not_a_transport_failure_is_not_swallowed() -> None:
    assert kube.explain_transport(KeyError("bug"), "H", 2) is None


# -- the fixtures are in the API's shape -------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("podlist-*.json")))
def test_recorded_pod_lists_validate_against_the_kubernetes_schema(name: str) -> None:
    pod_list = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert pod_list["kind"] == "PodList" and pod_list["metadata"]["resourceVersion"]
    kubernetes_validate.validate(pod_list, "1.37.0", strict=True)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("status-*.json")))
def test_recorded_status_objects_validate_against_the_kubernetes_schema(name: str) -> None:
    definitions_file = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
                        / "v1.37.0-local-strict" / "_definitions.json")
    definitions = json.loads(definitions_file.read_text(encoding="utf-8"))
    registry = Resource.from_contents(definitions) @ Registry()
    schema = {"$ref": f"{definitions['$id']}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}
    status = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema, registry=registry).validate(status)
    assert status["code"] == int(name.split("-")[1])


def test_the_planted_broken_fixture_fails_the_schema() -> None:
    pod_list = json.loads((FIXTURES / "podlist-geadmin.json").read_text(encoding="utf-8"))
    pod_list["items"][0]["status"]["podIP"] = 10
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod_list, "1.37.0", strict=True)


def test_the_doubles_selector_grammar() -> None:
    assert parse_selector("a=b,c!=d,e in (f, g),h notin (i),j,!k") == [
        ("a", "=", frozenset({"b"})), ("c", "!=", frozenset({"d"})), ("e", "in", frozenset({"f", "g"})),
        ("h", "notin", frozenset({"i"})), ("j", "exists", frozenset()), ("k", "!", frozenset())]
    for bad in ("a in (b", "=b", "a=b,", "a b"):
        with pytest.raises(ValueError, match="unable to parse requirement"):
            parse_selector(bad)
