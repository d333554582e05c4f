"""Garbage collection and namespace termination in the embedded cluster, through real clients.

Why this exists: kube-controller-manager's garbage collector and namespace controller are what make
``kubectl delete`` (and helm uninstall, and an operator's CR deletion) remove what an owner created.
Operators and charts rely on it: children carry ownerReferences and are expected to vanish with (or,
when asked, outlive) their owner.  These tests drive kubectl and raw HTTPS against the
``hybrid-operator cluster`` process and check which objects are left, and in which state.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster, raw_request

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parent / "manifests"
HOLD = "example.com/hold"
_names = itertools.count(1)


# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def ns(shared_cluster: Cluster) -> str:
    """A fresh namespace per test, so tests sharing the cluster never see each other's objects."""
    name = f"gc-{next(_names)}"
    shared_cluster.kubectl("create", "namespace", name)
    return name


def wait_until(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting until {what}")
        time.sleep(0.05)


def cm_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def ref(owner: dict[str, Any], *, block: bool | None = None, controller: bool | None = None) -> dict[str, Any]:
    found = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"]}
    if block is not None:
        found["blockOwnerDeletion"] = block
    if controller is not None:
        found["controller"] = controller
    return found


def configmap(cluster: Cluster, namespace: str, name: str, owners: list[dict[str, Any]] | None = None,
              finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    response = raw_request(cluster, "POST", cm_path(namespace), {"metadata": meta, "data": {"k": name}})
    assert response.status == 201, response.body
    created: dict[str, Any] = response.json()
    return created


def fetch(cluster: Cluster, path: str) -> dict[str, Any] | None:
    response = raw_request(cluster, "GET", path)
    if response.status == 404:
        return None
    assert response.status == 200, response.body
    found: dict[str, Any] = response.json()
    return found


def gone(cluster: Cluster, path: str) -> Callable[[], bool]:
    return lambda: fetch(cluster, path) is None


def delete(cluster: Cluster, path: str, policy: str | None = None) -> dict[str, Any]:
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy} if policy else None
    response = raw_request(cluster, "DELETE", path, body)
    assert response.status == 200, response.body
    answered: dict[str, Any] = response.json()
    return answered


def release(cluster: Cluster, namespace: str, name: str) -> None:
    """Remove the test finalizer, as the controller holding it would."""
    cluster.kubectl("patch", "configmap", name, "-n", namespace, "--type=merge", "-p",
                    '{"metadata":{"finalizers":null}}')


# -- background (the default) ---------------------------------------------------------------------


def test_background_deletes_dependents_without_another_live_owner(shared_cluster: Cluster, ns: str) -> None:
    first = configmap(shared_cluster, ns, "first")
    second = configmap(shared_cluster, ns, "second")
    configmap(shared_cluster, ns, "only-first", [ref(first)])
    configmap(shared_cluster, ns, "both", [ref(first), ref(second, block=True)])

    result = shared_cluster.kubectl("delete", "configmap", "first", "-n", ns, "--wait=false")
    assert result.stdout.strip() == 'configmap "first" deleted'
    assert fetch(shared_cluster, cm_path(ns, "first")) is None, "background deletion removes the owner at once"
    wait_until("the dependent owned only by the deleted owner is collected", gone(shared_cluster,
                                                                                  cm_path(ns, "only-first")))
    wait_until("the dead reference is dropped from the dependent with a live owner",
               lambda: (fetch(shared_cluster, cm_path(ns, "both")) or {}).get("metadata", {})
               .get("ownerReferences") == [ref(second, block=True)])
    assert fetch(shared_cluster, cm_path(ns, "second")) is not None


def test_owner_with_finalizer_keeps_background_dependents_until_it_is_gone(shared_cluster: Cluster,
                                                                           ns: str) -> None:
    owner = configmap(shared_cluster, ns, "owner", finalizers=[HOLD])
    configmap(shared_cluster, ns, "child", [ref(owner)])
    deleting = delete(shared_cluster, cm_path(ns, "owner"))
    assert deleting["metadata"]["deletionTimestamp"] and deleting["metadata"]["finalizers"] == [HOLD]
    shared_cluster.kubectl("get", "configmap", "child", "-n", ns)  # a live (if deleting) owner keeps it
    release(shared_cluster, ns, "owner")
    wait_until("the child goes once its owner is really gone", gone(shared_cluster, cm_path(ns, "child")))


# -- foreground ------------------------------------------------------------------------------------


def test_foreground_waits_for_blocking_dependents(shared_cluster: Cluster, ns: str) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    configmap(shared_cluster, ns, "blocking", [ref(owner, block=True)], finalizers=[HOLD])
    configmap(shared_cluster, ns, "loose", [ref(owner)])

    answered = delete(shared_cluster, cm_path(ns, "owner"), "Foreground")
    assert "foregroundDeletion" in answered["metadata"]["finalizers"]
    assert answered["metadata"]["deletionTimestamp"]
    wait_until("the non-blocking dependent is deleted", gone(shared_cluster, cm_path(ns, "loose")))
    wait_until("the blocking dependent is being deleted",
               lambda: bool((fetch(shared_cluster, cm_path(ns, "blocking")) or {})["metadata"]
                            .get("deletionTimestamp")))
    live = shared_cluster.get_json("configmap", "owner", "-n", ns)
    assert live["metadata"]["finalizers"] == ["foregroundDeletion"], "the owner waits for its blocking dependent"

    release(shared_cluster, ns, "blocking")
    wait_until("the owner disappears after its blocking dependent", gone(shared_cluster, cm_path(ns, "owner")))


def test_foreground_is_not_held_by_dependents_without_block_owner_deletion(shared_cluster: Cluster,
                                                                         ns: str) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    configmap(shared_cluster, ns, "held", [ref(owner, block=False)], finalizers=[HOLD])
    shared_cluster.kubectl("delete", "configmap", "owner", "-n", ns, "--cascade=foreground", "--timeout=20s")
    assert fetch(shared_cluster, cm_path(ns, "owner")) is None
    held = shared_cluster.get_json("configmap", "held", "-n", ns)
    assert held["metadata"]["deletionTimestamp"], "the dependent is deleted, only its own finalizer holds it"
    release(shared_cluster, ns, "held")
    wait_until("the released dependent goes", gone(shared_cluster, cm_path(ns, "held")))


def test_foreground_spares_a_dependent_with_another_owner(shared_cluster: Cluster, ns: str) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    other = configmap(shared_cluster, ns, "other")
    configmap(shared_cluster, ns, "shared", [ref(owner, block=True), ref(other)])
    shared_cluster.kubectl("delete", "configmap", "owner", "-n", ns, "--cascade=foreground", "--timeout=20s")
    shared = shared_cluster.get_json("configmap", "shared", "-n", ns)
    assert shared["metadata"]["ownerReferences"] == [ref(other)]
    assert "deletionTimestamp" not in shared["metadata"]


# -- orphan ------------------------------------------------------------------------------------------


ORPHANING = [
    ("kubectl --cascade=orphan",
     lambda c, ns: c.kubectl("delete", "configmap", "owner", "-n", ns, "--cascade=orphan")),
    ("propagationPolicy=Orphan", lambda c, ns: delete(c, cm_path(ns, "owner"), "Orphan")),
    ("orphanDependents=true", lambda c, ns: raw_request(c, "DELETE", cm_path(ns, "owner"),
                                                        {"orphanDependents": True})),
]


@pytest.mark.parametrize(("how", "orphaning"), ORPHANING, ids=[row[0] for row in ORPHANING])
def test_orphan_strips_the_owner_reference(shared_cluster: Cluster, ns: str, how: str,
                                           orphaning: Callable[[Cluster, str], Any]) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    other = configmap(shared_cluster, ns, "other")
    configmap(shared_cluster, ns, "alone", [ref(owner, block=True)])
    configmap(shared_cluster, ns, "shared", [ref(owner), ref(other)])
    orphaning(shared_cluster, ns)
    wait_until(f"the owner deleted with {how} disappears", gone(shared_cluster, cm_path(ns, "owner")))
    alone = shared_cluster.get_json("configmap", "alone", "-n", ns)
    assert "ownerReferences" not in alone["metadata"]
    assert "deletionTimestamp" not in alone["metadata"]
    shared = shared_cluster.get_json("configmap", "shared", "-n", ns)
    assert shared["metadata"]["ownerReferences"] == [ref(other)]


# -- chains, cluster-scoped owners, owners that never were ------------------------------------------


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_chain_is_collected(shared_cluster: Cluster, ns: str, policy: str) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    child = configmap(shared_cluster, ns, "child", [ref(owner, block=True, controller=True)])
    configmap(shared_cluster, ns, "grandchild", [ref(child, block=True, controller=True)])
    delete(shared_cluster, cm_path(ns, "owner"), policy)
    for name in ("grandchild", "child", "owner"):
        wait_until(f"{name} is collected ({policy})", gone(shared_cluster, cm_path(ns, name)))


def test_foreground_chain_waits_bottom_up(shared_cluster: Cluster, ns: str) -> None:
    owner = configmap(shared_cluster, ns, "owner")
    child = configmap(shared_cluster, ns, "child", [ref(owner, block=True)])
    configmap(shared_cluster, ns, "grandchild", [ref(child, block=True)], finalizers=[HOLD])
    delete(shared_cluster, cm_path(ns, "owner"), "Foreground")
    wait_until("the child is deleted in the foreground too (it has dependents)",
               lambda: "foregroundDeletion" in ((fetch(shared_cluster, cm_path(ns, "child")) or {})
                                                .get("metadata", {}).get("finalizers") or []))
    wait_until("the grandchild is being deleted",
               lambda: bool((fetch(shared_cluster, cm_path(ns, "grandchild")) or {})["metadata"]
                            .get("deletionTimestamp")))
    assert shared_cluster.get_json("configmap", "owner", "-n", ns)["metadata"]["deletionTimestamp"]
    release(shared_cluster, ns, "grandchild")
    for name in ("grandchild", "child", "owner"):
        wait_until(f"{name} is gone", gone(shared_cluster, cm_path(ns, name)))


def test_cluster_scoped_owner_collects_namespaced_children(shared_cluster: Cluster, ns: str) -> None:
    other_ns = f"{ns}-b"
    shared_cluster.kubectl("create", "namespace", other_ns)
    role_name = f"{ns}-owner"
    role_body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role_name},
                 "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
    shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(role_body))
    role = shared_cluster.get_json("clusterrole", role_name)
    for namespace in (ns, other_ns):
        configmap(shared_cluster, namespace, "child", [ref(role)])
    shared_cluster.kubectl("delete", "clusterrole", role_name)
    for namespace in (ns, other_ns):
        wait_until(f"the child in {namespace} is collected", gone(shared_cluster, cm_path(namespace, "child")))


def _deleted_owner_ref(cluster: Cluster, namespace: str) -> dict[str, Any]:
    owner = configmap(cluster, namespace, "was-here")
    delete(cluster, cm_path(namespace, "was-here"))
    return ref(owner)


def _other_namespace_owner_ref(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """A namespaced owner in another namespace: kube treats it as absent."""
    elsewhere = f"{namespace}-far"
    cluster.kubectl("create", "namespace", elsewhere)
    return ref(configmap(cluster, elsewhere, "far-owner"))


ABSENT_OWNERS = [
    ("uid that never existed", lambda c, ns: {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                              "uid": str(uuid.uuid4())}),
    ("owner deleted before the dependent was created", _deleted_owner_ref),
    ("namespaced owner in another namespace", _other_namespace_owner_ref),
]


@pytest.mark.parametrize(("case", "make_ref"), ABSENT_OWNERS, ids=[row[0] for row in ABSENT_OWNERS])
def test_dependent_of_an_absent_owner_is_collected(shared_cluster: Cluster, ns: str, case: str,
                                                   make_ref: Callable[[Cluster, str], dict[str, Any]]) -> None:
    owner_ref = make_ref(shared_cluster, ns)
    created = configmap(shared_cluster, ns, "stray", [owner_ref])
    assert created["metadata"]["ownerReferences"] == [owner_ref], "the server accepts it as sent"
    wait_until(f"a dependent whose only owner is absent ({case}) is collected",
               gone(shared_cluster, cm_path(ns, "stray")))


def test_controller_survives_malformed_owner_references(shared_cluster: Cluster, ns: str) -> None:
    for garbage in ("not-a-list", ["not-a-dict"], [{"name": "no-uid"}]):
        body = {"metadata": {"name": "odd", "ownerReferences": garbage}}
        answered = raw_request(shared_cluster, "POST", cm_path(ns), body)
        assert answered.status in (201, 400, 422), answered.body
        raw_request(shared_cluster, "DELETE", cm_path(ns, "odd"))
    owner = configmap(shared_cluster, ns, "owner")
    configmap(shared_cluster, ns, "child", [ref(owner)])
    delete(shared_cluster, cm_path(ns, "owner"))
    wait_until("GC still works afterwards", gone(shared_cluster, cm_path(ns, "child")))


# -- namespaces ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def database_crd(shared_cluster: Cluster) -> None:
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com", "--timeout=20s")


def test_namespace_deletion_removes_everything(shared_cluster: Cluster, ns: str, database_crd: None) -> None:
    shared_cluster.kubectl("apply", "-n", ns, "-f", str(MANIFESTS / "cm.yaml"), "-f", str(MANIFESTS / "deploy.yaml"),
                           "-f", str(MANIFESTS / "db-sample.yaml"))
    shared_cluster.kubectl("create", "secret", "generic", "s", "-n", ns, "--from-literal=a=b")
    contents = ["configmaps", "secrets", "deployments.apps", "databases.example.com"]
    before = shared_cluster.kubectl("get", ",".join(contents), "-n", ns, "-o", "name").stdout.split()
    assert len(before) >= 4, before

    result = shared_cluster.kubectl("delete", "namespace", ns, "--timeout=30s")
    assert result.stdout.strip() == f'namespace "{ns}" deleted'
    missing = shared_cluster.kubectl("get", "namespace", ns, check=False)
    assert missing.returncode == 1 and f'namespaces "{ns}" not found' in missing.stderr
    for path in (cm_path(ns), f"/apis/apps/v1/namespaces/{ns}/deployments",
                 f"/apis/apps/v1/namespaces/{ns}/replicasets", f"/apis/example.com/v1/namespaces/{ns}/databases"):
        assert raw_request(shared_cluster, "GET", path).json()["items"] == [], path


def test_namespace_waits_for_finalizers_and_refuses_new_content(shared_cluster: Cluster, ns: str) -> None:
    configmap(shared_cluster, ns, "held", finalizers=[HOLD])
    configmap(shared_cluster, ns, "free")
    shared_cluster.kubectl("delete", "namespace", ns, "--wait=false")
    wait_until("the free content is removed", gone(shared_cluster, cm_path(ns, "free")))
    namespace = shared_cluster.get_json("namespace", ns)
    assert namespace["status"]["phase"] == "Terminating"
    assert namespace["metadata"]["deletionTimestamp"]
    held = shared_cluster.get_json("configmap", "held", "-n", ns)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [HOLD]

    refused = raw_request(shared_cluster, "POST", cm_path(ns), {"metadata": {"name": "late"}})
    assert refused.status == 403
    status = refused.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (f'configmaps "late" is forbidden: unable to create new content in namespace {ns} '
                                 "because it is being terminated")
    by_kubectl = shared_cluster.kubectl("create", "configmap", "late2", "-n", ns, check=False)
    assert by_kubectl.returncode == 1
    assert by_kubectl.stderr.strip() == (
        'error: failed to create configmap: configmaps "late2" is forbidden: unable to '
        f"create new content in namespace {ns} because it is being terminated")

    release(shared_cluster, ns, "held")
    shared_cluster.kubectl("wait", "--for=delete", f"namespace/{ns}", "--timeout=20s")
    assert fetch(shared_cluster, f"/api/v1/namespaces/{ns}") is None
    listed = json.loads(shared_cluster.kubectl("get", "configmaps", "-A", "-o", "json").stdout)
    assert all(item["metadata"]["namespace"] != ns for item in listed["items"])
