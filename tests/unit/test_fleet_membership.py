"""The trust rules of geadmin.fleet.membership: who in a fleet gets the admin key, and why.
The real Prometheus, Triton and impostor are in tests/integration/test_fleet_membership.py;
Kubernetes ownership against the API double in tests/integration/test_kubernetes_membership.py."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from geadmin.domain import Endpoint
from geadmin.errors import ConfigError, FleetError
from geadmin.fleet.discovery import fleets
from geadmin.fleet.members import Member, Ownership, Trust
from geadmin.fleet.membership import Proof, check_tls, decide, parse_networks, parse_workload, refuse_unproven
from geadmin.fleet.readonly import MAX_MODELS, OpenClient, client_for
from geadmin.stack.processes import free_ports
from geadmin.triton.servers import ServerSpec
from tests.support.replica_impostor import ANSWERS, impostor
from tests.support.tls_certs import Issued, issue

KEY = "fleet-key"
NETS = parse_networks(["10.0.0.0/8", "fd00::/64"], "test")


def found(url: str = "http://10.1.2.3:8000", grpc: str | None = None, source: str = "dns:triton:8000",
          **kwargs: object) -> Member:
    spec = ServerSpec("m", url, grpc_url=grpc or url.replace("http", "grpc").replace(":8000", ":8001"))
    return Member(spec, source, **kwargs)  # type: ignore[arg-type]


def test_a_member_is_read_only_until_checked() -> None:
    assert not found().trust.trusted and found().trust.word == "read-only"


def test_with_no_proof_configured_no_discovered_member_gets_the_key() -> None:
    decided = decide(found(), Proof(), KEY, "prod")
    assert decided.spec.admin_key is None and not decided.trust.trusted
    assert decided.trust.why == ("no proof configured: set trusted_networks or workload in [[fleet]] 'prod' "
                                 "(GEADMIN_FLEET_TRUSTED_NETWORKS, GEADMIN_FLEET_WORKLOAD or "
                                 "GEADMIN_FLEET_TLS_CA_FILE)")


def test_a_key_a_source_put_on_a_member_is_taken_off_or_replaced_by_the_fleets() -> None:
    def smuggled(url: str) -> Member:
        member = found(url)
        return replace(member, spec=replace(member.spec, admin_key="smuggled"))

    assert decide(smuggled("http://192.168.1.9:8000"), Proof(NETS), KEY, "prod").spec.admin_key is None
    assert decide(smuggled("http://192.168.1.9:8000"), Proof(), KEY, "prod").spec.admin_key is None
    assert decide(smuggled("http://10.1.2.3:8000"), Proof(NETS), KEY, "prod").spec.admin_key == KEY


def test_configured_servers_keep_their_own_key_and_are_trusted() -> None:
    member = Member(ServerSpec("a", "http://10.0.0.1:8000", admin_key="own"), "servers")
    decided = decide(member, Proof(), KEY, "prod")
    assert decided.spec.admin_key == "own" and decided.trust == Trust(
        True, "configured server (servers file): its own admin key")


def test_an_address_in_a_trusted_network_gets_the_fleets_key() -> None:
    decided = decide(found(), Proof(NETS), KEY, "prod")
    assert decided.spec.admin_key == KEY
    assert decided.trust == Trust(True, "10.1.2.3 in trusted network 10.0.0.0/8")
    v6 = decide(found("http://[fd00::7]:8000"), Proof(NETS), KEY, "prod")
    assert v6.trust == Trust(True, "fd00::7 in trusted network fd00::/64")


def test_an_address_outside_or_a_name_is_read_only_and_names_the_setting() -> None:
    outside = decide(found("http://11.9.9.9:8000"), Proof(NETS, where="X"), KEY, "prod")
    assert not outside.trust.trusted and outside.spec.admin_key is None
    assert outside.trust.why == ("11.9.9.9 is outside the trusted networks (10.0.0.0/8, fd00::/64): "
                                 "read-only (proof: X)")
    named = decide(found("http://triton:8000"), Proof(NETS), KEY, "prod")
    assert not named.trust.trusted and "triton is a name, not an address" in named.trust.why


def test_every_endpoint_a_key_could_go_to_must_be_inside() -> None:
    split = found("http://10.1.2.3:8000", grpc="grpc://11.0.0.1:8001")
    assert not decide(split, Proof(NETS), KEY, "prod").trust.trusted


def test_ownership_proves_only_the_workload_the_fleet_names() -> None:
    owned = Ownership("Deployment/triton", "ns", True, "owned by Deployment/triton in ns ns")
    proof = Proof(workload="Deployment/triton")
    decided = decide(found(ownership=owned), proof, KEY, "prod")
    assert decided.trust == Trust(True, "owned by Deployment/triton in ns ns")
    assert decided.spec.admin_key == KEY
    other = decide(found(ownership=owned), Proof(workload="StatefulSet/triton"), KEY, "prod")
    assert not other.trust.trusted
    assert "not a Kubernetes pod checked against StatefulSet/triton" in other.trust.why
    unproven = replace(owned, proven=False, detail="not proven owned by Deployment/triton in ns ns: bare")
    assert not decide(found(ownership=unproven), proof, KEY, "prod").trust.trusted
    assert not decide(found(), proof, KEY, "prod").trust.trusted  # a DNS member: no ownership to read


def test_ownership_without_a_workload_configured_proves_nothing() -> None:
    owned = Ownership("Deployment/triton", "ns", True, "owned by Deployment/triton in ns ns")
    decided = decide(found("http://11.0.0.1:8000", ownership=owned), Proof(NETS), KEY, "prod")
    assert not decided.trust.trusted


@pytest.mark.parametrize("text", ["10.0.0.1/8", "10.0.0.0/33", "ten", "", "0.0.0.0/0", "::/0"])
def test_a_malformed_or_everything_network_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="where: trusted network"):
        parse_networks([text], "where")


@pytest.mark.parametrize("text", ["triton", "Pod/triton", "Deployment/", "deployment/triton",
                                  "Deployment/Triton"])
def test_a_malformed_workload_names_the_form(text: str) -> None:
    with pytest.raises(ConfigError, match="must be KIND/NAME with KIND one of Deployment, StatefulSet"):
        parse_workload(text, "where")


def test_the_proof_comes_from_the_fleet_table_and_the_default_fleets_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "servers.toml"
    file.write_text('[[fleet]]\nname = "prod"\nsources = ["dns:triton:8000"]\n'
                    'trusted_networks = ["10.0.0.0/8"]\nworkload = "Deployment/triton"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    monkeypatch.setenv("GEADMIN_FLEET", "dns:triton:8000")
    monkeypatch.setenv("GEADMIN_FLEET_TRUSTED_NETWORKS", "192.168.0.0/16, fd00::/64")
    named = fleets()
    assert named["prod"].proof.networks == parse_networks(["10.0.0.0/8"], "x")
    assert named["prod"].proof.workload == "Deployment/triton"
    assert named["default"].proof.networks == parse_networks(["192.168.0.0/16", "fd00::/64"], "x")
    monkeypatch.setenv("GEADMIN_FLEET_TRUSTED_NETWORKS", "192.168.0.1/16")
    with pytest.raises(ConfigError, match=r"_TRUSTED_NETWORKS: trusted network '192\.168\.0\.1/16'"):
        fleets()
    monkeypatch.delenv("GEADMIN_FLEET_TRUSTED_NETWORKS")
    file.write_text('[[fleet]]\nname = "prod"\nsources = ["dns:triton:8000"]\n'
                    'trusted_networks = "10.0.0.0/8"\n')
    with pytest.raises(ConfigError, match=r'trusted_networks must be a list of CIDRs, e.g. \["10.0.0.0/8"\]'):
        fleets()


def test_a_write_with_an_unproven_member_is_refused_naming_it_and_why() -> None:
    trusted = decide(found(), Proof(NETS), KEY, "prod")
    stranger = replace(decide(found("http://11.0.0.1:8000"), Proof(NETS), KEY, "prod"),
                       spec=replace(found().spec, name="stranger", url="http://11.0.0.1:8000"))
    refuse_unproven([trusted], "fleet reload m")  # nothing to refuse
    with pytest.raises(FleetError) as refused:
        refuse_unproven([trusted, stranger], "fleet reload m")
    assert str(refused.value).startswith("fleet reload m refused before anything changed: 1 member(s) not "
                                         "proven to belong to the fleet: stranger (http://11.0.0.1:8000): ")


def test_a_read_only_member_is_polled_by_a_client_that_holds_no_key() -> None:
    member = decide(found(), Proof(), KEY, "prod")
    client = client_for(replace(member, spec=replace(member.spec, admin_key="x")), 1.0)
    assert isinstance(client, OpenClient) and client.admin_key is None
    trusted = client_for(decide(found(), Proof(NETS), KEY, "prod"), 1.0)
    assert not isinstance(trusted, OpenClient) and trusted.admin_key == KEY


# -- TLS ------------------------------------------------------------------------------------
@pytest.fixture
def tls_listener(tmp_path: Path) -> Iterator[tuple[int, Issued]]:
    yield from _tls_listener(tmp_path, "127.0.0.1")


@pytest.fixture
def tls_listener_v6(tmp_path: Path) -> Iterator[tuple[int, Issued]]:
    yield from _tls_listener(tmp_path, "::1")


def _tls_listener(tmp_path: Path, host: str) -> Iterator[tuple[int, Issued]]:
    """A TLS handshake at `host` with a certificate for it (no Triton behind: a proof is the
    handshake), until the test ends."""
    issued = issue(tmp_path / "ca1", ip=host)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert, issued.key)
    server = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1], issued
    finally:
        stop.set()
        server.close()


def test_tls_to_the_fleets_ca_makes_a_member_trusted_over_grpcs_only(
    tls_listener: tuple[int, Issued], tmp_path: Path
) -> None:
    port, issued = tls_listener
    member = found(f"http://127.0.0.1:{port + 1}", grpc=f"grpc://127.0.0.1:{port}")
    decided = decide(member, Proof(tls_ca=issued.ca), KEY, "prod")
    assert decided.trust.trusted and decided.spec.admin_key == KEY
    assert decided.url == decided.spec.grpc_url == f"grpcs://127.0.0.1:{port}" and decided.tls_ca == issued.ca
    assert decided.trust.why == f"gRPC over TLS at 127.0.0.1:{port}, its certificate chains to {issued.ca}"
    client = client_for(decided, 1.0)
    assert client.tls_ca == str(issued.ca) and client.url.startswith("grpcs://")
    other = issue(tmp_path / "ca2", ca_name="another CA")
    refused = decide(member, Proof(tls_ca=other.ca), KEY, "prod")
    assert not refused.trust.trusted and refused.spec.admin_key is None and refused.url.startswith("http://")
    assert "its certificate does not chain to" in refused.trust.why


def test_a_member_proven_over_tls_at_an_ipv6_address_gets_a_url_endpoint_parse_accepts(
    tls_listener_v6: tuple[int, Issued],
) -> None:
    port, issued = tls_listener_v6
    member = found(f"http://[::1]:{port + 1}", grpc=f"grpc://[::1]:{port}")
    decided = decide(member, Proof(tls_ca=issued.ca), KEY, "prod")
    assert decided.trust.trusted, decided.trust.why
    assert decided.url == decided.spec.grpc_url == f"grpcs://[::1]:{port}"  # not grpcs://::1:PORT
    parsed = Endpoint.parse(decided.url)
    assert (parsed.host, parsed.port, parsed.ssl) == ("::1", port, True)
    client = client_for(decided, 1.0)
    try:
        assert client.url == f"grpcs://[::1]:{port}"
    finally:
        client.close()


def test_an_ipv6_address_is_bracketed_wherever_a_url_is_built_from_it() -> None:
    endpoint = Endpoint.parse("grpc://[fd00::5]:8001")
    assert endpoint.address == "[fd00::5]:8001"
    assert Endpoint.parse(replace(endpoint, ssl=True).url) == replace(endpoint, ssl=True)
    assert Endpoint.parse("grpc://10.0.0.5:8001").address == "10.0.0.5:8001"


def test_tls_to_a_port_without_tls_proves_nothing() -> None:
    with socket.create_server(("127.0.0.1", 0)) as plain:
        port = plain.getsockname()[1]
        threading.Thread(target=lambda: plain.accept()[0].close(), daemon=True).start()
        problem = check_tls("127.0.0.1", port, Path("/etc/ssl/certs/ca-certificates.crt"), timeout_s=5)
        assert problem.startswith("no TLS handshake"), problem


def test_a_read_only_member_that_lists_too_many_models_costs_a_bounded_number_of_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stats = {"model_stats": [{"name": f"m{i:04d}", "version": "1"} for i in range(MAX_MODELS + 100)]}
    monkeypatch.setitem(ANSWERS, "/v2/models/stats", stats)
    http, grpc, metrics = free_ports(3, "127.0.0.2")
    with impostor("127.0.0.2", http, grpc, metrics) as fake:
        client = OpenClient(fake.http_url, timeout_s=5)
        try:
            entries = client.repository_index()
        finally:
            client.close()
    assert len(entries) == MAX_MODELS and entries[0].name == "m0000"
    assert len([s for s in fake.requests if s.path.endswith("/ready")]) == MAX_MODELS
    assert not [s for s in fake.requests if "admin-key" in s.headers]
