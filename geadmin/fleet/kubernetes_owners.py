"""Whether a pod belongs to the workload a fleet names, from the Kubernetes API's own records
(geadmin.fleet.kubernetes asks, geadmin.fleet.membership decides on the answer).

    StatefulSet/NAME, DaemonSet/NAME   the pod's controller ownerReference names NAME, kind and
                                       uid the same as the object the API returns for NAME
    Deployment/NAME                    the pod's controller is a ReplicaSet (same uid as the API's),
                                       and that ReplicaSet's controller is the Deployment (same uid)

Labels are never read here: anyone who can create a pod in the namespace can copy them.
Every read is a `get` bounded by what is left of the discovery's deadline; a failed read
(403 without the RBAC rule, 404, a timeout) proves nothing, and says so.
"""

from __future__ import annotations

import json
import time
from typing import Any

from geadmin.fleet.members import Ownership

MAX_BODY_BYTES = 1 << 20  # one object of the API; a bigger answer proves nothing
RBAC_FIX = ("grant the dashboard's account get on deployments, replicasets, statefulsets and daemonsets "
            "(API group apps) in namespace {namespace}: deploy/kubernetes/base/dashboard-rbac.yaml")
_READERS = {"Deployment": "read_namespaced_deployment", "ReplicaSet": "read_namespaced_replica_set",
            "StatefulSet": "read_namespaced_stateful_set", "DaemonSet": "read_namespaced_daemon_set"}


Read = tuple[dict[str, Any] | None, str]  # the object, or None and why not


class Reader:
    """`get` of apps/v1 objects of one namespace, each read once, within `deadline`."""

    def __init__(self, configuration: Any, namespace: str, deadline: float) -> None:
        self.configuration, self.namespace, self.deadline = configuration, namespace, deadline
        self._seen: dict[tuple[str, str], Read] = {}

    def get(self, kind: str, name: str) -> Read:
        """(the object, "") or (None, why it could not be read)."""
        key = (kind, name)
        if key not in self._seen:
            self._seen[key] = self._read(kind, name)
        return self._seen[key]

    def _read(self, kind: str, name: str) -> Read:
        from kubernetes import client  # slow to import: only when a Kubernetes source is used

        left = self.deadline - time.monotonic()
        if left <= 0:
            return None, f"no time left to read {kind}/{name} (the discovery timeout)"
        self.configuration.retries = False
        try:
            with client.ApiClient(self.configuration) as api_client:
                read = getattr(client.AppsV1Api(api_client), _READERS[kind])
                response: Any = read(name, self.namespace, _request_timeout=left, _preload_content=False)
                body = response.data
        except client.ApiException as exc:
            why = f"the API answered {exc.status} to get {kind}/{name} in ns {self.namespace}"
            if exc.status == 403:
                why += "; " + RBAC_FIX.format(namespace=self.namespace)
            return None, why
        except Exception as exc:  # urllib3 and socket errors: this read proves nothing
            return None, f"cannot read {kind}/{name} ({type(exc).__name__}: {exc})"
        if len(body) > MAX_BODY_BYTES:
            return None, f"{kind}/{name}: the answer is over {MAX_BODY_BYTES} bytes"
        try:
            found = json.loads(body)
        except (ValueError, RecursionError):
            found = None
        if not isinstance(found, dict) or found.get("kind") != kind:
            return None, f"the API did not answer get {kind}/{name} with a {kind}"
        return found, ""


def controller(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with `controller: true`, if any (the API allows at most one)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def ownership(pod: dict[str, Any], workload: str, reader: Reader) -> Ownership:
    """Whether `pod` is owned by `workload` ("Deployment/triton") in the reader's namespace."""
    kind, _, name = workload.partition("/")
    namespace = reader.namespace

    def no(why: str) -> Ownership:
        detail = f"not proven owned by {workload} in ns {namespace}: {why}"
        return Ownership(workload, namespace, False, detail)

    ref = controller(pod)
    if ref is None:
        return no("the pod has no controller (a bare pod; labels prove nothing)")
    top, why = reader.get(kind, name)
    if top is None:
        return no(why)
    via = ""
    if kind == "Deployment":
        if ref.get("kind") != "ReplicaSet":
            return no(f"its controller is {ref.get('kind')}/{ref.get('name')}, "
                      f"not a ReplicaSet of {workload}")
        replica_set, why = reader.get("ReplicaSet", str(ref.get("name")))
        if replica_set is None:
            return no(why)
        if _uid(replica_set) != ref.get("uid"):
            return no(f"it names ReplicaSet {ref.get('name')} with uid {ref.get('uid')}, but that "
                      f"ReplicaSet's uid is {_uid(replica_set)} (an ownerReference not written by "
                      "the controller)")
        via = f" through ReplicaSet {ref.get('name')}"
        ref = controller(replica_set) or {}
    if (ref.get("kind"), ref.get("name")) != (kind, name):
        return no(f"its controller is {ref.get('kind')}/{ref.get('name')}{via}")
    if ref.get("uid") != _uid(top):
        return no(f"its owner reference names {workload} with uid {ref.get('uid')}, but {workload}'s uid is "
                  f"{_uid(top)} (an ownerReference not written by the controller)")
    return Ownership(workload, namespace, True, f"owned by {workload} in ns {namespace}{via}")


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
