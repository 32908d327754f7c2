"""`dns:HOST:PORT[?grpc_port=8001&metrics_port=8002]`: every IPv4 and IPv6 address HOST
resolves to, each one member. In a compose project, a service scaled with
`--scale triton=3` resolves to its three replicas on the project's network; a headless
Kubernetes Service resolves to its ready pods."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import parse_qs

from geadmin.domain import DEFAULT_PORTS
from geadmin.errors import ConfigError, DiscoverySourceError
from geadmin.fleet.members import NODE, Found, Member
from geadmin.triton.servers import ServerSpec

FORM = "dns:HOST:PORT[?grpc_port=N&metrics_port=N]"
MAX_ADDRESSES = 64  # members from one name: an answer with more is cut, with a note
Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order, each once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise DiscoverySourceError(f"DNS: {host!r} does not resolve ({exc.strerror}); check the name "
                                   "(a compose service name resolves only on its project's network)",
                                   source=f"dns:{host}:{port}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def discover(target: str, *, timeout_s: float, resolver: Resolver = resolve) -> Found:
    """`timeout_s` is the caller's to bound (getaddrinfo takes none): geadmin.fleet.discovery
    waits for each source at most that long."""
    del timeout_s
    address, _, query = target.partition("?")
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConfigError(f"dns source {target!r}: use {FORM}")
    port = int(port_text)
    ports = _ports(target, query)
    members, addresses = [], resolver(host.strip("[]"), port)
    cut = (f"{host} resolves to {len(addresses)} addresses: only the first {MAX_ADDRESSES} are members "
           "(geadmin.fleet.dns.MAX_ADDRESSES)",) if len(addresses) > MAX_ADDRESSES else ()
    for ip in addresses[:MAX_ADDRESSES]:
        shown = f"[{ip}]" if ipaddress.ip_address(ip).version == 6 else ip
        spec = ServerSpec(name=f"{host}@{ip}", url=f"http://{shown}:{port}",
                          grpc_url=f"grpc://{shown}:{ports['grpc_port']}",
                          metrics_url=f"http://{shown}:{ports['metrics_port']}/metrics")
        members.append(Member(spec, f"dns:{target}", {NODE: ip}))
    if not members:
        return Found(f"dns:{target}", notes=(f"{host} resolves to no address",))
    return Found(f"dns:{target}", tuple(members), notes=cut)


def _ports(target: str, query: str) -> dict[str, int]:
    ports = {"grpc_port": DEFAULT_PORTS["grpc"], "metrics_port": DEFAULT_PORTS["metrics"]}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key not in ports or len(values) != 1 or not values[0].isdigit():
            raise ConfigError(f"dns source {target!r}: unknown or malformed {key!r}; use {FORM}")
        ports[key] = int(values[0])
    return ports
