"""The simulated node on the real control plane: kube's own controllers make the Pods, the node agent runs them.

`hybrid-operator cluster --control-plane real` starts etcd, kube-apiserver, kube-controller-manager and the
node agent (nodeagent/). These tests drive real kubectl against it and check what roles and charts wait
for: rollouts finish, StatefulSet claims bind (the agent provisions, kcm's PV controller binds), Jobs and
CronJob-made Jobs complete (kcm's job controller counts the Pods the agent finishes), namespaces holding
Pods and claims finish terminating (the agent confirms Pod deletions, deletes Released volumes),
unschedulable Pods stay Pending as kube-scheduler leaves them, Services get EndpointSlices with the Pod
IPs, and the Node stays Ready past kcm's node-lifecycle grace period (the agent's Lease heartbeat).

One control plane for the module (it takes seconds to start); every test works in a namespace of its
own. Needs `make kube` (skipped with one line without the build).
"""

from __future__ import annotations

import ipaddress
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from hybrid_operator.localcluster.realplane import launcher
from support.cluster import wait_until
from support.realplane import RealCluster, needs_build

pytestmark = [pytest.mark.integration, pytest.mark.kube, pytest.mark.slow, needs_build]

NODE = "hybrid-node"
POD_CIDR = ipaddress.ip_network("10.244.0.0/16")
#: kube-controller-manager's --node-monitor-grace-period default (v1.36), and its startup grace
NODE_STARTUP_GRACE = 60.0
#: what kubectl prints for a StatefulSet on kube-apiserver, which defaults spec.updateStrategy.rollingUpdate.partition
#: to 0 (kubectl then reports a "partitioned" roll out whatever the partition)
STATEFULSET_ROLLED_OUT = "partitioned roll out complete: 2 new pods have been updated...\n"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster(tmp_path_factory.mktemp("real-node"))
    cluster.start(timeout=240)
    try:
        yield cluster
    finally:
        if cluster.process is not None:
            assert cluster.stop() == 0


@pytest.fixture
def ns(real: RealCluster) -> str:
    name = f"agent-{uuid.uuid4().hex[:8]}"
    real.kubectl("create", "namespace", name)
    # the serviceaccount controller makes `default` a moment later (the admission of a Pod waits up to ~2 s)
    wait_until("the default ServiceAccount", lambda: real.kubectl(
        "get", "serviceaccount", "default", "-n", name, check=False).returncode == 0, timeout=60)
    return name


def apply(cluster: RealCluster, namespace: str, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(docs))


def pods(cluster: RealCluster, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ("-l", selector) if selector else ()
    items: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, *args)["items"]
    return sorted(items, key=lambda pod: pod["metadata"]["name"])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def labelled_workload(kind: str, name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


def assert_running(pod: dict[str, Any]) -> None:
    """What the simulated kubelet reports for a running Pod, as the real API server stores it."""
    status = pod["status"]
    assert pod["spec"]["nodeName"] == NODE
    assert status["phase"] == "Running"
    assert ipaddress.ip_address(status["podIP"]) in POD_CIDR and status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["hostIP"] == "127.0.0.1"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True",
        "PodScheduled": "True"}
    for container in status["containerStatuses"]:
        assert container["ready"] is True and container["started"] is True and container["restartCount"] == 0
        assert set(container["state"]) == {"running"}
        assert container["containerID"].startswith("containerd://")


def test_a_deployment_rolls_out_on_the_simulated_node(real: RealCluster, ns: str) -> None:
    apply(real, ns, labelled_workload("Deployment", "web", 3))
    result = real.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=120s")
    assert 'deployment "web" successfully rolled out' in result.stdout
    found = pods(real, ns, "app=web")
    assert len(found) == 3
    for pod in found:
        assert_running(pod)
        assert pod["status"]["containerStatuses"][0]["image"] == "docker.io/library/nginx:1.27"
    assert len({pod["status"]["podIP"] for pod in found}) == 3, "every Pod has an IP of its own"
    deployment = real.get_json("deployment", "web", "-n", ns)
    assert deployment["status"]["readyReplicas"] == 3 and deployment["status"]["availableReplicas"] == 3


def test_a_statefulset_gets_its_claims_bound_and_rolls_out(real: RealCluster, ns: str) -> None:
    template = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                       "resources": {"requests": {"storage": "1Gi"}}}}
    apply(real, ns, labelled_workload("StatefulSet", "db", 2, serviceName="db", volumeClaimTemplates=[template]))
    result = real.kubectl("rollout", "status", "statefulset/db", "-n", ns, "--timeout=120s")
    assert result.stdout.endswith(STATEFULSET_ROLLED_OUT), result.stdout
    claims = {c["metadata"]["name"]: c for c in real.get_json("pvc", "-n", ns)["items"]}
    assert sorted(claims) == ["data-db-0", "data-db-1"]
    for claim in claims.values():
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["storageClassName"] == "standard"  # the default class the agent ensured
        annotations = claim["metadata"]["annotations"]
        assert annotations["volume.kubernetes.io/storage-provisioner"] == "hybrid-operator.io/simulated"
        volume = real.get_json("pv", claim["spec"]["volumeName"])
        assert volume["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
        assert volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "hybrid-operator.io/simulated"
        assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        assert volume["status"]["phase"] == "Bound"
    for pod in pods(real, ns, "app=db"):
        assert_running(pod)


def test_a_job_completes(real: RealCluster, ns: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": {"completions": 2,
           "template": {"spec": {"restartPolicy": "Never", "initContainers": [{"name": "init", "image": "busybox"}],
                                 "containers": [{"name": "main", "image": "busybox"}]}}}}
    apply(real, ns, job)
    real.kubectl("wait", "--for=condition=complete", "job/once", "-n", ns, "--timeout=120s")
    done = real.get_json("job", "once", "-n", ns)
    assert done["status"]["succeeded"] == 2
    finished = pods(real, ns, "job-name=once")
    assert len(finished) == 2
    for pod in finished:
        status = pod["status"]
        assert status["phase"] == "Succeeded"
        assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
        assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
        assert condition(pod, "Ready")["reason"] == "PodCompleted"


def test_a_job_made_from_a_cronjob_completes(real: RealCluster, ns: str) -> None:
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
               "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    apply(real, ns, cronjob)
    real.kubectl("create", "job", "manual", "--from=cronjob/nightly", "-n", ns)
    real.kubectl("wait", "--for=condition=complete", "job/manual", "-n", ns, "--timeout=120s")
    assert [p["status"]["phase"] for p in pods(real, ns, "job-name=manual")] == ["Succeeded"]


def test_deleting_a_namespace_with_pods_and_claims_finishes(real: RealCluster, ns: str) -> None:
    template = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                       "resources": {"requests": {"storage": "1Gi"}}}}
    apply(real, ns, labelled_workload("Deployment", "web", 2),
          labelled_workload("StatefulSet", "db", 1, serviceName="db", volumeClaimTemplates=[template]))
    real.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=120s")
    real.kubectl("rollout", "status", "statefulset/db", "-n", ns, "--timeout=120s")
    volume = real.get_json("pvc", "data-db-0", "-n", ns)["spec"]["volumeName"]

    real.kubectl("delete", "namespace", ns, "--wait=false")
    # each Pod bound to the node is deleted for good only when its kubelet (the agent) confirms it
    wait_until(f"namespace {ns} gone", lambda: real.kubectl(
        "get", "namespace", ns, check=False).returncode != 0, timeout=150)
    # its claim went with it: the PV controller Released the volume, the provisioner deleted it
    wait_until(f"volume {volume} deleted", lambda: real.kubectl(
        "get", "pv", volume, check=False).returncode != 0, timeout=60)


def test_a_pod_no_node_matches_stays_pending_unschedulable(real: RealCluster, ns: str) -> None:
    key = f"hybrid.test/{uuid.uuid4().hex[:8]}"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "picky"},
           "spec": {"nodeSelector": {key: "yes"}, "containers": [{"name": "c", "image": "busybox"}]}}
    apply(real, ns, pod)

    def unschedulable() -> dict[str, Any] | None:
        found = real.get_json("pod", "picky", "-n", ns)
        scheduled = [c for c in found["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        return found if scheduled and scheduled[0]["status"] == "False" else None

    pending = wait_until("PodScheduled False", unschedulable, timeout=60)
    scheduled = condition(pending, "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"].startswith("0/1 nodes are available: 1 node(s) didn't match Pod's node "
                                           "affinity/selector.")
    time.sleep(2)
    still = real.get_json("pod", "picky", "-n", ns)
    assert still["status"]["phase"] == "Pending" and "nodeName" not in still["spec"]

    # the node gets the label: the scheduler tries again and binds it, as kube-scheduler does
    real.kubectl("label", "node", NODE, f"{key}=yes")
    try:
        wait_until("the Pod running once the node matches", lambda: real.get_json(
            "pod", "picky", "-n", ns)["status"].get("phase") == "Running", timeout=60)
    finally:
        real.kubectl("label", "node", NODE, f"{key}-")


def test_a_service_gets_endpoint_slices_with_the_pod_ips(real: RealCluster, ns: str) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}}
    apply(real, ns, labelled_workload("Deployment", "web", 2), service)
    real.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=120s")
    ips = {pod["status"]["podIP"] for pod in pods(real, ns, "app=web")}

    def slice_addresses() -> set[str] | None:
        slices = real.get_json("endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")["items"]
        found = {address for s in slices for endpoint in s.get("endpoints") or []
                 if endpoint.get("conditions", {}).get("ready") for address in endpoint["addresses"]}
        return found if found == ips else None

    wait_until("EndpointSlices listing the ready Pods", slice_addresses, timeout=60)
    for s in real.get_json("endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")["items"]:
        assert {e["nodeName"] for e in s["endpoints"]} == {NODE}


def test_a_wait_for_first_consumer_claim_binds_once_a_pod_uses_it(real: RealCluster, ns: str) -> None:
    storage_class = f"late-{ns}"
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
        "provisioner": "hybrid-operator.io/simulated", "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete"}))
    try:
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "lazy"},
                 "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": "2Gi"}}}}
        apply(real, ns, claim)
        time.sleep(2)
        waiting = real.get_json("pvc", "lazy", "-n", ns)
        assert waiting["status"]["phase"] == "Pending"
        assert "volume.kubernetes.io/selected-node" not in waiting["metadata"].get("annotations", {})

        apply(real, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"}, "spec": {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "lazy"}}],
            "containers": [{"name": "c", "image": "busybox"}]}})
        real.kubectl("wait", "--for=condition=Ready", "pod/user", "-n", ns, "--timeout=120s")
        bound = real.get_json("pvc", "lazy", "-n", ns)
        assert bound["status"]["phase"] == "Bound" and bound["status"]["capacity"]["storage"] == "2Gi"
        assert bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == NODE
    finally:
        real.kubectl("delete", "pod", "user", "-n", ns, "--ignore-not-found", "--wait=true", "--timeout=60s")
        real.kubectl("delete", "pvc", "lazy", "-n", ns, "--ignore-not-found", "--wait=true", "--timeout=60s")
        real.kubectl("delete", "storageclass", storage_class)


def test_a_pod_naming_a_missing_service_account_is_refused_by_the_real_server(real: RealCluster, ns: str) -> None:
    overrides = json.dumps({"spec": {"serviceAccountName": "nobody"}})
    result = real.kubectl("run", "lost", "--image=busybox", "-n", ns, f"--overrides={overrides}", check=False)
    assert result.returncode != 0
    assert 'serviceaccount "nobody" not found' in result.stderr, result.stderr
    assert real.kubectl("get", "pod", "lost", "-n", ns, check=False).returncode != 0


def _age(timestamp: str) -> float:
    return (datetime.now(UTC) - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))).total_seconds()


def test_the_node_stays_ready_past_the_node_lifecycle_grace_period(real: RealCluster) -> None:
    assert "node-lifecycle-controller" in launcher.CONTROLLERS  # it marks a silent node Unknown and taints it
    node = real.get_json("node", NODE)
    started = node["metadata"]["creationTimestamp"]
    time.sleep(max(0.0, NODE_STARTUP_GRACE + 10 - _age(started)))  # the other tests of the module ran meanwhile
    node = real.get_json("node", NODE)
    assert _age(node["metadata"]["creationTimestamp"]) > NODE_STARTUP_GRACE
    ready = condition(node, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    assert _age(ready["lastTransitionTime"]) > NODE_STARTUP_GRACE, "Ready never went away"
    assert not node["spec"].get("taints"), node["spec"].get("taints")  # no not-ready/unreachable taint
    lease = real.get_json("lease", NODE, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == NODE and lease["spec"]["leaseDurationSeconds"] == 40
    assert _age(lease["spec"]["renewTime"]) < 15, "the Lease is renewed every 10 s"
    log = Path(real.data_dir / "logs" / "kube-controller-manager.log").read_text()
    assert "Starting node controller" in log  # the node-lifecycle controller did watch it
