"""Where the fleet's servers are: any mix of sources, each a module with one `discover`.

    servers                               the configured servers (GEADMIN_SERVERS_FILE /
                                          GEADMIN_TRITON_URLS / GEADMIN_TRITON_URL)
    dns:HOST:PORT                         every address HOST resolves to (a compose service
                                          scaled with --scale triton=3 resolves to its replicas)
    prometheus:URL?job=JOB                the active targets of a Prometheus job, with their labels
    kubernetes:NAMESPACE?selector=SEL     pods by label selector, each addressed directly

A fleet is a named list of sources: `[[fleet]]` tables in the servers file, and
GEADMIN_FLEET (comma-separated sources) for the fleet named "default". Without either, the
default fleet is the configured servers. Sources are asked at once; one that does not answer
is reported beside what the others found, never in their way.

Every member found gets its trust from geadmin.fleet.membership: the fleet's admin key only
for a member proven to belong (`workload`, `trusted_networks`, `tls_ca_file` in [[fleet]];
GEADMIN_FLEET_WORKLOAD / _TRUSTED_NETWORKS / _TLS_CA_FILE for the default fleet).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geadmin import settings
from geadmin.domain import Endpoint
from geadmin.errors import ConfigError, DiscoverySourceError
from geadmin.fleet import dns, prometheus_targets
from geadmin.fleet.members import NODE, Found, Member
from geadmin.fleet.membership import Proof, decide, parse_networks, parse_tls_ca, parse_workload
from geadmin.stack.target import Target, explained_by, is_stack_server, live_stack
from geadmin.triton.servers import load_servers, read_key_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_FLEET = "default"
AD_HOC = "ad hoc"  # the fleet of `--source` texts, never trusted with a fleet's key
CONFIGURED = "servers"
DISCOVERY_TIMEOUT_S = 5.0
# Members one discovered source may add: its answer is outside input (a 32 MB target list holds
# ~100k). One cap for every source: the DNS source cuts its answer at the same number.
MAX_MEMBERS = dns.MAX_ADDRESSES

Discover = Callable[..., Found]


def _kubernetes(target: str, *, timeout_s: float, workload: str | None = None) -> Found:
    from geadmin.fleet import kubernetes  # the client takes a second to import: only when asked

    return kubernetes.discover(target, timeout_s=timeout_s, workload=workload)


SOURCES: dict[str, Discover] = {
    "dns": dns.discover,
    "prometheus": prometheus_targets.discover,
    "kubernetes": _kubernetes,
    "k8s": _kubernetes,
}


@dataclass(frozen=True)
class Fleet:
    name: str
    sources: tuple[str, ...]
    repository: Path | None = None  # one model repository every member reads (a shared volume)
    admin_key: str | None = field(default=None, repr=False)  # for the members proven to belong
    proof: Proof = field(default_factory=Proof)  # what proves a discovered member belongs


@dataclass(frozen=True)
class Discovery:
    fleet: Fleet
    members: tuple[Member, ...]
    found: tuple[Found, ...]  # per source, in the fleet's order

    @property
    def problems(self) -> list[str]:
        """One line per source that did not answer, and per member it left out."""
        lines = [f"{f.source}: {f.error}" for f in self.found if f.error]
        return lines + [f"{f.source}: {note}" for f in self.found for note in f.notes]


def fleets(fallback_url: str | None = None) -> dict[str, Fleet]:
    """Every named fleet: the servers file's [[fleet]] tables, GEADMIN_FLEET as "default"."""
    named: dict[str, Fleet] = {}
    file = settings.SERVERS_FILE.get()
    if file:
        named.update(_file_fleets(file))
    env = settings.FLEET.get()
    if env:
        named[DEFAULT_FLEET] = Fleet(DEFAULT_FLEET, tuple(_split(env)), settings.REPOSITORY.get(),
                                     settings.FLEET_ADMIN_KEY.get(), _env_proof())
    named.setdefault(DEFAULT_FLEET, Fleet(DEFAULT_FLEET, (CONFIGURED,)))
    for fleet in named.values():
        for source in fleet.sources:
            check_source(source)
    return named


def fleet_named(name: str | None, sources: Sequence[str] = (), repository: Path | None = None) -> Fleet:
    """`--fleet NAME` (default: "default"), or ad-hoc `--source` texts when given;
    `repository` (`--repository`) replaces the fleet's shared repository."""
    if sources:
        for source in sources:
            check_source(source)
        return Fleet(AD_HOC, tuple(sources), repository,
                     proof=Proof(where="none for ad-hoc --source fleets: name the fleet in [[fleet]]"))
    known = fleets()
    wanted = name or DEFAULT_FLEET
    if wanted not in known:
        raise ConfigError(f"no fleet named {wanted!r}; known: {', '.join(sorted(known))} "
                          "(fleets are [[fleet]] tables in GEADMIN_SERVERS_FILE, or GEADMIN_FLEET)")
    return replace(known[wanted], repository=repository) if repository else known[wanted]


def check_source(source: str) -> None:
    """Raises ConfigError for a source text no module reads."""
    if source == CONFIGURED:
        return
    prefix, sep, _ = source.partition(":")
    if not sep or prefix not in SOURCES:
        raise ConfigError(f"unknown fleet source {source!r}: use servers, dns:HOST:PORT, "
                          "prometheus:URL?job=JOB or kubernetes:NAMESPACE?selector=LABELS")


def discover(fleet: Fleet, *, timeout_s: float = DISCOVERY_TIMEOUT_S) -> Discovery:
    """Every source at once, each bounded by `timeout_s`; members found twice (same URL) once,
    each with its trust (geadmin.fleet.membership)."""
    pool = ThreadPoolExecutor(max_workers=max(1, len(fleet.sources)), thread_name_prefix="discover")
    try:
        futures = [pool.submit(_one, source, timeout_s, fleet.proof.workload) for source in fleet.sources]
        found = []
        for source, future in zip(fleet.sources, futures, strict=True):
            try:
                found.append(capped(future.result(timeout=timeout_s + 1.0)))
            except FutureTimeout:
                found.append(Found(source, error=f"no answer within {timeout_s:g} s"))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a hung lookup never holds the caller
    return Discovery(fleet, tuple(_with_fleet_settings(m, fleet) for m in _merged(found)), tuple(found))


def capped(found: Found) -> Found:
    """At most MAX_MEMBERS of a discovered source's members, with a note of how many were left
    out (a note makes the fleet DEGRADED: servers left out are not seen). The configured servers
    are the operator's own list, never cut."""
    if found.source == CONFIGURED or len(found.members) <= MAX_MEMBERS:
        return found
    note = (f"{len(found.members)} members found, {len(found.members) - MAX_MEMBERS} left out: at most "
            f"{MAX_MEMBERS} per source (geadmin.fleet.discovery.MAX_MEMBERS); narrow the source (its job "
            "or selector) or split it into several sources")
    return replace(found, members=found.members[:MAX_MEMBERS], notes=(*found.notes, note))


def _with_fleet_settings(member: Member, fleet: Fleet) -> Member:
    """The fleet's shared repository, and its trust: a configured server keeps its own key (or
    none); a discovered member gets the fleet's key only when proven to belong."""
    member = replace(member, repository=member.repository or member.spec.repository or fleet.repository)
    return decide(member, fleet.proof, fleet.admin_key, fleet.name)


def _one(source: str, timeout_s: float, workload: str | None = None) -> Found:
    try:
        if source == CONFIGURED:
            return Found(source, tuple(_configured()))
        prefix, _, target = source.partition(":")
        if prefix in ("kubernetes", "k8s"):
            return _kubernetes(target, timeout_s=timeout_s, workload=workload)
        return SOURCES[prefix](target, timeout_s=timeout_s)
    except DiscoverySourceError as exc:
        return Found(source, error=str(exc))


def _configured() -> list[Member]:
    """The configured servers as the CLI and the pages see them: the running stack's Triton with
    the stack's own admin key, repository and workspace (the key it was started with, found in its
    workspace); a server's `home` in the servers file names the workspace of the geadmin serving it."""
    stack = live_stack()
    members = []
    for spec in load_servers(stack.http_url if stack else None):
        target = explained_by(Target(spec), stack)
        labels = {NODE: Endpoint.parse(spec.url).host}
        home = spec.home or (stack.home if stack is not None and is_stack_server(spec.url, stack) else None)
        members.append(Member(target.spec, CONFIGURED, labels, target.repository, home=home))
    return members


def _merged(found: Sequence[Found]) -> list[Member]:
    """One member per server (the first source to find it wins, the others add labels);
    names made unique with the source's number when two sources use the same one."""
    by_url: dict[str, Member] = {}
    for result in found:
        for member in result.members:
            key = _server_key(member.url)
            if key in by_url:
                first = by_url[key]
                # The API's ownership check travels with the address, whichever source came first.
                by_url[key] = replace(first, labels={**member.labels, **first.labels},
                                      ownership=first.ownership or member.ownership,
                                      home=first.home or member.home)  # only a configured server has one
            else:
                by_url[key] = member
    members: list[Member] = []
    taken: set[str] = set()
    suffix: dict[str, int] = {}  # the next number to try per name: each duplicate costs O(1), not O(n)
    for member in by_url.values():
        name = member.name
        if name in taken:
            n = suffix.get(name, 2)
            while f"{name}~{n}" in taken:  # a member may already be called "a~2"
                n += 1
            suffix[name] = n + 1
            name = f"{name}~{n}"
        taken.add(name)
        renamed = member if name == member.name else replace(member, spec=replace(member.spec, name=name))
        members.append(renamed)
    return members


def _server_key(url: str) -> str:
    endpoint = Endpoint.parse(url)
    return f"{endpoint.host}:{endpoint.port}"


def _split(raw: str) -> list[str]:
    """Sources are comma-separated, and a label selector has commas of its own (`a=b,c=d`,
    `in (x,y)`): a comma starts a new source only where a source's prefix follows it."""
    sources: list[str] = []
    for part in (p.strip() for p in raw.split(",")):
        starts = part == CONFIGURED or part.partition(":")[0] in SOURCES
        if sources and not starts:
            sources[-1] += "," + part
        elif part:
            sources.append(part)
    return sources


def _file_fleets(path: Any) -> dict[str, Fleet]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"cannot read servers file {path}: {exc}") from exc
    entries = data.get("fleet", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: fleet must be [[fleet]] tables")
    named = {}
    for number, entry in enumerate(entries, start=1):
        name, sources = (entry.get("name"), entry.get("sources")) if isinstance(entry, dict) else (None, None)
        if not isinstance(name, str) or not name or not isinstance(sources, list) or not sources \
                or not all(isinstance(s, str) for s in sources):
            raise ConfigError(f'{path}: fleet #{number} needs name = "prod" and '
                              'sources = ["dns:triton:8000"]')
        repository, key_file = entry.get("repository"), entry.get("admin_key_file")
        for key, value in (("repository", repository), ("admin_key_file", key_file),
                           ("tls_ca_file", entry.get("tls_ca_file")), ("workload", entry.get("workload"))):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{path}: fleet #{number}: {key} must be a non-empty string")
        named[name] = Fleet(name, tuple(sources), Path(repository).expanduser() if repository else None,
                            read_key_file(f"{path}: fleet #{number}", key_file) if key_file else None,
                            _file_proof(entry, f"{path}: fleet #{number} ({name})"))
    return named


def _file_proof(entry: dict[str, Any], where: str) -> Proof:
    networks, workload, ca = entry.get("trusted_networks"), entry.get("workload"), entry.get("tls_ca_file")
    listed = isinstance(networks, list) and all(isinstance(n, str) for n in networks)
    if networks is not None and not listed:
        raise ConfigError(f'{where}: trusted_networks must be a list of CIDRs, e.g. ["10.0.0.0/8"]')
    return Proof(parse_networks(networks or [], where), parse_workload(workload, where) if workload else None,
                 parse_tls_ca(ca, where) if ca else None,
                 where=f"trusted_networks, workload or tls_ca_file in {where.split(': ', 1)[-1]}")


def _env_proof() -> Proof:
    networks, workload, ca = (settings.FLEET_TRUSTED_NETWORKS.get(), settings.FLEET_WORKLOAD.get(),
                              settings.FLEET_TLS_CA_FILE.get())
    listed = [n for n in (networks or "").split(",") if n.strip()]
    return Proof(parse_networks(listed, settings.FLEET_TRUSTED_NETWORKS.env_name),
                 parse_workload(workload, settings.FLEET_WORKLOAD.env_name) if workload else None,
                 parse_tls_ca(str(ca), settings.FLEET_TLS_CA_FILE.env_name) if ca else None)
