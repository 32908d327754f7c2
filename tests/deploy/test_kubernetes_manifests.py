"""deploy/kubernetes: the kustomize base and every overlay, rendered and checked offline.

No kubectl, kustomize or API server runs here (FACTS.md). tests/support/kube_render.py renders
the subset of kustomize the manifests use (and refuses the rest); every rendered object is then
validated against the Kubernetes OpenAPI schemas of `kubernetes-validate` (strict: unknown
fields fail), for the oldest and the newest Kubernetes version the package ships. The custom
resources (Prometheus Operator PodMonitor, Volcano Queue) have no schema there: they are checked
against the minimal schemas in tests/deploy/kubernetes_schemas/, which say so. On top of the
schemas, `problems()` checks what a schema cannot: Services select the Triton pods and name
ports that exist, probes hit Triton's health endpoints, the RBAC is read-only, the driver
mounts are compose.yaml's, each overlay asks for its Ascend resource. The planted tests at the
end run the same checks on broken copies and prove they fail.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from geadmin.errors import ConfigError
from geadmin.fleet.kubernetes import PREFIX, parse_target
from tests.support.deploy import ROOT
from tests.support.kube_render import RenderError, describe, render
from tests.support.kubernetes_api_double import selector_matches

MANIFESTS = ROOT / "deploy" / "kubernetes"
SCHEMAS = Path(__file__).parent / "kubernetes_schemas"
DOCS = ROOT / "docs" / "guide" / "kubernetes.md"
# The oldest and the newest schema set of kubernetes-validate 1.37.
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")
CUSTOM_SCHEMAS = {
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor-monitoring-v1.yaml",
    ("scheduling.volcano.sh/v1beta1", "Queue"): "queue-scheduling-v1beta1.yaml",
}
OVERLAYS = {
    "ascend910": "huawei.com/Ascend910",
    "ascend310p": "huawei.com/Ascend310P",
    "volcano": "huawei.com/Ascend910",
}
READ_VERBS = {"get", "list", "watch"}
OWNER_RESOURCES = {"deployments", "replicasets", "statefulsets", "daemonsets"}
Object = dict[str, Any]


def kustomizations() -> list[str]:
    return ["base", *(f"overlays/{name}" for name in OVERLAYS)]


# -- schema validation ------------------------------------------------------------------
@lru_cache(maxsize=8)
def custom_schema(file: str) -> Object:
    return dict(yaml.safe_load((SCHEMAS / file).read_text(encoding="utf-8")))


def schema_errors(obj: Object) -> list[str]:
    """Every schema violation of `obj`, with the object and the field."""
    custom = CUSTOM_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if custom:
        validator = jsonschema.Draft202012Validator(custom_schema(custom))
        return [
            f"{describe(obj)}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(obj)
        ]
    errors = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(
                f"{describe(obj)} (Kubernetes {version}): "
                f"{'.'.join(map(str, err.absolute_path))}: {err.message}"
            )
        except kubernetes_validate.utils.SchemaNotFoundError as err:
            errors.append(f"{describe(obj)}: {err.message}: add a minimal schema to {SCHEMAS}")
    return errors


# -- what a schema cannot see -----------------------------------------------------------
def by_kind(objects: list[Object], kind: str) -> list[Object]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Object], kind: str, name: str) -> Object:
    found = [obj for obj in by_kind(objects, kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def containers(workload: Object) -> list[Object]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def port_names(workload: Object) -> dict[str, int]:
    return {
        p["name"]: p["containerPort"] for c in containers(workload) for p in c.get("ports", []) if "name" in p
    }


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def workload_problems(objects: list[Object]) -> Iterator[str]:
    for workload in by_kind(objects, "StatefulSet") + by_kind(objects, "Deployment"):
        name = workload["metadata"]["name"]
        template = workload["spec"]["template"]
        if not selects(workload["spec"]["selector"]["matchLabels"], template["metadata"]["labels"]):
            yield f"{name}: its selector does not match its own pod template"
        volumes = {v["name"] for v in template["spec"].get("volumes", [])}
        ports = port_names(workload)
        for container in containers(workload):
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    yield f"{name}/{container['name']}: mounts undefined volume {mount['name']!r}"
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                port = container.get(probe, {}).get("httpGet", {}).get("port")
                if probe not in container:
                    yield f"{name}/{container['name']}: no {probe}"
                elif isinstance(port, str) and port not in ports:
                    yield f"{name}/{container['name']}: {probe} names no port of the container: {port!r}"
        account = template["spec"].get("serviceAccountName")
        if account and not [
            sa for sa in by_kind(objects, "ServiceAccount") if sa["metadata"]["name"] == account
        ]:
            yield f"{name}: service account {account!r} is not defined"


def service_problems(objects: list[Object]) -> Iterator[str]:
    workloads = by_kind(objects, "StatefulSet") + by_kind(objects, "Deployment")
    for service in by_kind(objects, "Service"):
        name, spec = service["metadata"]["name"], service["spec"]
        targets = [
            w
            for w in workloads
            if selects(spec.get("selector", {}), w["spec"]["template"]["metadata"]["labels"])
        ]
        if not targets:
            yield f"Service {name}: selects no pods of these manifests"
            continue
        for port in spec["ports"]:
            target = port.get("targetPort", port["port"])
            if isinstance(target, str) and any(target not in port_names(w) for w in targets):
                yield f"Service {name}: targetPort {target!r} is no named port of the pods it selects"
    triton = one(objects, "StatefulSet", "triton")
    headless = [
        s for s in by_kind(objects, "Service") if s["metadata"]["name"] == triton["spec"]["serviceName"]
    ]
    if not headless or headless[0]["spec"].get("clusterIP") != "None":
        yield "the StatefulSet's serviceName is not a headless Service (clusterIP: None)"
    elif not headless[0]["spec"].get("publishNotReadyAddresses"):
        yield "the headless Service hides not-ready Triton pods (publishNotReadyAddresses)"


def triton_problems(objects: list[Object]) -> Iterator[str]:
    triton = one(objects, "StatefulSet", "triton")
    (container,) = containers(triton)
    if "--model-control-mode=explicit" not in container.get("args", []):
        yield "triton: not started with --model-control-mode=explicit"
    expected = {
        "startupProbe": "/v2/health/live",
        "livenessProbe": "/v2/health/live",
        "readinessProbe": "/v2/health/ready",
    }
    for probe, path in expected.items():
        if container.get(probe, {}).get("httpGet", {}).get("path") != path:
            yield f"triton: {probe} does not GET {path}"
    if port_names(triton) != {"http": 8000, "grpc": 8001, "metrics": 8002}:
        yield f"triton: ports are {port_names(triton)}, expected http 8000, grpc 8001, metrics 8002"
    if one(objects, "PersistentVolumeClaim", "model-repository")["spec"]["accessModes"] != ["ReadWriteMany"]:
        yield "the model repository volume is not ReadWriteMany (every replica and the dashboard read it)"
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    if not mounts.get("/models", {}).get("readOnly"):
        yield "triton: the model repository is not mounted read-only at /models"
    volumes = {v["name"]: v for v in triton["spec"]["template"]["spec"]["volumes"]}
    host = {
        m["mountPath"]: (volumes[m["name"]]["hostPath"]["path"], bool(m.get("readOnly")))
        for m in container.get("volumeMounts", [])
        if "hostPath" in volumes.get(m["name"], {})
    }
    if host != compose_driver_mounts():
        yield f"triton: driver hostPath mounts {host} differ from compose.yaml's {compose_driver_mounts()}"
    # A restarted container is a new one: the loader's state must outlive it (a crash loop otherwise).
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    state = env.get("TRITON_LOAD_STATE", "")
    kept = mounts.get(str(PurePosixPath(state).parent), {}) if state else {}
    if "emptyDir" not in volumes.get(kept.get("name", ""), {}):
        yield f"triton: TRITON_LOAD_STATE ({state or 'unset'}) is not on an emptyDir the pod keeps"


def monitor_problems(objects: list[Object]) -> Iterator[str]:
    triton = one(objects, "StatefulSet", "triton")
    for monitor in by_kind(objects, "PodMonitor"):
        if not selects(
            monitor["spec"]["selector"].get("matchLabels", {}),
            triton["spec"]["template"]["metadata"]["labels"],
        ):
            yield f"PodMonitor {monitor['metadata']['name']}: does not select the Triton pods"
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            if port_names(triton).get(endpoint["port"]) != 8002:
                yield f"PodMonitor: port {endpoint['port']!r} is not Triton's metrics port 8002"
    if not by_kind(objects, "PodMonitor"):
        yield "no PodMonitor for Triton's metrics"


# Who the NetworkPolicy must let in, and to which of Triton's ports; and who it must keep out.
# A source: (its namespace, its pod's labels); every namespace carries kubernetes.io/metadata.name.
PROMETHEUS_NAMESPACE = "monitoring"
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}  # the Prometheus Operator's pods
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def policy_ports(rule: Object, triton: Object) -> set[int]:
    """The ports of Triton a rule opens (no `ports`: every one); a name resolves to the pod's port."""
    named = port_names(triton)
    if not rule.get("ports"):
        return set(named.values())
    opened = set()
    for entry in rule["ports"]:
        port = entry.get("port")
        number = named.get(port) if isinstance(port, str) else port
        if number is None:
            continue
        opened.update(range(number, int(entry.get("endPort", number)) + 1))
    return opened & set(named.values())


def peer_admits(peer: Object, policy_namespace: str, namespace: str, labels: dict[str, str]) -> bool:
    """Kubernetes' rule for one `from` entry and a pod source (matchLabels only: see selector_problems)."""
    if "ipBlock" in peer:
        return True  # an address range admits whatever pod holds those addresses
    if "namespaceSelector" in peer:
        wanted = peer["namespaceSelector"].get("matchLabels", {})
        if not all({NAMESPACE_LABEL: namespace}.get(k) == v for k, v in wanted.items()):
            return False
    elif namespace != policy_namespace:
        return False
    wanted_pods = peer.get("podSelector", {}).get("matchLabels", {})
    return all(labels.get(k) == v for k, v in wanted_pods.items())


def admitted(objects: list[Object], namespace: str, labels: dict[str, str]) -> set[int]:
    """The Triton ports a pod with `labels` in `namespace` may open under these manifests' policies
    (every port when no policy selects the Triton pods: Kubernetes isolates only selected pods)."""
    triton = one(objects, "StatefulSet", "triton")
    pod_labels = triton["spec"]["template"]["metadata"]["labels"]
    policies = [
        p for p in by_kind(objects, "NetworkPolicy")
        if p["metadata"]["namespace"] == triton["metadata"]["namespace"]
        and all(pod_labels.get(k) == v for k, v in p["spec"]["podSelector"].get("matchLabels", {}).items())
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not policies:
        return set(port_names(triton).values())
    opened: set[int] = set()
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from") or [{"namespaceSelector": {}}]  # no `from`: every source
            if any(peer_admits(peer, policy["metadata"]["namespace"], namespace, labels) for peer in peers):
                opened |= policy_ports(rule, triton)
    return opened


def network_problems(objects: list[Object]) -> Iterator[str]:
    """The dashboard reaches all of Triton's ports, Prometheus its metrics, the namespace's pods
    inference (HTTP, gRPC); nobody else anything: not a pod of another namespace, whatever its labels."""
    triton = one(objects, "StatefulSet", "triton")
    ports = port_names(triton)
    home = triton["metadata"]["namespace"]
    dashboard = one(objects, "Deployment", "geadmin-dashboard")["spec"]["template"]["metadata"]["labels"]
    for policy in by_kind(objects, "NetworkPolicy"):
        name = policy["metadata"]["name"]
        rules = policy["spec"].get("ingress") or []
        peers = [peer for rule in rules for peer in rule.get("from") or []]
        selectors = [policy["spec"]["podSelector"]] + [
            selector for peer in peers
            for selector in (peer.get("podSelector"), peer.get("namespaceSelector")) if selector]
        if any("matchExpressions" in selector for selector in selectors):
            yield f"NetworkPolicy {name}: matchExpressions are not checked here"
        if any("ipBlock" in peer for peer in peers):
            yield f"NetworkPolicy {name}: an ipBlock admits addresses, not workloads"
        for entry in (entry for rule in rules for entry in rule.get("ports") or []):
            if isinstance(entry.get("port"), str) and entry["port"] not in ports:
                yield f"NetworkPolicy {name}: port {entry['port']!r} is no named port of Triton"
    expected = {
        "the dashboard": (home, dashboard, set(ports.values())),
        "Prometheus": (PROMETHEUS_NAMESPACE, PROMETHEUS_LABELS, {ports["metrics"]}),
        "a client pod of the namespace": (home, {"app": "client"}, {ports["http"], ports["grpc"]}),
        "a pod of another namespace": ("elsewhere", {"app": "client"}, set()),
        "a pod of another namespace labelled as the dashboard": ("elsewhere", dashboard, set()),
        "a pod of another namespace labelled as Prometheus": ("elsewhere", PROMETHEUS_LABELS, set()),
    }
    for who, (namespace, labels, wanted) in expected.items():
        got = admitted(objects, namespace, labels)
        if got != wanted:
            yield f"NetworkPolicy: {who} reaches Triton's ports {sorted(got)}, expected {sorted(wanted)}"


def rbac_problems(objects: list[Object]) -> Iterator[str]:
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        for obj in by_kind(objects, kind):
            yield f"{describe(obj)}: the dashboard needs no cluster-wide permission"
    roles = {role["metadata"]["name"]: role for role in by_kind(objects, "Role")}
    for role in roles.values():
        for rule in role["rules"]:
            pods = rule.get("apiGroups") == [""] and rule.get("resources") == ["pods"] \
                and set(rule.get("verbs", [])) <= READ_VERBS
            # geadmin/fleet/kubernetes_owners.py: get the workload owning a pod, nothing more
            owners = rule.get("apiGroups") == ["apps"] and set(rule.get("verbs", [])) == {"get"} \
                and set(rule.get("resources", [])) <= OWNER_RESOURCES
            if not (pods or owners):
                name = role["metadata"]["name"]
                yield f"Role {name}: rule {rule} is more than reading pods and their owners"
    accounts = {sa["metadata"]["name"] for sa in by_kind(objects, "ServiceAccount")}
    for binding in by_kind(objects, "RoleBinding"):
        if binding["roleRef"]["kind"] != "Role" or binding["roleRef"]["name"] not in roles:
            yield f"RoleBinding {binding['metadata']['name']}: binds no Role of these manifests"
        for subject in binding["subjects"]:
            if (
                subject["kind"] != "ServiceAccount"
                or subject["name"] not in accounts
                or subject.get("namespace") != binding["metadata"]["namespace"]
            ):
                name = binding["metadata"]["name"]
                yield f"RoleBinding {name}: subject {subject} is no account of these manifests"
    dashboard = one(objects, "Deployment", "geadmin-dashboard")
    account = dashboard["spec"]["template"]["spec"].get("serviceAccountName")
    bound = {s["name"] for b in by_kind(objects, "RoleBinding") for s in b["subjects"]}
    if account not in bound:
        yield "the dashboard's service account may not read pods (fleet discovery needs get/list)"


def fleet_problems(objects: list[Object]) -> Iterator[str]:
    """The dashboard's GEADMIN_FLEET finds the Triton pods: its target read by geadmin's own
    parser (geadmin/fleet/kubernetes.py), its selector applied as the API double applies it."""
    dashboard = one(objects, "Deployment", "geadmin-dashboard")
    env = {e["name"]: e.get("value") for c in containers(dashboard) for e in c.get("env", [])}
    fleet = str(env.get("GEADMIN_FLEET") or "")
    triton = one(objects, "StatefulSet", "triton")
    try:
        target = parse_target(fleet.removeprefix(PREFIX))
    except ConfigError as err:
        yield f"the dashboard's GEADMIN_FLEET {fleet!r} is malformed: {err}"
        return
    labels = triton["spec"]["template"]["metadata"]["labels"]
    if not fleet.startswith(PREFIX) or target.namespace != triton["metadata"]["namespace"] \
            or not selector_matches(target.selector, labels):
        yield f"the dashboard's GEADMIN_FLEET {fleet!r} does not find the Triton pods"
    if "," in fleet:
        yield f"GEADMIN_FLEET {fleet!r} holds a comma, which separates sources in that setting"


def overlay_problems(name: str, objects: list[Object]) -> Iterator[str]:
    triton = one(objects, "StatefulSet", "triton")
    pod = triton["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    resource = OVERLAYS[name]
    limits, requests = container["resources"].get("limits", {}), container["resources"].get("requests", {})
    if not limits.get(resource) or limits.get(resource) != requests.get(resource):
        yield (f"{name}: triton does not ask for {resource} "
               "(limits and requests equal, as extended resources must)")
    if not pod.get("nodeSelector", {}).get("accelerator", "").endswith(resource.split("/")[1]):
        yield f"{name}: triton is not placed on {resource} nodes (nodeSelector accelerator)"
    if name == "volcano":
        queue = (
            triton["spec"]["template"]["metadata"]
            .get("annotations", {})
            .get("scheduling.volcano.sh/queue-name")
        )
        if pod.get("schedulerName") != "volcano":
            yield "volcano: triton is not scheduled by volcano"
        if queue not in {q["metadata"]["name"] for q in by_kind(objects, "Queue")}:
            yield f"volcano: the queue {queue!r} the pods name is not defined"


def problems(directory: Path) -> list[str]:
    """Everything wrong with one kustomization: render errors, schema errors, the checks above."""
    try:
        objects = render(directory)
    except RenderError as err:
        return [f"render: {err}"]
    found = [error for obj in objects for error in schema_errors(obj)]
    if found:
        return found
    for check in (
        workload_problems,
        service_problems,
        triton_problems,
        monitor_problems,
        rbac_problems,
        fleet_problems,
        network_problems,
    ):
        found.extend(check(objects))
    if directory.parent.name == "overlays":
        found.extend(overlay_problems(directory.name, objects))
    return found


@lru_cache(maxsize=1)
def compose_driver_mounts() -> dict[str, tuple[str, bool]]:
    """compose.yaml's Triton bind mounts from the host: container path -> (host path, read-only)."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    found = {}
    for entry in compose["services"]["triton"]["volumes"]:
        parts = str(entry).split(":")
        if parts[0].startswith("/"):
            found[parts[1]] = (parts[0], parts[2:] == ["ro"])
    return found


# -- the real manifests ------------------------------------------------------------------
@pytest.mark.parametrize("name", kustomizations())
def test_kustomization_renders_validates_and_holds_together(name: str) -> None:
    assert problems(MANIFESTS / name) == []


def test_every_kustomization_is_tested() -> None:
    found = sorted(str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml"))
    assert found == sorted(kustomizations())


def test_triton_arguments_are_compose_yamls_without_the_log_file() -> None:
    """The same server flags as compose.yaml's Triton (tests/deploy/test_compose_files.py ties those
    to geadmin's own): only --log-file goes (Triton logs to stdout here), and with it the trace file
    that sits beside the log on the volume compose's dashboard reads (no such shared volume here:
    `geadmin traffic capture` runs where the traces are); the key is the env var's."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    expected = [
        arg.split("${TRITON_ADMIN_KEY", 1)[0] + "$(TRITON_ADMIN_KEY)" if "${TRITON_ADMIN_KEY" in arg else arg
        for arg in compose["services"]["triton"]["command"]
        if not arg.startswith(("--log-file=", "--trace-config="))
    ]
    (container,) = containers(one(render(MANIFESTS / "base"), "StatefulSet", "triton"))
    assert container["args"] == expected
    secret = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert container["env"][0]["name"] == "TRITON_ADMIN_KEY" and secret == {
        "name": "triton-admin-key",
        "key": "admin-key",
    }


def test_compose_driver_mounts_are_found() -> None:
    """The agreement check above compares against something: compose.yaml's five driver mounts."""
    assert set(compose_driver_mounts()) == {
        "/usr/local/dcmi",
        "/usr/local/bin/npu-smi",
        "/usr/local/Ascend/driver/lib64",
        "/usr/local/Ascend/driver/version.info",
        "/etc/ascend_install.info",
    }


def test_overlay_patch_merges_into_the_triton_container_rather_than_adding_one() -> None:
    objects = render(MANIFESTS / "overlays" / "ascend310p")
    (container,) = containers(one(objects, "StatefulSet", "triton"))
    assert container["image"] == "geadmin/triton:0.1.0-310p"
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "8Gi", "huawei.com/Ascend310P": "1"}
    assert len(container["volumeMounts"]) == 8 and container["args"][2] == "--model-control-mode=explicit"


def test_docs_name_every_overlay_and_the_secret() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name in OVERLAYS:
        assert f"kubectl apply -k deploy/kubernetes/overlays/{name}" in text
    assert "create secret generic triton-admin-key --from-literal=admin-key=" in text


# -- planted breakage: the checks above must fail -----------------------------------------
@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    copy_root = tmp_path / "kubernetes"
    shutil.copytree(MANIFESTS, copy_root)
    return copy_root


def test_planted_broken_object_fails_schema_validation() -> None:
    triton = one(render(MANIFESTS / "base"), "StatefulSet", "triton")
    assert schema_errors(triton) == []
    wrong_type = copy.deepcopy(triton)
    wrong_type["spec"]["replicas"] = "two"
    assert any("spec.replicas" in e for e in schema_errors(wrong_type))
    typo = copy.deepcopy(triton)
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert any("readinesProbe" in e for e in schema_errors(typo))
    nameless = copy.deepcopy(triton)
    del nameless["spec"]["template"]["spec"]["containers"][0]["name"]
    assert any("name" in e for e in schema_errors(nameless))


def test_planted_broken_custom_resources_fail_their_minimal_schemas() -> None:
    monitor = one(render(MANIFESTS / "base"), "PodMonitor", "triton")
    assert schema_errors(monitor) == []
    del monitor["spec"]["selector"]
    assert any("selector" in e for e in schema_errors(monitor))
    queue = one(render(MANIFESTS / "overlays" / "volcano"), "Queue", "geadmin-triton")
    assert schema_errors(queue) == []
    queue["spec"]["weight"] = 0
    queue["metadata"]["namespace"] = "geadmin"
    assert len(schema_errors(queue)) == 2
    assert schema_errors({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}) != []


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        (
            "base/triton.yaml",
            "path: /v2/health/ready",
            "path: /v2/health/live",
            "readinessProbe does not GET",
        ),
        ("base/triton.yaml", "--model-control-mode=explicit", "--model-control-mode=poll", "explicit"),
        ("base/triton.yaml", "path: /usr/local/dcmi", "path: /opt/dcmi", "differ from compose.yaml"),
        (
            "base/triton.yaml",
            "name: dshm\n              mountPath",
            "name: shm\n              mountPath",
            "undefined volume",
        ),
        ("base/triton-services.yaml", "clusterIP: None", "clusterIP: 10.0.0.10", "headless"),
        ("base/triton-services.yaml", "targetPort: grpc", "targetPort: grpcs", "targetPort 'grpcs'"),
        (
            "base/dashboard-rbac.yaml",
            '["get", "list", "watch"]',
            '["get", "list", "delete"]',
            "more than reading pods",
        ),
        (
            "base/dashboard-rbac.yaml",
            'verbs: ["get"]',
            'verbs: ["get", "list"]',
            "more than reading pods and their owners",
        ),
        (
            "base/dashboard-rbac.yaml",
            "name: geadmin-dashboard\n    namespace",
            "name: other\n    namespace",
            "no account",
        ),
        (
            "base/dashboard.yaml",
            "selector=app.kubernetes.io/name=triton",
            "selector=app=triton",
            "GEADMIN_FLEET",
        ),
        ("base/dashboard.yaml", "value: kubernetes:geadmin?", "value: kubernetes:Geadmin?", "malformed"),
        (
            "base/dashboard.yaml",
            "name=triton\n",
            "name=triton,app.kubernetes.io/part-of=geadmin\n",
            "holds a comma",
        ),
        (
            "base/kustomization.yaml",
            "  - triton-networkpolicy.yaml\n",
            "",
            "a pod of another namespace reaches",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "- podSelector: {}",
            "- namespaceSelector: {}",
            "a pod of another namespace reaches Triton's ports [8000, 8001]",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "- namespaceSelector:\n            matchLabels:\n"
            "              kubernetes.io/metadata.name: monitoring\n          podSelector:",
            "- podSelector:",
            "Prometheus reaches Triton's ports [], expected [8002]",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "name: geadmin-dashboard\n      ports",
            "name: dashboard\n      ports",
            "the dashboard reaches",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "- podSelector: {}\n      ports:\n",
            "- podSelector: {}\n      ports:\n        - port: 8002\n",
            "a client pod of the namespace reaches",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "- podSelector: {}",
            "- ipBlock:\n            cidr: 10.0.0.0/8",
            "ipBlock",
        ),
        (
            "base/triton-networkpolicy.yaml",
            "ports:\n        - port: metrics",
            "ports:\n        - port: metricz",
            "port 'metricz' is no named port of Triton",
        ),
        ("base/triton-podmonitor.yaml", "port: metrics", "port: http", "metrics port 8002"),
        ("base/kustomization.yaml", "resources:", "namePrefix: x-\nresources:", "not supported"),
        (
            "overlays/ascend910/triton-ascend910.yaml",
            'limits:\n              huawei.com/Ascend910: "1"',
            'limits:\n              huawei.com/Ascend910: "2"',
            "limits and requests equal",
        ),
        ("overlays/ascend910/triton-ascend910.yaml", "nodeSelector:", "nodeSelecter:", "no such field"),
        (
            "overlays/ascend910/triton-ascend910.yaml",
            "name: triton\n  namespace",
            "name: trident\n  namespace",
            "matches 0 objects",
        ),
        (
            "overlays/ascend310p/triton-ascend310p.yaml",
            "image: geadmin",
            "$patch: delete\n          image: geadmin",
            "directives",
        ),
        (
            "overlays/volcano/triton-volcano.yaml",
            "queue-name: geadmin-triton",
            "queue-name: elsewhere",
            "is not defined",
        ),
        ("overlays/volcano/queue.yaml", "weight: 1", "weight: one", "weight"),
    ],
)
def test_planted_breakage_is_found(manifests: Path, file: str, old: str, new: str, expected: str) -> None:
    path = manifests / file
    text = path.read_text(encoding="utf-8")
    assert old in text, f"the planted change no longer applies to {file}: update the test"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    target = manifests / file.split("/")[0] if file.startswith("base/") else path.parent
    found = problems(target)
    assert any(expected in line for line in found), found


def test_a_null_a_primitive_merge_list_or_two_objects_in_a_patch_are_refused(manifests: Path) -> None:
    """Deleting (null) and merging a list of strings (finalizers: patchStrategy merge, no key)
    are strategic-merge features the renderer leaves out: it refuses them instead of guessing."""
    patch = manifests / "overlays" / "ascend910" / "triton-ascend910.yaml"
    base_text = patch.read_text(encoding="utf-8")
    patch.write_text(
        base_text.replace("nodeSelector:", "schedulerName: null\n      nodeSelector:"), encoding="utf-8"
    )
    assert any("null" in line for line in problems(patch.parent))
    patch.write_text(
        base_text.replace(
            "  namespace: geadmin\nspec:", "  namespace: geadmin\n  finalizers: [example.com/keep]\nspec:"
        ),
        encoding="utf-8",
    )
    assert any("lists of primitives" in line for line in problems(patch.parent))
    patch.write_text(base_text + "---\n" + base_text, encoding="utf-8")
    assert any("exactly one object" in line for line in problems(patch.parent))
