"""The fake deployment controller: one owned ReplicaSet per pod template, through real clients.

Why this exists: ``helm --wait=legacy`` finds a Deployment's new ReplicaSet (by selector, controller
reference and pod template) and waits for it to be ready, and ``kubectl rollout status/history/undo``
read ReplicaSets and their revision annotations.  The embedded cluster runs no pods, so its fake
deployment controller must create, scale, roll over and prune ReplicaSets as
kube-controller-manager's would; garbage collection then removes them with their Deployment.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from support.cluster import Cluster, raw_request

pytestmark = pytest.mark.integration

HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_names = itertools.count(1)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                          "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25",
                                                   "ports": [{"containerPort": 80}]}]}}},
}


@pytest.fixture
def ns(shared_cluster: Cluster) -> str:
    name = f"rs-{next(_names)}"
    shared_cluster.kubectl("create", "namespace", name)
    return name


def wait_until(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting until {what}")
        time.sleep(0.05)


def deployment(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(DEPLOYMENT)
    body["spec"].update(changes)
    return body


def apply(cluster: Cluster, namespace: str, body: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def replica_sets(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    response = raw_request(cluster, "GET", f"/apis/apps/v1/namespaces/{namespace}/replicasets")
    assert response.status == 200, response.body
    items: list[dict[str, Any]] = response.json()["items"]
    return sorted(items, key=lambda rs: int(rs["metadata"]["annotations"][REVISION]))


def scaled(cluster: Cluster, namespace: str) -> list[tuple[str, int]]:
    """(revision, spec.replicas) of every ReplicaSet, oldest revision first."""
    return [(rs["metadata"]["annotations"][REVISION], rs["spec"]["replicas"])
            for rs in replica_sets(cluster, namespace)]


def wait_for_revisions(cluster: Cluster, namespace: str, expected: list[tuple[str, int]]) -> list[dict[str, Any]]:
    wait_until(f"ReplicaSets (revision, replicas) are {expected}", lambda: scaled(cluster, namespace) == expected)
    return replica_sets(cluster, namespace)


def rollout_status(cluster: Cluster, namespace: str) -> str:
    return cluster.kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=20s").stdout.strip()


def test_deployment_gets_an_owned_ready_replica_set(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, DEPLOYMENT)
    deploy = shared_cluster.get_json("deployment", "web", "-n", ns)
    [rs] = wait_for_revisions(shared_cluster, ns, [("1", 1)])
    template_hash = rs["metadata"]["labels"][HASH]
    assert rs["metadata"]["name"] == f"web-{template_hash}"
    assert rs["metadata"]["labels"] == {"app": "web", "tier": "front", HASH: template_hash}
    assert rs["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deploy["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", HASH: template_hash}}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", "tier": "front", HASH: template_hash}
    assert rs["spec"]["template"]["spec"] == deploy["spec"]["template"]["spec"]

    assert rollout_status(shared_cluster, ns) == 'deployment "web" successfully rolled out'
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.readyReplicas}=1", f"rs/web-{template_hash}", "-n", ns,
                           "--timeout=20s")
    progressing = {c["type"]: c for c in shared_cluster.get_json("deployment", "web", "-n", ns)["status"]["conditions"]}
    assert progressing["Progressing"]["message"] == f'ReplicaSet "web-{template_hash}" has successfully progressed.'
    [pod] = shared_cluster.get_json("pods", "-n", ns)["items"]
    assert pod["metadata"]["name"].startswith(f"web-{template_hash}-")
    assert len(pod["metadata"]["name"]) == len(f"web-{template_hash}-") + 5
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front", HASH: template_hash}
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    assert pod["status"]["phase"] == "Running"
    deploy = shared_cluster.get_json("deployment", "web", "-n", ns)
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    events = shared_cluster.get_json("events", "-n", ns, "--field-selector", "reason=ScalingReplicaSet")["items"]
    assert [e["message"] for e in events] == [f"Scaled up replica set web-{template_hash} from 0 to 1"]


def test_scaling_the_deployment_scales_its_replica_set(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, DEPLOYMENT)
    wait_for_revisions(shared_cluster, ns, [("1", 1)])
    shared_cluster.kubectl("scale", "deployment/web", "-n", ns, "--replicas=3")
    scale = raw_request(shared_cluster, "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale").json()
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 3} and scale["status"]["selector"] == "app=web"
    [rs] = wait_for_revisions(shared_cluster, ns, [("1", 3)])
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", f"rs/{rs['metadata']['name']}",
                           "-n", ns, "--timeout=20s")
    assert rollout_status(shared_cluster, ns) == 'deployment "web" successfully rolled out'


def test_template_change_rolls_over_and_back(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, DEPLOYMENT)
    [first] = wait_for_revisions(shared_cluster, ns, [("1", 1)])

    shared_cluster.kubectl("set", "image", "deployment/web", "nginx=nginx:1.26", "-n", ns)
    old, new = wait_for_revisions(shared_cluster, ns, [("1", 0), ("2", 1)])
    assert old["metadata"]["name"] == first["metadata"]["name"]
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert new["metadata"]["name"] != first["metadata"]["name"]
    assert rollout_status(shared_cluster, ns) == 'deployment "web" successfully rolled out'
    history = shared_cluster.kubectl("rollout", "history", "deployment/web", "-n", ns).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"], history

    shared_cluster.kubectl("rollout", "undo", "deployment/web", "-n", ns)
    back, newer = wait_for_revisions(shared_cluster, ns, [("2", 0), ("3", 1)])
    assert newer["metadata"]["name"] == first["metadata"]["name"], "the old template's ReplicaSet is reused"
    live = shared_cluster.get_json("deployment", "web", "-n", ns)
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert back["metadata"]["name"] == new["metadata"]["name"]


def test_revision_history_limit_prunes_old_replica_sets(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, deployment(revisionHistoryLimit=1))
    wait_for_revisions(shared_cluster, ns, [("1", 1)])
    for image in ("nginx:1.26", "nginx:1.27"):
        shared_cluster.kubectl("set", "image", "deployment/web", f"nginx={image}", "-n", ns)
    _, current = wait_for_revisions(shared_cluster, ns, [("2", 0), ("3", 1)])
    assert current["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


DELETIONS = [
    ("background", ()),
    ("foreground", ("--cascade=foreground",)),
]


@pytest.mark.parametrize(("how", "flags"), DELETIONS, ids=[row[0] for row in DELETIONS])
def test_deleting_the_deployment_collects_its_replica_sets(shared_cluster: Cluster, ns: str, how: str,
                                                           flags: tuple[str, ...]) -> None:
    apply(shared_cluster, ns, DEPLOYMENT)
    shared_cluster.kubectl("set", "image", "deployment/web", "nginx=nginx:1.26", "-n", ns)
    wait_for_revisions(shared_cluster, ns, [("1", 0), ("2", 1)])
    shared_cluster.kubectl("delete", "deployment", "web", "-n", ns, "--timeout=20s", *flags)
    wait_until(f"the ReplicaSets are collected ({how})", lambda: replica_sets(shared_cluster, ns) == [])
    assert shared_cluster.kubectl("get", "deployments", "-n", ns, "-o", "name").stdout.strip() == ""


def test_orphaned_replica_set_is_adopted_by_a_new_deployment(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, DEPLOYMENT)
    [before] = wait_for_revisions(shared_cluster, ns, [("1", 1)])
    shared_cluster.kubectl("delete", "deployment", "web", "-n", ns, "--cascade=orphan")
    wait_until("the ReplicaSet loses its owner",
               lambda: [rs["metadata"].get("ownerReferences") for rs in replica_sets(shared_cluster, ns)] == [None])

    apply(shared_cluster, ns, DEPLOYMENT)
    uid = shared_cluster.get_json("deployment", "web", "-n", ns)["metadata"]["uid"]
    wait_until("the new Deployment adopts the ReplicaSet",
               lambda: [rs["metadata"].get("ownerReferences", [{}])[0].get("uid")
                        for rs in replica_sets(shared_cluster, ns)] == [uid])
    [after] = replica_sets(shared_cluster, ns)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert rollout_status(shared_cluster, ns) == 'deployment "web" successfully rolled out'
