"""A TEST DOUBLE of the Kubernetes API server: not Kubernetes, and nothing of the product uses it.

No API server can run here (FACTS.md: no kube-apiserver, kind or k3s is reachable), so
tests/integration/test_kubernetes_discovery.py runs geadmin's Kubernetes discovery, through
the official `kubernetes` client, against this: a real HTTP server on 127.0.0.1 that replays
the API responses stored in tests/fixtures/kubernetes/ (see its README: written in the API's
JSON shape and validated against the Kubernetes schemas, not captured from a cluster).

It is as strict as the API server for what discovery touches, and refuses the rest:
- authentication: `Authorization: Bearer TOKEN`, a token it knows, else 401 and the Status
  `Unauthorized`, as the API answers an unknown token;
- authorization: a user may list pods only in the namespaces granted to it (what the RBAC Role
  in deploy/kubernetes grants), else 403 and the Status `Forbidden` naming the user, the verb,
  the resource and the namespace, worded as the API server's RBAC authorizer words it;
- `GET /api/v1/namespaces/NS/pods`, and `GET /apis/apps/v1/namespaces/NS/RESOURCE/NAME` for
  deployments, replicasets, statefulsets and daemonsets (the objects stored in
  `apps-NAMESPACE.json`; one not stored answers 404 `NotFound` naming it, as the API does);
  any other path answers 404 `NotFound` ("the server could not find the requested
  resource"), any other method 405;
- apps objects are authorized apart from pods (`app_grants`: user -> namespaces where it may
  get them), as the RBAC rules are per resource: without the grant, 403 naming the resource
  and the API group `apps`;
- `labelSelector` is parsed with the grammar of apimachinery's labels.Parse (`k=v`, `k==v`,
  `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas) and applied to the
  stored pods, so a selector that matches nothing finds nothing and one that does not parse
  answers 400 `BadRequest`; a namespace without stored pods lists none (as the API does for a
  namespace that does not exist). Query parameters other than `labelSelector` are refused
  (400, naming the double), so a client that starts sending one is noticed.

`set_pod(name, ip=..., ports=...)` replaces a stored pod's IP and container ports, so a test
can point members at real servers on this machine.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.http_doubles import QuietHTTPServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kubernetes"
PODS_PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/pods$")
APPS_PATH = re.compile(r"^/apis/apps/v1/namespaces/(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/"
                       r"(?P<resource>deployments|replicasets|statefulsets|daemonsets)/(?P<name>[a-z0-9][-a-z0-9.]*)$")
KINDS = {"deployments": "Deployment", "replicasets": "ReplicaSet", "statefulsets": "StatefulSet",
         "daemonsets": "DaemonSet"}
# Label keys and values as apimachinery validates them (qualified name; value of <= 63 chars).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}"
_VALUE = rf"({_NAME})?"
_EXISTS = re.compile(rf"^\s*(?P<not>!?)\s*(?P<key>{_KEY})\s*$")
_EQUALS = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_SET = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")


class SelectorError(ValueError):
    pass


def parse_selector(selector: str) -> list[tuple[str, str, frozenset[str]]]:
    """[(key, operator, values)] of a label selector; SelectorError if it does not parse."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    if selector.strip() == "":
        return []
    requirements = []
    for part in parts:
        if match := _SET.match(part):
            values = frozenset(v.strip() for v in match["values"].split(","))
            if not all(re.fullmatch(_VALUE, v) for v in values):
                raise SelectorError(f"unable to parse requirement: invalid label value in {part.strip()!r}")
            requirements.append((match["key"], match["op"], values))
        elif match := _EQUALS.match(part):
            op = "!=" if match["op"] == "!=" else "="
            requirements.append((match["key"], op, frozenset({match["value"]})))
        elif match := _EXISTS.match(part):
            requirements.append((match["key"], "!" if match["not"] else "exists", frozenset()))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return requirements


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for key, op, values in parse_selector(selector):
        present = key in labels
        ok = {"=": present and labels.get(key) in values, "in": present and labels.get(key) in values,
              "!=": not present or labels.get(key) not in values,
              "notin": not present or labels.get(key) not in values,
              "exists": present, "!": not present}[op]
        if not ok:
            return False
    return True


def _fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    user: str | None


@dataclass
class KubernetesApiDouble:
    """The double: `tokens` token -> user name; `grants` user -> namespaces it may list pods in;
    `app_grants` user -> namespaces it may get deployments/replicasets/statefulsets/daemonsets in."""

    tokens: dict[str, str] = field(default_factory=dict)
    grants: dict[str, set[str]] = field(default_factory=dict)
    app_grants: dict[str, set[str]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # namespace -> its stored PodList
    apps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # namespace -> its apps objects

    def __post_init__(self) -> None:
        for path in sorted(FIXTURES.glob("podlist-*.json")):
            pod_list = _fixture(path.name)
            namespace = path.stem.removeprefix("podlist-")
            assert all(p["metadata"]["namespace"] == namespace for p in pod_list["items"]), path
            self.pods[namespace] = pod_list
        for path in sorted(FIXTURES.glob("apps-*.json")):
            namespace = path.stem.removeprefix("apps-")
            self.apps[namespace] = list(_fixture(path.name)["items"])
            assert all(o["metadata"]["namespace"] == namespace for o in self.apps[namespace]), path
        self._server: QuietHTTPServer | None = None

    # -- what a test changes -------------------------------------------------------------
    def set_pod(self, name: str, *, ip: str | None = None, ports: dict[str, int] | None = None) -> None:
        """Give the stored pod `name` another IP and/or other numbers for its named container ports."""
        pod = next(p for pods in self.pods.values() for p in pods["items"] if p["metadata"]["name"] == name)
        if ip is not None:
            pod["status"]["podIP"] = ip
            pod["status"]["podIPs"] = [{"ip": ip}]
        for container in pod["spec"]["containers"]:
            for port in container.get("ports", []):
                if ports and port.get("name") in ports:
                    port["containerPort"] = ports[port["name"]]

    def write_kubeconfig(self, path: Path, *, token: str, context: str = "double") -> Path:
        """A kubeconfig whose context `context` points at this double with `token`."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": "double", "user": "user"}}],
        }
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
        return path

    # -- serving --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None, "start the double first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, method: str, raw_path: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query, keep_blank_values=True)
        token = authorization.removeprefix("Bearer ").strip() if authorization else ""
        user = self.tokens.get(token) if authorization and authorization.startswith("Bearer ") else None
        self.requests.append(Request(method, parts.path, query, user))
        if user is None:
            return 401, _fixture("status-401-unauthorized.json")
        if (apps := APPS_PATH.match(parts.path)) is not None and method == "GET":
            return self._get_app(user, apps["namespace"], apps["resource"], apps["name"], query)
        match = PODS_PATH.match(parts.path)
        if match is None:
            return 404, _fixture("status-404-notfound.json")
        if method != "GET":
            return 405, {**_fixture("status-404-notfound.json"), "reason": "MethodNotAllowed", "code": 405,
                         "message": f"the double serves GET only, not {method}"}
        namespace = match["namespace"]
        if namespace not in self.grants.get(user, set()):
            status = _fixture("status-403-forbidden.json")
            status["message"] = (f'pods is forbidden: User "{user}" cannot list resource "pods" '
                                 f'in API group "" in the namespace "{namespace}"')
            return 403, status
        unknown = sorted(set(query) - {"labelSelector"})
        if unknown:
            return 400, {**_fixture("status-400-badrequest.json"),
                         "message": f"the Kubernetes API double does not implement the parameters {unknown}"}
        selector = query.get("labelSelector", [""])[0]
        stored = self.pods.get(namespace, {"kind": "PodList", "apiVersion": "v1",
                                           "metadata": {"resourceVersion": "48230"}, "items": []})
        try:
            items = [copy.deepcopy(p) for p in stored["items"]
                     if selector_matches(selector, p["metadata"].get("labels", {}))]
        except SelectorError as err:
            return 400, {**_fixture("status-400-badrequest.json"), "message": str(err)}
        return 200, {**stored, "items": items}

    def _get_app(self, user: str, namespace: str, resource: str, name: str,
                 query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if namespace not in self.app_grants.get(user, set()):
            status = _fixture("status-403-forbidden.json")
            status["message"] = (f'{resource}.apps "{name}" is forbidden: User "{user}" cannot get resource '
                                 f'"{resource}" in API group "apps" in the namespace "{namespace}"')
            status["details"] = {"name": name, "group": "apps", "kind": resource}
            return 403, status
        if query:
            unknown = sorted(query)
            return 400, {**_fixture("status-400-badrequest.json"),
                         "message": f"the Kubernetes API double does not implement the parameters {unknown}"}
        for obj in self.apps.get(namespace, []):
            if obj["kind"] == KINDS[resource] and obj["metadata"]["name"] == name:
                return 200, copy.deepcopy(obj)
        status = _fixture("status-404-notfound.json")
        status["message"] = f'{resource}.apps "{name}" not found'
        status["details"] = {"name": name, "group": "apps", "kind": resource}
        return 404, status

    def start(self) -> KubernetesApiDouble:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method: str) -> None:
                status, body = double.answer(method, self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply("GET")

            def do_POST(self) -> None:
                self._reply("POST")

            def log_message(self, *args: object) -> None:
                pass

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextmanager
def running(**kwargs: Any) -> Iterator[KubernetesApiDouble]:
    double = KubernetesApiDouble(**kwargs).start()
    try:
        yield double
    finally:
        double.stop()
