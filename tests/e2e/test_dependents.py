"""Dependent resources end to end: owner references, dependent watches, GC, triggers.

Every transition here is driven by an event of a child or a related object: the
reconcile period stays at its 10h default, so a resync can never be what made a
test pass.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.cluster import REPO, Cluster
from support.metrics import parse_samples, sample
from support.operator import OperatorProcess, apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dependents"
StartOperator = Callable[..., OperatorProcess]




def successful_generation(cluster: Cluster, generation: int, *ref: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, *ref)
    if not obj:
        return None
    found = condition(obj, "Successful")
    ok = found and found["status"] == "True" and obj["status"].get("observedGeneration") == generation
    return obj if ok else None


def run_count(operator: OperatorProcess, name: str, kind: str) -> int:
    return len([r for r in operator.runs(name, kind) if not r.get("finalizer")])


def idle(operator: OperatorProcess, kind: str) -> bool:
    """No reconcile of ``kind`` running or waiting to run, as the operator's /metrics says."""
    address = operator.endpoint("metrics")
    if not address:
        return False
    with urllib.request.urlopen(address + "/metrics", timeout=10) as response:
        samples = parse_samples(response.read().decode())
    return sample(samples, "controller_runtime_active_workers", controller=kind) == 0 and \
        sample(samples, "workqueue_depth", name=kind) == 0


def settle(operator: OperatorProcess, name: str, kind: str, quiet: float = 4.0) -> int:
    """Wait until no run of the resource finished for ``quiet`` seconds (our own restores trigger one more)
    and none is running or queued (on a loaded machine a run outlasts the quiet period)."""
    deadline = time.monotonic() + 120
    count, since = run_count(operator, name, kind), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        current = run_count(operator, name, kind)
        if current != count:
            count, since = current, time.monotonic()
        elif time.monotonic() - since >= quiet and idle(operator, kind):
            return count
    pytest.fail(f"{kind} {name} kept being reconciled for 120 s")


@pytest.fixture(scope="module")
def module_cluster(shared_cluster: Cluster) -> Cluster:
    """The module's namespace on the session's cluster, with the CRDs of these tests."""
    for kind in ("App", "Applied"):
        apply(shared_cluster, open_crd(kind))
    shared_cluster.kubectl("apply", "-f", str(REPO / "config" / "crd"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    return shared_cluster


def test_owned_children_are_watched_restored_and_collected(module_cluster: Cluster, tmp_path: Path) -> None:
    cluster = module_cluster
    operator = OperatorProcess(cluster, FIXTURES / "watches.yaml", tmp_path)
    try:
        apply(cluster, {"apiVersion": "e2e.hybrid.dev/v1", "kind": "App",
                        "metadata": {"name": "a1"}, "spec": {"size": 1}})
        owner = wait_for(lambda: successful_generation(cluster, 1, "app", "a1"), "App a1 to succeed")
        uid = owner["metadata"]["uid"]
        reference = {"apiVersion": "e2e.hybrid.dev/v1", "kind": "App", "name": "a1", "uid": uid}

        # namespaced children carry an owner reference, the cluster-scoped one the SDK's annotations
        for child in (("deployment", "a1-web"), ("service", "a1-svc")):
            assert cluster.get_json(*child)["metadata"]["ownerReferences"] == [reference]
        role = cluster.get_json("clusterrole", f"{cluster.namespace}-a1-reader")
        assert "ownerReferences" not in role["metadata"]
        assert role["metadata"]["annotations"]["operator-sdk/primary-resource"] == f"{cluster.namespace}/a1"
        assert role["metadata"]["annotations"]["operator-sdk/primary-resource-type"] == "App.e2e.hybrid.dev"
        # the child kinds are kept in a ConfigMap of the operator's own, never on the owner
        owner_annotations = get_or_none(cluster, "app", "a1")["metadata"].get("annotations") or {}
        assert "hybrid-operator.dev/dependent-kinds" not in owner_annotations
        kinds = cluster.get_json("configmap", "hybrid-operator-dependents")["data"]["App.e2e.hybrid.dev"]
        assert set(kinds.splitlines()) >= {"apps/v1/Deployment", "/v1/Service",
                                           "rbac.authorization.k8s.io/v1/ClusterRole"}

        # a deleted child brings the owner back at once (the period is 10h)
        runs = run_count(operator, "a1", "App")
        cluster.kubectl("delete", "deployment", "a1-web")
        wait_for(lambda: get_or_none(cluster, "deployment", "a1-web"), "the Deployment to be re-created", timeout=60)
        wait_for(lambda: run_count(operator, "a1", "App") > runs, "the run that re-created it to finish")

        # an edited child is restored
        cluster.kubectl("patch", "service", "a1-svc", "--type", "merge", "-p",
                        json.dumps({"spec": {"ports": [{"port": 80, "targetPort": 9999}]}}))
        wait_for(lambda: cluster.get_json("service", "a1-svc")["spec"]["ports"][0]["targetPort"] == 8080,
                 "the Service to be restored", timeout=60)

        # status-only changes of a child cause no reconcile (no loop with a flapping controller)
        # twice: the Service restore's own write event brings one more run, which may start after a first settle
        settle(operator, "a1", "App")
        settled = settle(operator, "a1", "App")
        for flap in range(6):
            cluster.kubectl("patch", "deployment", "a1-web", "--subresource=status", "--type", "merge", "-p",
                            json.dumps({"status": {"readyReplicas": flap % 2, "observedGeneration": 99 + flap}}))
            time.sleep(0.3)
        time.sleep(3)
        assert run_count(operator, "a1", "App") == settled, "status changes of a child must not reconcile"
    finally:
        assert operator.stop() == 0

    # after a restart the dependent watches come back from our ConfigMap
    restarted = OperatorProcess(cluster, FIXTURES / "watches.yaml", tmp_path / "second")
    try:
        wait_for(lambda: [r for r in restarted.log_records() if r.get("msg") == "dependent watch started"
                          and r.get("child") == "apps/v1/Deployment"], "the Deployment watch after restart")
        records = restarted.log_records()
        first_watch = next(i for i, r in enumerate(records) if r.get("msg") == "dependent watch started")
        first_run = next((i for i, r in enumerate(records) if r.get("msg") == "run finished"), len(records))
        assert first_watch < first_run, "watches are re-established before any run, from our ConfigMap"
        wait_for(lambda: run_count(restarted, "a1", "App") >= 1, "the startup reconcile")
        before = run_count(restarted, "a1", "App")
        cluster.kubectl("delete", "service", "a1-svc")
        wait_for(lambda: get_or_none(cluster, "service", "a1-svc"), "the Service to be re-created after restart",
                 timeout=60)
        wait_for(lambda: run_count(restarted, "a1", "App") > before, "the run that re-created it to finish")

        # deleting the owner: the finalizer removes the cluster-scoped role, GC the namespaced children
        cluster.kubectl("delete", "app", "a1", "--timeout=90s")
        wait_for(lambda: get_or_none(cluster, "app", "a1") is None, "App a1 to go")
        wait_for(lambda: get_or_none(cluster, "clusterrole", f"{cluster.namespace}-a1-reader") is None,
                 "the role to go")
        wait_for(lambda: get_or_none(cluster, "deployment", "a1-web") is None, "the Deployment to be collected")
        wait_for(lambda: get_or_none(cluster, "service", "a1-svc") is None, "the Service to be collected")
    finally:
        assert restarted.stop() == 0


def test_server_side_applied_child_gets_the_owner_reference(module_cluster: Cluster, tmp_path: Path) -> None:
    cluster = module_cluster
    operator = OperatorProcess(cluster, FIXTURES / "watches.yaml", tmp_path)
    try:
        apply(cluster, {"apiVersion": "e2e.hybrid.dev/v1", "kind": "Applied",
                        "metadata": {"name": "s1"}, "spec": {"color": "teal"}})
        owner = wait_for(lambda: successful_generation(cluster, 1, "applied", "s1"), "Applied s1 to succeed")
        settings = cluster.get_json("configmap", "s1-settings", "--show-managed-fields")
        assert settings["data"] == {"color": "teal"}
        assert settings["metadata"]["ownerReferences"] == [
            {"apiVersion": "e2e.hybrid.dev/v1", "kind": "Applied", "name": "s1", "uid": owner["metadata"]["uid"]}]
        managers = {m["manager"]: m["operation"] for m in settings["metadata"]["managedFields"]}
        assert managers.get("applied-playbook") == "Apply"
    finally:
        assert operator.stop() == 0


def happy(cluster: Cluster, name: str) -> Any:
    obj = get_or_none(cluster, "foo", name)
    return None if obj is None else (obj.get("status") or {}).get("happy")


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}


def test_foo_is_happy_while_its_pod_exists(module_cluster: Cluster, tmp_path: Path) -> None:
    cluster = module_cluster
    operator = OperatorProcess(cluster, REPO / "watches.yaml", tmp_path)
    try:
        cluster.kubectl("apply", "-f", str(REPO / "config" / "samples" / "tutorial_v1_foo.yaml"))
        wait_for(lambda: happy(cluster, "foo-01") is False and happy(cluster, "foo-02") is False,
                 "both Foos to be unhappy (no Pods yet)")
        runs_02 = run_count(operator, "foo-02", "Foo")

        apply(cluster, pod("jack"))
        wait_for(lambda: happy(cluster, "foo-01") is True, "foo-01 to be happy once Pod jack exists")
        time.sleep(2)
        assert happy(cluster, "foo-02") is False
        assert run_count(operator, "foo-02", "Foo") == runs_02, "a Pod foo-02 does not look for changes nothing"

        cluster.kubectl("patch", "foo", "foo-02", "--type", "merge", "-p", '{"spec":{"name":"jack"}}')
        wait_for(lambda: happy(cluster, "foo-02") is True, "foo-02 to be happy after looking for jack")

        cluster.kubectl("delete", "pod", "jack")
        wait_for(lambda: happy(cluster, "foo-01") is False and happy(cluster, "foo-02") is False,
                 "both Foos to be unhappy once Pod jack is gone")
        changed = [r for r in operator.log_records() if r.get("msg") == "related object changed"]
        assert {(r["event"], r["cr"]) for r in changed} >= {("ADDED", "foo-01"), ("DELETED", "foo-01"),
                                                            ("DELETED", "foo-02")}
    finally:
        cluster.kubectl("delete", "foo", "--all")
        assert operator.stop() == 0


def test_helm_children_deletion_triggers_repair(module_cluster: Cluster, tmp_path: Path) -> None:
    cluster = module_cluster
    operator = OperatorProcess(cluster, REPO / "watches.yaml", tmp_path)
    try:
        apply(cluster, {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                        "metadata": {"name": "mc-dep"}, "spec": {"size": 1}})

        def deployed() -> dict[str, Any] | None:
            obj = get_or_none(cluster, "memcached", "mc-dep")
            found = condition(obj, "Deployed") if obj else None
            return obj if found and found["status"] == "True" else None

        wait_for(deployed, "Memcached mc-dep to be deployed")
        services = cluster.get_json("services", "-l", "app.kubernetes.io/instance=mc-dep")["items"]
        assert len(services) == 1
        service = services[0]["metadata"]["name"]
        history = cluster.helm("history", "mc-dep", "-o", "json")
        revisions = len(json.loads(history.stdout))
        cluster.kubectl("delete", "service", service)
        wait_for(lambda: get_or_none(cluster, "service", service), "the chart's Service to be re-created",
                 timeout=60)
        assert len(json.loads(cluster.helm("history", "mc-dep", "-o", "json").stdout)) == revisions

        cluster.kubectl("delete", "memcached", "mc-dep", "--timeout=90s")
        wait_for(lambda: get_or_none(cluster, "service", service) is None, "the release's objects to go")
    finally:
        assert operator.stop() == 0
