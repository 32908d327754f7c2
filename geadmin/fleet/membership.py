"""Who in a fleet is trusted with the admin key: membership before keys.

A server discovery finds (DNS, a Prometheus job, Kubernetes pods) is read-only until it is
proven to belong. The proofs a fleet can configure (`[[fleet]]` in the servers file; the
GEADMIN_FLEET_* settings for the default fleet):

    workload = "Deployment/triton"        Kubernetes: the pod's controller chain, read from the
                                          API with matching uids (Pod -> ReplicaSet -> Deployment,
                                          Pod -> StatefulSet / DaemonSet), reaches this workload
                                          in the source's namespace. A label proves nothing: anyone
                                          who can create a pod can copy Triton's labels.
    trusted_networks = ["10.0.0.0/8"]     any source: the member's address (an IP, never a name
                                          resolved later) lies in one of these networks.
    tls_ca_file = "/etc/geadmin/ca.pem"   the member is reached over gRPC with TLS (grpcs://, on
                                          its gRPC port: Triton's HTTP endpoint has no TLS), and its
                                          certificate chains to this CA for its address. Every call
                                          to it, the keyed ones included, then goes over gRPC.

With no proof configured, no discovered member gets a key. The configured servers (the
servers file's [[server]] tables, GEADMIN_TRITON_URLS, source `servers`) keep their own keys:
whoever wrote the file named them.

A trusted member carries the fleet's key on the calls Triton restricts (geadmin.triton.client
sends it only there); a read-only member carries no key at all, is shown from what Triton
leaves open (geadmin.fleet.readonly), and a write that includes it is refused before anything
changes (`refuse_unproven`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from geadmin.domain import Endpoint
from geadmin.errors import ConfigError, FleetError
from geadmin.fleet.members import Member, Trust

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
CONFIGURED = "servers"  # the source text of the configured servers (geadmin.fleet.discovery)
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a DNS subdomain, as object names are
TLS_CHECK_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Proof:
    """What proves a discovered member belongs to one fleet; `where` names the settings."""

    networks: tuple[Network, ...] = ()
    workload: str | None = None  # "Deployment/triton"
    tls_ca: Path | None = None
    where: str = "GEADMIN_FLEET_TRUSTED_NETWORKS, GEADMIN_FLEET_WORKLOAD or GEADMIN_FLEET_TLS_CA_FILE"

    @property
    def configured(self) -> bool:
        return bool(self.networks or self.workload or self.tls_ca)


def parse_networks(values: Sequence[str], where: str) -> tuple[Network, ...]:
    """CIDR texts -> networks; ConfigError naming the bad one. A network of every address
    (0.0.0.0/0, ::/0) is refused: it would trust whatever answers, which is no proof."""
    networks = []
    for text in values:
        try:
            network = ipaddress.ip_network(str(text).strip(), strict=True)
        except ValueError as exc:
            raise ConfigError(f"{where}: trusted network {text!r} is not a network in CIDR form such as "
                              f"10.0.0.0/8 or fd00::/64 ({exc})") from exc
        if network.prefixlen == 0:
            raise ConfigError(f"{where}: trusted network {text!r} holds every address: that trusts whatever "
                              "answers; name the networks your Triton replicas run in")
        networks.append(network)
    return tuple(networks)


def parse_workload(text: str, where: str) -> str:
    """"Deployment/triton" as given, checked; ConfigError naming the form."""
    kind, sep, name = text.strip().partition("/")
    if not sep or kind not in WORKLOAD_KINDS or not _NAME.match(name):
        raise ConfigError(f"{where}: workload {text!r} must be KIND/NAME with KIND one of "
                          f"{', '.join(WORKLOAD_KINDS)}, e.g. Deployment/triton")
    return f"{kind}/{name}"


def parse_tls_ca(text: str, where: str) -> Path:
    path = Path(text).expanduser()
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{where}: tls_ca_file {str(path)!r} is not a readable PEM CA certificate "
                          f"({exc})") from exc
    return path


def decide(member: Member, proof: Proof, admin_key: str | None, fleet: str) -> Member:
    """`member` with its trust, and the fleet's key only when it is proven to belong."""
    if member.source == CONFIGURED:
        why = ("configured server (servers file): its own admin key" if member.spec.admin_key
               else "configured server (servers file): no admin key configured for it")
        return replace(member, trust=Trust(True, why))
    bare = replace(member, spec=replace(member.spec, admin_key=None))
    if not proof.configured:
        return replace(bare, trust=Trust(False, f"no proof configured: set trusted_networks or workload in "
                                                f"[[fleet]] {fleet!r} ({proof.where})"))
    reasons = []
    for check in (_owned, _in_network, _over_tls):
        proven, why, checked = check(member, proof)
        if proven:
            return replace(checked, spec=replace(checked.spec, admin_key=admin_key), trust=Trust(True, why))
        if why:
            reasons.append(why)
    return replace(bare, trust=Trust(False, "; ".join(reasons) + f": read-only (proof: {proof.where})"))


def _owned(member: Member, proof: Proof) -> tuple[bool, str, Member]:
    if not proof.workload:
        return False, "", member
    ownership = member.ownership
    if ownership is None or ownership.workload != proof.workload:
        return False, f"not a Kubernetes pod checked against {proof.workload}", member
    return ownership.proven, ownership.detail, member


def _in_network(member: Member, proof: Proof) -> tuple[bool, str, Member]:
    if not proof.networks:
        return False, "", member
    urls = (member.spec.url, member.spec.http_url, member.spec.grpc_url)
    hosts = {Endpoint.parse(u).host for u in urls if u}
    shown = ", ".join(f"{n}" for n in proof.networks)
    for host in sorted(hosts):
        try:
            address = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return False, (f"{host} is a name, not an address: a trusted network ({shown}) proves nothing "
                           "for a name resolved later"), member
        inside = next((n for n in proof.networks if address.version == n.version and address in n), None)
        if inside is None:
            return False, f"{address} is outside the trusted networks ({shown})", member
    only = next(iter(hosts))
    network = next(n for n in proof.networks if ipaddress.ip_address(only.strip("[]")) in n)
    return True, f"{only.strip('[]')} in trusted network {network}", member


def _over_tls(member: Member, proof: Proof) -> tuple[bool, str, Member]:
    if proof.tls_ca is None:
        return False, "", member
    grpc = Endpoint.parse(member.spec.grpc_url or member.spec.url)
    problem = check_tls(grpc.host.strip("[]"), grpc.port, proof.tls_ca)
    if problem:
        return False, f"gRPC TLS to {grpc.address} not proven: {problem}", member
    url = replace(grpc, ssl=True).url  # Endpoint brackets an IPv6 host: grpcs://[fd00::5]:8001
    tls = replace(member, spec=replace(member.spec, url=url, grpc_url=url), tls_ca=proof.tls_ca)
    return True, f"gRPC over TLS at {grpc.address}, its certificate chains to {proof.tls_ca}", tls


def check_tls(host: str, port: int, ca: Path, timeout_s: float = TLS_CHECK_TIMEOUT_S) -> str:
    """"" when `host:port` completes a TLS handshake whose certificate chains to `ca` and names
    `host`, else why not. The client then pins the same CA for every call (tls_ca)."""
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            return ""
    except ssl.SSLCertVerificationError as exc:
        return f"its certificate does not chain to {ca} for {host} ({exc.verify_message})"
    except (ssl.SSLError, OSError) as exc:
        return f"no TLS handshake ({type(exc).__name__}: {exc})"


def refuse_unproven(members: Sequence[Member], action: str) -> None:
    """FleetError before anything changes when `members` include one not proven to
    belong: the write would go to a server nobody vouched for (and without a key)."""
    unproven = [m for m in members if not m.trust.trusted]
    if unproven:
        named = "; ".join(f"{m.name} ({m.url}): {m.trust.why}" for m in unproven)
        raise FleetError(f"{action} refused before anything changed: {len(unproven)} member(s) "
                                   f"not proven to belong to the fleet: {named}")
