"""What discovery finds: a fleet member is one Triton server with where it was found and the
labels its source knows (Kubernetes pod, node and Ascend resources; Prometheus target labels).

Every discovery source is a module with one function, registered in geadmin.fleet.discovery:

    def discover(target: str, *, timeout_s: float) -> Found

`target` is the source's text after its prefix (for `dns:triton:8000`, `triton:8000`). A
malformed target raises ConfigError naming the form expected; a source that does not answer
raises DiscoverySourceError naming the source and the fix. One member the source cannot
address (a pod without an IP yet) is left out with a line in `Found.notes`, never an error.

A source never decides who gets a key: every member it returns is read-only until
geadmin.fleet.membership proves it belongs (`Member.trust`). A Kubernetes source may add
`Member.ownership`, the pod's controller chain as the API reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from geadmin.stack.target import live_stack, server_urls
from geadmin.triton.servers import ServerSpec

# Label keys every source uses for the same thing, so the fleet view groups any mix.
NODE = "node"  # the machine (Kubernetes node, compose host, Prometheus `node`/`instance` host)
POD = "pod"
NAMESPACE = "namespace"
ASCEND = "ascend"  # the Ascend device type a member asked for: Ascend910, Ascend310P, ...
ASCEND_COUNT = "ascend_count"
READY = "ready"  # the source's own readiness ("true" / "false"), where it has one


@dataclass(frozen=True)
class Trust:
    """Whether geadmin sends this member the admin key and changes it (`trusted`), and why,
    in one sentence an operator can act on."""

    trusted: bool
    why: str

    @property
    def word(self) -> str:
        return "trusted" if self.trusted else "read-only"


UNCHECKED = Trust(False, "not checked for membership: read-only")


@dataclass(frozen=True)
class Ownership:
    """What the Kubernetes API says controls a pod, checked against the workload a fleet names:
    `proven` only when the pod's controller chain (Pod -> ReplicaSet -> Deployment, or Pod ->
    StatefulSet/DaemonSet) reaches `workload` with matching uids."""

    workload: str  # the fleet's, "Deployment/triton"
    namespace: str
    proven: bool
    detail: str  # "owned by Deployment/triton in ns geadmin", or why not


@dataclass(frozen=True)
class Member:
    spec: ServerSpec  # name (unique in its fleet) and endpoints
    source: str  # the source text that found it, e.g. "dns:triton:8000"
    labels: Mapping[str, str] = field(default_factory=dict)
    repository: Path | None = None  # its model repository, where this machine can write it
    trust: Trust = UNCHECKED  # set by geadmin.fleet.membership, never by a source
    ownership: Ownership | None = None  # Kubernetes sources asked to check a workload
    tls_ca: Path | None = None  # reached over grpcs://, its certificate checked against this CA
    # The workspace (GEADMIN_HOME) of the geadmin that serves it, where this machine can write it:
    # a fleet change is audited there too (geadmin.fleet.server_audit). Configured servers only.
    home: Path | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def url(self) -> str:
        return self.spec.url


@dataclass(frozen=True)
class Found:
    """What one source found: its members, and lines about what it left out and why."""

    source: str
    members: tuple[Member, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""  # the source did not answer (DiscoverySourceError's message)


def member_metrics_url(member: Member) -> str:
    """The member's Triton /metrics: its own (the servers file's), else the live stack's when it
    is the stack's Triton, else the settings' port on its host. Without the stack, the embedded
    dashboard's one member was read at the default port 8002 ("faults not read: nothing answers")."""
    return server_urls(member.spec, live_stack()).metrics
