"""Kubernetes ownership as the proof that a pod belongs to a fleet (geadmin.fleet.membership,
geadmin.fleet.kubernetes_owners), through the official `kubernetes` client against the
Kubernetes API DOUBLE of tests/support/kubernetes_api_double.py (no API server can run here,
FACTS.md): recorded answers in tests/fixtures/kubernetes/, validated below against the
Kubernetes schemas.

Namespace `serving` holds four pods that all carry Triton's labels (so the selector finds
them all): one owned by Deployment/triton through its ReplicaSet, one owned by another
Deployment (triton-debug), one whose ownerReference names triton's ReplicaSet with a uid that
is not that ReplicaSet's (written by hand), and a bare pod. Only the first gets the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest

from geadmin.errors import FleetError
from geadmin.fleet.discovery import Fleet, discover
from geadmin.fleet.members import Member
from geadmin.fleet.membership import Proof, refuse_unproven
from tests.support.kubernetes_api_double import FIXTURES, KubernetesApiDouble, running

pytestmark = pytest.mark.integration

READER = "system:serviceaccount:geadmin:geadmin-dashboard"
SELECTOR = "app.kubernetes.io/name=triton"
KEY = "fleet-key"
OWNED = "triton-7d4b9c8f6-q8m2x"
OTHER = "triton-debug-5c6d7e8f9-k4n7p"
FORGED = "triton-forged-z9x8w"
BARE = "triton-bare"


@pytest.fixture
def api() -> Iterator[KubernetesApiDouble]:
    with running(tokens={"reader-token": READER}, grants={READER: {"geadmin", "serving"}},
                 app_grants={READER: {"geadmin", "serving"}}) as double:
        yield double


@pytest.fixture
def kubeconfig(api: KubernetesApiDouble, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig", token="reader-token")


def members(kubeconfig: Path, namespace: str, workload: str | None) -> dict[str, Member]:
    source = f"kubernetes:{namespace}?selector={SELECTOR}&kubeconfig={kubeconfig}"
    proof = Proof(workload=workload, where="workload in [[fleet]] 'serving'")
    found = discover(Fleet("serving", (source,), admin_key=KEY, proof=proof), timeout_s=20)
    assert [f.error for f in found.found if f.error] == []
    return {m.name: m for m in found.members}


def test_only_the_pod_the_named_deployment_owns_gets_the_key_labels_prove_nothing(
    kubeconfig: Path, api: KubernetesApiDouble
) -> None:
    found = members(kubeconfig, "serving", "Deployment/triton")
    assert sorted(found) == sorted([OWNED, OTHER, FORGED, BARE])  # the selector found every labelled pod
    owned = found[OWNED]
    assert owned.trust.trusted and owned.spec.admin_key == KEY
    assert owned.trust.why == "owned by Deployment/triton in ns serving through ReplicaSet triton-7d4b9c8f6"
    for name in (OTHER, FORGED, BARE):
        assert not found[name].trust.trusted and found[name].spec.admin_key is None, name
    assert "its controller is Deployment/triton-debug through ReplicaSet triton-debug-5c6d7e8f9" \
        in found[OTHER].trust.why
    assert "it names ReplicaSet triton-7d4b9c8f6 with uid 00000000-0000-4000-8000-000000000000, but that " \
           "ReplicaSet's uid is 7b2f3c4d-5e6f-4a71-9b82-c3d4e5f6a701" in found[FORGED].trust.why
    assert "the pod has no controller (a bare pod; labels prove nothing)" in found[BARE].trust.why
    assert found[OTHER].trust.why.endswith("read-only (proof: workload in [[fleet]] 'serving')")
    # Each object read once: the workload, and each ReplicaSet a pod names.
    reads = sorted(r.path for r in api.requests if r.path.startswith("/apis/"))
    assert reads == ["/apis/apps/v1/namespaces/serving/deployments/triton",
                     "/apis/apps/v1/namespaces/serving/replicasets/triton-7d4b9c8f6",
                     "/apis/apps/v1/namespaces/serving/replicasets/triton-debug-5c6d7e8f9"]
    with pytest.raises(FleetError, match="fleet reload m refused before anything changed: 3 "):
        refuse_unproven(list(found.values()), "fleet reload m")


def test_a_statefulset_s_pods_name_it_directly(kubeconfig: Path) -> None:
    found = members(kubeconfig, "geadmin", "StatefulSet/triton")
    assert {n: m.trust.why for n, m in found.items()} == {
        "triton-0": "owned by StatefulSet/triton in ns geadmin",
        "triton-1": "owned by StatefulSet/triton in ns geadmin"}
    assert all(m.spec.admin_key == KEY for m in found.values())


def test_another_workload_of_the_same_kind_and_labels_gets_no_key(kubeconfig: Path) -> None:
    found = members(kubeconfig, "serving", "Deployment/triton-debug")
    assert [n for n, m in found.items() if m.trust.trusted] == [OTHER]


def test_without_the_rbac_rule_for_apps_nothing_is_proven_and_the_fix_is_named(
    api: KubernetesApiDouble, kubeconfig: Path
) -> None:
    api.app_grants.clear()
    found = members(kubeconfig, "serving", "Deployment/triton")
    assert not any(m.trust.trusted or m.spec.admin_key for m in found.values())
    assert "the API answered 403 to get Deployment/triton in ns serving; grant the dashboard's account get " \
           "on deployments, replicasets" in found[OWNED].trust.why


def test_without_a_workload_no_apps_object_is_read_and_no_pod_gets_the_key(
    api: KubernetesApiDouble, kubeconfig: Path
) -> None:
    source = f"kubernetes:serving?selector={SELECTOR}&kubeconfig={kubeconfig}"
    found = discover(Fleet("serving", (source,), admin_key=KEY), timeout_s=20)
    assert len(found.members) == 4 and not any(m.trust.trusted or m.spec.admin_key for m in found.members)
    assert not [r for r in api.requests if r.path.startswith("/apis/")]


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("apps-*.json")))
def test_recorded_apps_objects_validate_against_the_kubernetes_schema(name: str) -> None:
    for item in json.loads((FIXTURES / name).read_text())["items"]:
        kubernetes_validate.validate(item, "1.37.0", strict=True)
