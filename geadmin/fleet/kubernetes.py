"""Kubernetes discovery: the Triton pods of one namespace, by label selector, through the
official `kubernetes` client, each addressed directly at its pod IP (never through a Service:
a load or unload sent to a Service reaches one pod only).

    kubernetes:NAMESPACE?selector=LABEL_SELECTOR[&port=P][&grpc_port=P][&metrics_port=P]
                        [&kubeconfig=PATH][&context=NAME]

- `selector`: a label selector as kubectl takes it (`app.kubernetes.io/name=triton`,
  `app in (triton,triton-310p)`), sent to the API as is.
- ports: a container port name or a number. Defaults: the container port named `http`, else
  8000; `grpc`, else 8001; `metrics`, else 8002. A port given by name that a pod lacks leaves
  that pod out, with a note.
- credentials: `kubeconfig` (and `context`) when given; else the pod's service account when
  running in a pod; else the kubeconfig the client finds (KUBECONFIG, ~/.kube/config). The
  client needs get/list on pods in NAMESPACE: deploy/kubernetes/base/dashboard-rbac.yaml.

Labels of each member (geadmin.fleet.members): node (spec.nodeName), pod, namespace, ascend
(the device-plugin resource the pod asks for, `huawei.com/Ascend910` -> "Ascend910"),
ascend_count, ready ("true"/"false", the pod's Ready condition). A pod that is not Running or
has no IP yet is left out with a line in Found.notes. One request, bounded by `timeout_s`,
never retried; its failures are translated by one table (`explain_status`, `explain_transport`).

Ownership (when the fleet names a `workload`, geadmin.fleet.membership): each pod's controller
chain is read from the API, never from labels (anyone who can create a pod can copy them):
the pod's `ownerReferences` entry with `controller: true` must name the workload itself
(StatefulSet, DaemonSet) or a ReplicaSet whose own controller is the Deployment, and every uid
on the way must be the uid of the object the API returns (an ownerReference written by hand
into a pod names a uid it cannot know without reading it). The reads: `get` on the workload
and on each ReplicaSet the pods name, bounded together by `timeout_s`
(deploy/kubernetes/base/dashboard-rbac.yaml grants them). A read that fails leaves the pods
read-only, with the reason in their Ownership, never an error of the source.
"""

from __future__ import annotations

import ipaddress
import re
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl

from geadmin import outside
from geadmin.errors import ConfigError, DiscoverySourceError
from geadmin.fleet import kubernetes_owners
from geadmin.fleet.members import ASCEND, ASCEND_COUNT, NAMESPACE, NODE, POD, READY, Found, Member
from geadmin.triton.servers import ServerSpec

PREFIX = "kubernetes:"
FORM = ("kubernetes:NAMESPACE?selector=LABEL_SELECTOR[&port=NAME_OR_NUMBER][&grpc_port=NAME_OR_NUMBER]"
        "[&metrics_port=NAME_OR_NUMBER][&kubeconfig=PATH][&context=NAME]")
ASCEND_RESOURCE = "huawei.com/Ascend"  # huawei.com/Ascend910, huawei.com/Ascend310P, ...
# parameter -> (the container port name looked up by default, the number when no port has it)
PORT_DEFAULTS = {"port": ("http", 8000), "grpc_port": ("grpc", 8001), "metrics_port": ("metrics", 8002)}
PARAMETERS = ("selector", *PORT_DEFAULTS, "kubeconfig", "context")
RBAC_FIX = ("grant the account get/list on pods in namespace {namespace}: the Role geadmin-pod-reader and "
            "its RoleBinding in deploy/kubernetes/base/dashboard-rbac.yaml")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class KubernetesTarget:
    namespace: str
    selector: str
    ports: dict[str, str]  # parameter -> what the target gave (a name or a number); absent: default
    kubeconfig: str | None = None
    context: str | None = None


def parse_target(target: str) -> KubernetesTarget:
    """The parts of a `kubernetes:` target (the text after the prefix); ConfigError if malformed."""
    namespace, sep, query = target.strip().partition("?")

    def bad(why: str) -> ConfigError:
        return ConfigError(f"kubernetes discovery target {target!r}: {why}; expected {FORM}")

    if not (sep and _DNS_LABEL.match(namespace) and len(namespace) <= 63):
        raise bad("no namespace (a DNS label such as `geadmin`) before `?`" if not sep or not namespace
                  else f"{namespace!r} is not a namespace name (lowercase letters, digits, '-')")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError as exc:
        raise bad(f"cannot read the parameters ({exc})") from exc
    params: dict[str, str] = {}
    for key, value in pairs:
        if key not in PARAMETERS:
            raise bad(f"unknown parameter {key!r} (known: {', '.join(PARAMETERS)})")
        if key in params:
            raise bad(f"parameter {key!r} given twice")
        params[key] = value.strip()
    if not params.get("selector"):
        raise bad("no `selector=`: name the Triton pods' labels, e.g. selector=app.kubernetes.io/name=triton")
    ports = {key: params[key] for key in PORT_DEFAULTS if key in params}
    for key, value in ports.items():
        if value.isdigit() and not 0 < int(value) < 65536:
            raise bad(f"{key}={value} is not a port number (1-65535)")
        # A port name (IANA_SVC_NAME): lowercase letters, digits, '-', at least one letter.
        name = _PORT_NAME.match(value) and re.search("[a-z]", value) and len(value) <= 15
        if not (value.isdigit() or name):
            raise bad(f"{key}={value!r} is neither a port number nor a container port name")
    return KubernetesTarget(namespace, params["selector"], ports, params.get("kubeconfig") or None,
                  params.get("context") or None)


def discover(target: str, *, timeout_s: float, workload: str | None = None) -> Found:
    """The Running pods of the target's namespace that its selector matches, as fleet members;
    with `workload` ("Deployment/triton"), each with its Ownership checked against it."""
    parsed = parse_target(target)
    if not timeout_s > 0:
        raise ConfigError(f"kubernetes discovery: the timeout must be above 0 s, got {timeout_s}")
    source = PREFIX + target
    deadline = time.monotonic() + timeout_s
    pod_list = _list_pods(parsed, source, timeout_s)
    members: list[Member] = []
    notes: list[str] = []
    for pod in pod_list.get("items") or []:
        member, note = _member(pod, parsed, source)
        if member is not None:
            members.append(member)
        if note:
            notes.append(note)
    if not pod_list.get("items"):
        notes.append(f"no pods in namespace {parsed.namespace} match the selector {parsed.selector!r}")
    if workload and members:
        pods = {str((p.get("metadata") or {}).get("name")): p for p in pod_list.get("items") or []
                if isinstance(p, dict)}
        reader = kubernetes_owners.Reader(_configuration(parsed, source), parsed.namespace, deadline)
        members = [replace(m, ownership=kubernetes_owners.ownership(pods[m.name], workload, reader))
                   for m in members]
    return Found(source, tuple(sorted(members, key=lambda m: m.name)), tuple(notes))


# -- one pod -> one member ----------------------------------------------------------------
def _member(pod: dict[str, Any], target: KubernetesTarget, source: str) -> tuple[Member | None, str]:
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node = str(metadata.get("name") or "?"), str(spec.get("nodeName") or "")
    phase, pod_ip = str(status.get("phase") or "Unknown"), str(status.get("podIP") or "")
    if phase != "Running" or not pod_ip:
        where = f"on node {node}" if node else "not scheduled on a node yet"
        reason = _pending_reason(status)
        return None, (f"pod {name} is {phase} ({where}{'; no IP yet' if not pod_ip else ''}"
                      f"{'; ' + reason if reason else ''}): left out until it runs")
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    named = {str(p["name"]): int(p["containerPort"]) for c in containers for p in c.get("ports") or []
             if isinstance(p, dict) and p.get("name") and p.get("containerPort")}
    ports: dict[str, int] = {}
    for key, (default_name, default_number) in PORT_DEFAULTS.items():
        given = target.ports.get(key)
        if given is None:
            ports[key] = named.get(default_name, default_number)
        elif given.isdigit():
            ports[key] = int(given)
        elif given in named:
            ports[key] = named[given]
        else:
            return None, (f"pod {name} has no container port named {given!r} ({key}; its named ports: "
                          f"{', '.join(sorted(named)) or 'none'}): left out")
    try:
        host = f"[{pod_ip}]" if ipaddress.ip_address(pod_ip).version == 6 else pod_ip
    except ValueError:
        return None, f"pod {name} has an IP geadmin cannot read ({pod_ip!r}): left out"
    http_url = f"http://{host}:{ports['port']}"
    server = ServerSpec(name, http_url, http_url=http_url, grpc_url=f"grpc://{host}:{ports['grpc_port']}",
                        metrics_url=f"http://{host}:{ports['metrics_port']}/metrics")
    labels = {POD: name, NAMESPACE: str(metadata.get("namespace") or target.namespace), READY: _ready(status)}
    if node:
        labels[NODE] = node
    labels.update(_ascend(containers))
    return Member(server, source, labels), ""


def _ready(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return "true" if condition.get("status") == "True" else "false"
    return "false"


def _pending_reason(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "False" and condition.get("message"):
            return str(condition["message"])
    return ""


def _ascend(containers: list[dict[str, Any]]) -> dict[str, str]:
    """{ascend: "Ascend910", ascend_count: "2"} from the containers' device-plugin resources
    (limits, else requests: the two are equal for extended resources), {} for none."""
    kinds: set[str] = set()
    count = 0
    for container in containers:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for key, quantity in asked.items():
            if str(key).startswith(ASCEND_RESOURCE):
                kinds.add(str(key).split("/", 1)[1])
                count += int(quantity) if str(quantity).isdigit() else 0
    if not kinds:
        return {}
    return {ASCEND: ",".join(sorted(kinds)), ASCEND_COUNT: str(count)}


# -- the one request, and its failures ----------------------------------------------------
def _list_pods(target: KubernetesTarget, source: str, timeout_s: float) -> dict[str, Any]:
    from kubernetes import client  # slow to import: only when a Kubernetes source is used

    configuration = _configuration(target, source)
    configuration.retries = False  # one attempt, bounded by timeout_s; the fleet polls again
    host = str(configuration.host)
    try:
        with client.ApiClient(configuration) as api_client:
            # The raw answer (urllib3's), parsed here: no model classes, one JSON parse.
            response: Any = client.CoreV1Api(api_client).list_namespaced_pod(
                target.namespace, label_selector=target.selector, _request_timeout=timeout_s,
                _preload_content=False)
            body = response.read(outside.MAX_ANSWER_BYTES + 1)  # a longer one is refused unparsed
    except client.ApiException as exc:
        raise DiscoverySourceError(f"{source}: {explain_status(exc.status, _api_message(exc), host, target)}",
                                   source=source) from exc
    except Exception as exc:  # urllib3 and socket errors: explain_transport names each kind
        explained = explain_transport(exc, host, timeout_s)
        if explained is None:
            raise
        raise DiscoverySourceError(f"{source}: {explained}", source=source) from exc
    try:
        pod_list = outside.loads(body, what=f"{source}: the pod list {host} answered",
                                 error=lambda message: DiscoverySourceError(message, source=source))
    except ValueError:
        pod_list = None
    if not isinstance(pod_list, dict) or pod_list.get("kind") != "PodList":
        raise DiscoverySourceError(f"{source}: {host} answered, but not with a Kubernetes PodList: is it "
                                   "the API server's address? (check the kubeconfig's cluster server)",
                                   source=source)
    return pod_list


def _configuration(target: KubernetesTarget, source: str) -> Any:
    """The client's configuration: the target's kubeconfig/context, else the pod's service
    account, else the default kubeconfig. A private object: nothing global is changed."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if target.kubeconfig or target.context:
            config.load_kube_config(config_file=target.kubeconfig, context=target.context,
                                    client_configuration=configuration, persist_config=False)
            return configuration
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:  # not in a pod: the kubeconfig, as kubectl would
            config.load_kube_config(client_configuration=configuration, persist_config=False)
    except (config.ConfigException, OSError, ValueError) as exc:
        where = f"the kubeconfig {target.kubeconfig}" if target.kubeconfig else "the default kubeconfig"
        raise DiscoverySourceError(
            f"{source}: no usable Kubernetes credentials ({exc}): not running in a pod, and {where} cannot "
            "be used; set KUBECONFIG or add &kubeconfig=PATH (and &context=NAME) to the target",
            source=source) from exc
    return configuration


def _api_message(exc: Any) -> str:
    """The `message` of the Status object the API answered with, else its reason phrase."""
    try:
        status = outside.loads(exc.body or "", what="the API's error", error=DiscoverySourceError)
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])[:500]
    except (TypeError, ValueError, DiscoverySourceError):
        pass
    return str(exc.reason or "no reason given")


def explain_status(status: int | None, message: str, host: str, target: KubernetesTarget) -> str:
    """What an HTTP status of the API means for discovery, and what to do (one table)."""
    fixes = {
        0: f"the TLS connection to {host} failed ({message}): check the kubeconfig's certificate-authority "
           "and that the server is the cluster's API server",
        400: f"the API at {host} rejected the request ({message}): check the selector "
             f"{target.selector!r} (kubectl's label selector syntax)",
        401: f"the API at {host} refused the credentials (401 Unauthorized: {message}): the token or "
             "client certificate of the kubeconfig context is wrong or expired; renew it",
        403: f"the API at {host} forbids listing pods (403: {message}): "
             + RBAC_FIX.format(namespace=target.namespace),
        404: f"{host} has no pods API (404: {message}): is it a Kubernetes API server? (check the "
             "kubeconfig's cluster server)",
        429: f"the API at {host} is throttling requests (429: {message}): the fleet polls again later",
    }
    if status in fixes:
        return fixes[status]
    if status is not None and status >= 500:
        return f"the API server at {host} failed ({status}: {message}): check the control plane; the fleet " \
               "polls again later"
    return f"the API at {host} answered {status} ({message})"


def explain_transport(exc: BaseException, host: str, timeout_s: float) -> str | None:
    """What a transport failure (urllib3, socket) means, or None for an error that is not one.
    Order matters: urllib3 makes NewConnectionError a subclass of ConnectTimeoutError."""
    import urllib3.exceptions as u3

    reason = getattr(exc, "reason", None) if isinstance(exc, u3.MaxRetryError) else exc
    reason = reason or exc
    table: tuple[tuple[type[BaseException], str], ...] = (
        (u3.NameResolutionError, f"the API server's name in {host} does not resolve"),
        (u3.NewConnectionError, f"nothing answers at {host} (connection refused or unreachable)"),
        (u3.ConnectTimeoutError, f"could not connect to {host} within {timeout_s:g} s"),
        (u3.ReadTimeoutError, f"the API at {host} did not answer within {timeout_s:g} s"),
        (u3.SSLError, f"the TLS connection to {host} failed: check the kubeconfig's certificate-authority"),
        (u3.ProtocolError, f"the connection to {host} broke (reset or closed mid-answer)"),
        (u3.HTTPError, f"the request to {host} failed"),
        (ConnectionRefusedError, f"nothing answers at {host} (connection refused)"),
        (TimeoutError, f"the API at {host} did not answer within {timeout_s:g} s"),
        (OSError, f"the request to {host} failed"),
    )
    for kind, text in table:
        if isinstance(reason, kind):
            return f"{text} ({type(reason).__name__}: {reason}); check that the cluster is reachable"
    return None
