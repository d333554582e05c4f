"""The simulated node: workloads make Pods, Pods run (or finish), and kubectl/the Python client see a cluster.

Why this exists: charts, roles and operators wait for Pods, not only for workload status; `helm
test` waits for test Pods to succeed; `kubectl get all` should look like a cluster's.  These tests
drive the real kubectl (and the kubernetes Python client) against the server process and check the
Node, the Pods each workload kind makes (names, labels, ownerReferences, status), Jobs and CronJobs
running to completion, namespaces' defaults, the access-review APIs, autoscaling/v1, and
`--no-simulated-node`, which keeps bare objects that are only reported ready.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import pytest
import yaml

from support.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

NODE = "hybrid-node"


@pytest.fixture
def ns(shared_cluster: Cluster) -> str:
    name = f"sim-{uuid.uuid4().hex[:8]}"
    shared_cluster.kubectl("create", "namespace", name)
    return name


def apply(cluster: Cluster, namespace: str, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(docs))


def pods(cluster: Cluster, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ("-l", selector) if selector else ()
    items: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, *args)["items"]
    return sorted(items, key=lambda pod: pod["metadata"]["name"])


def container(name: str = "app", image: str = "nginx:1.27") -> dict[str, Any]:
    return {"name": name, "image": image, "ports": [{"containerPort": 80, "name": "http"}]}


def workload(kind: str, name: str, replicas: int | None = 2, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container()]}}}
    if replicas is not None:
        body["replicas"] = replicas
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


@pytest.fixture(scope="module")
def ticking(shared_cluster: Cluster) -> str:
    """A namespace with a CronJob that fires every minute, made once for the module.

    The on-demand test (first in this file) makes it; the on-schedule test (last) finds its scheduled Job:
    the wait for the next minute boundary (up to 60 s) passes while the tests between them run.
    """
    name = f"sim-{uuid.uuid4().hex[:8]}"
    shared_cluster.kubectl("create", "namespace", name)
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
               "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    apply(shared_cluster, name, cronjob)
    return name


def test_cronjob_runs_on_demand(shared_cluster: Cluster, ticking: str) -> None:
    # what `kubectl create job --from=cronjob/tick` sends (it POSTs protobuf, hence the apply here)
    manual = shared_cluster.kubectl("create", "job", "--from=cronjob/tick", "now", "-n", ticking,
                                    "--dry-run=client", "-o", "yaml").stdout
    shared_cluster.kubectl("apply", "-n", ticking, "-f", "-", input_text=manual)
    shared_cluster.kubectl("wait", "--for=condition=complete", "job/now", "-n", ticking, "--timeout=20s")


def test_the_node_is_ready_and_get_all_shows_pods_and_the_kubernetes_service(shared_cluster: Cluster,
                                                                              ns: str) -> None:
    nodes = shared_cluster.kubectl("get", "nodes").stdout.split("\n")
    assert nodes[1].split()[:3] == [NODE, "Ready", "control-plane"]
    node = shared_cluster.get_json("node", NODE)
    assert condition(node, "Ready")["status"] == "True"
    assert int(node["status"]["allocatable"]["pods"]) == 110
    assert {a["type"] for a in node["status"]["addresses"]} == {"InternalIP", "Hostname"}
    lease = shared_cluster.get_json("lease", NODE, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == NODE

    kubernetes = shared_cluster.get_json("service", "kubernetes", "-n", "default")
    assert kubernetes["spec"]["clusterIP"] == "10.96.0.1"
    endpoints = shared_cluster.get_json("endpoints", "kubernetes", "-n", "default")
    assert endpoints["subsets"][0]["ports"][0]["port"] == shared_cluster.port

    apply(shared_cluster, ns, workload("Deployment", "web", replicas=1))
    shared_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")
    listed = shared_cluster.kubectl("get", "all", "-n", ns).stdout
    assert "pod/web-" in listed and "deployment.apps/web" in listed and "replicaset.apps/web-" in listed
    everywhere = shared_cluster.kubectl("get", "all", "-A").stdout
    assert "service/kubernetes" in everywhere


def test_namespaces_get_a_default_service_account_and_the_root_ca(shared_cluster: Cluster, ns: str) -> None:
    wait_until("the default ServiceAccount",
               lambda: shared_cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0)
    config = yaml.safe_load(shared_cluster.kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    root = wait_until("kube-root-ca.crt", lambda: shared_cluster.kubectl(
        "get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "json", check=False).stdout)
    assert json.loads(root)["data"]["ca.crt"] == ca
    shared_cluster.kubectl("delete", "sa", "default", "-n", ns)
    wait_until("the ServiceAccount to come back",
               lambda: shared_cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0)


def test_deployment_pods_follow_scaling_and_rollouts(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, workload("Deployment", "web", replicas=3))
    shared_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")
    [rs] = shared_cluster.get_json("rs", "-n", ns)["items"]
    found = pods(shared_cluster, ns)
    assert len(found) == 3
    for pod in found:
        assert pod["metadata"]["generateName"] == f"{rs['metadata']['name']}-"
        assert pod["metadata"]["labels"]["pod-template-hash"] == rs["metadata"]["labels"]["pod-template-hash"]
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert pod["spec"]["nodeName"] == NODE
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["podIP"].startswith("10.244.")
        assert condition(pod, "Ready")["status"] == "True"
        [status] = pod["status"]["containerStatuses"]
        assert status["ready"] and status["started"] and status["restartCount"] == 0
        assert "startedAt" in status["state"]["running"]
    assert len({pod["status"]["podIP"] for pod in found}) == 3
    deploy = shared_cluster.get_json("deployment", "web", "-n", ns)
    assert {k: deploy["status"].get(k) for k in ("replicas", "readyReplicas", "availableReplicas",
                                                   "updatedReplicas")} == dict.fromkeys(
        ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas"), 3)

    shared_cluster.kubectl("scale", "deployment/web", "--replicas=1", "-n", ns)
    wait_until("scale down to one Pod", lambda: len(pods(shared_cluster, ns)) == 1)
    shared_cluster.kubectl("set", "image", "deployment/web", "app=nginx:1.28", "-n", ns)
    shared_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")
    wait_until("the new template's Pod", lambda: [p["spec"]["containers"][0]["image"]
                                                  for p in pods(shared_cluster, ns)] == ["nginx:1.28"])
    deploy = shared_cluster.get_json("deployment", "web", "-n", ns)
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    shared_cluster.kubectl("rollout", "undo", "deployment/web", "-n", ns)
    shared_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")
    wait_until("the old template's Pod back", lambda: [p["spec"]["containers"][0]["image"]
                                                       for p in pods(shared_cluster, ns)] == ["nginx:1.27"])
    events = shared_cluster.get_json("events", "-n", ns, "--field-selector", "reason=ScalingReplicaSet")["items"]
    messages = [e["message"] for e in events]
    assert any(m.startswith("Scaled down replica set web-") and m.endswith("from 3 to 1") for m in messages)


def test_a_large_replica_set_gets_exactly_its_pods(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, workload("Deployment", "many", replicas=40))
    shared_cluster.kubectl("rollout", "status", "deployment/many", "-n", ns, "--timeout=60s")
    time.sleep(1)  # anything made twice would show by now
    found = pods(shared_cluster, ns)
    assert len(found) == 40
    assert len({pod["status"]["podIP"] for pod in found}) == 40
    shared_cluster.kubectl("scale", "deployment/many", "--replicas=5", "-n", ns)
    shared_cluster.kubectl("rollout", "status", "deployment/many", "-n", ns, "--timeout=60s")
    wait_until("five Pods", lambda: len(pods(shared_cluster, ns)) == 5)


def test_statefulset_pods_are_ordinal_with_claims_and_revisions(shared_cluster: Cluster, ns: str) -> None:
    claim = {"metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}
    apply(shared_cluster, ns, workload("StatefulSet", "db", replicas=3, serviceName="db",
                                       volumeClaimTemplates=[claim]))
    shared_cluster.kubectl("rollout", "status", "statefulset/db", "-n", ns, "--timeout=30s")
    found = pods(shared_cluster, ns)
    assert [p["metadata"]["name"] for p in found] == ["db-0", "db-1", "db-2"]
    sts = shared_cluster.get_json("statefulset", "db", "-n", ns)
    revision = sts["status"]["updateRevision"]
    assert sts["status"]["currentRevision"] == revision
    assert sts["status"]["readyReplicas"] == 3
    for index, pod in enumerate(found):
        labels = pod["metadata"]["labels"]
        assert labels["controller-revision-hash"] == revision
        assert labels["statefulset.kubernetes.io/pod-name"] == f"db-{index}"
        assert pod["spec"]["hostname"] == f"db-{index}" and pod["spec"]["subdomain"] == "db"
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
        assert volume["persistentVolumeClaim"]["claimName"] == f"data-db-{index}"
    claims = shared_cluster.get_json("pvc", "-n", ns)["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-db-0", "data-db-1", "data-db-2"]
    assert {c["status"]["phase"] for c in claims} == {"Bound"}
    assert shared_cluster.get_json("controllerrevision", revision, "-n", ns)["revision"] == 1

    shared_cluster.kubectl("set", "image", "statefulset/db", "app=nginx:1.28", "-n", ns)
    shared_cluster.kubectl("rollout", "status", "statefulset/db", "-n", ns, "--timeout=30s")
    sts = shared_cluster.get_json("statefulset", "db", "-n", ns)
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"] != revision
    assert {p["spec"]["containers"][0]["image"] for p in pods(shared_cluster, ns)} == {"nginx:1.28"}
    shared_cluster.kubectl("scale", "statefulset/db", "--replicas=1", "-n", ns)
    wait_until("scale down from the highest ordinal", lambda: [p["metadata"]["name"]
                                                               for p in pods(shared_cluster, ns)] == ["db-0"])
    assert len(shared_cluster.get_json("pvc", "-n", ns)["items"]) == 3, "claims outlive their Pods"


def test_daemonset_runs_one_pod_on_the_node(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, workload("DaemonSet", "agent", replicas=None))
    shared_cluster.kubectl("rollout", "status", "daemonset/agent", "-n", ns, "--timeout=30s")
    [pod] = pods(shared_cluster, ns)
    assert pod["spec"]["nodeName"] == NODE
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    status = shared_cluster.get_json("daemonset", "agent", "-n", ns)["status"]
    assert (status["desiredNumberScheduled"], status["numberReady"], status["numberAvailable"]) == (1, 1, 1)


def test_jobs_run_pods_to_completion(shared_cluster: Cluster, ns: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
           "spec": {"completions": 3, "parallelism": 2, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}}}}
    apply(shared_cluster, ns, job)
    shared_cluster.kubectl("wait", "--for=condition=complete", "job/batch", "-n", ns, "--timeout=30s")
    done = shared_cluster.get_json("job", "batch", "-n", ns)
    assert done["status"]["succeeded"] == 3
    assert condition(done, "SuccessCriteriaMet")["status"] == "True"
    assert done["status"]["completionTime"]
    found = pods(shared_cluster, ns, "batch.kubernetes.io/job-name=batch")
    assert len(found) == 3
    for pod in found:
        assert pod["metadata"]["labels"]["controller-uid"] == done["metadata"]["uid"]
        assert pod["status"]["phase"] == "Succeeded"
        [status] = pod["status"]["containerStatuses"]
        assert status["state"]["terminated"]["exitCode"] == 0
        assert status["state"]["terminated"]["reason"] == "Completed"


def test_bare_pods_run_finish_or_stay_unschedulable(shared_cluster: Cluster, ns: str) -> None:
    def pod(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}

    apply(shared_cluster, ns, pod("server"), pod("test", restartPolicy="Never"),
          pod("pinned", nodeSelector={"disk": "ssd"}))
    shared_cluster.kubectl("wait", "--for=condition=Ready", "pod/server", "-n", ns, "--timeout=20s")
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/test", "-n", ns,
                           "--timeout=20s")
    pinned = shared_cluster.get_json("pod", "pinned", "-n", ns)
    assert pinned["status"]["phase"] == "Pending"
    assert condition(pinned, "PodScheduled")["reason"] == "Unschedulable"
    assert "nodeName" not in pinned["spec"]


def test_auth_can_i_and_whoami(shared_cluster: Cluster) -> None:
    assert shared_cluster.kubectl("auth", "can-i", "create", "deployments").stdout.strip() == "yes"
    assert "*.*" in shared_cluster.kubectl("auth", "can-i", "--list").stdout
    assert "system:masters" in shared_cluster.kubectl("auth", "whoami").stdout


def test_autoscaling_v1_and_v2_are_one_object(shared_cluster: Cluster, ns: str) -> None:
    hpa = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 70}}
    apply(shared_cluster, ns, hpa)
    v2 = shared_cluster.get_json("horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns)
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]
    v1 = shared_cluster.get_json("horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70 and "metrics" not in v1["spec"]


def test_python_client_sees_pods_and_the_node(shared_cluster: Cluster, ns: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    apply(shared_cluster, ns, workload("Deployment", "api", replicas=2))
    shared_cluster.kubectl("rollout", "status", "deployment/api", "-n", ns, "--timeout=30s")
    client = kubernetes.config.new_client_from_config(config_file=str(shared_cluster.kubeconfig))
    core = kubernetes.client.CoreV1Api(client)
    listed = core.list_namespaced_pod(ns, label_selector="app=api").items
    assert len(listed) == 2 and {p.status.phase for p in listed} == {"Running"}
    assert all(p.metadata.owner_references[0].kind == "ReplicaSet" for p in listed)
    [node] = core.list_node().items
    assert node.metadata.name == NODE
    assert next(c.status for c in node.status.conditions if c.type == "Ready") == "True"
    apps = kubernetes.client.AppsV1Api(client)
    assert apps.read_namespaced_deployment_status("api", ns).status.ready_replicas == 2


def test_no_simulated_node_keeps_bare_objects_reported_ready(tmp_path: Any) -> None:
    bare = Cluster(tmp_path, extra_args=("--no-simulated-node",))
    bare.start()
    try:
        bare.kubectl("create", "namespace", "bare")
        apply(bare, "bare", workload("Deployment", "web", replicas=2),
              workload("StatefulSet", "db", replicas=2, serviceName="db"))
        bare.kubectl("rollout", "status", "deployment/web", "-n", "bare", "--timeout=30s")
        bare.kubectl("rollout", "status", "statefulset/db", "-n", "bare", "--timeout=30s")
        assert bare.get_json("pods", "-n", "bare")["items"] == []
        assert bare.get_json("nodes")["items"] == []
        assert bare.get_json("statefulset", "db", "-n", "bare")["status"]["readyReplicas"] == 2
    finally:
        bare.stop()


def test_cronjob_runs_on_schedule(shared_cluster: Cluster, ticking: str) -> None:
    """Last in the file: the CronJob was made by the first test (fixture ``ticking``)."""
    scheduled = wait_until("a scheduled Job", lambda: [
        j for j in shared_cluster.get_json("jobs", "-n", ticking)["items"] if j["metadata"]["name"] != "now"],
        timeout=75)
    assert scheduled[0]["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert scheduled[0]["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    status = wait_until("lastScheduleTime", lambda: shared_cluster.get_json("cronjob", "tick", "-n", ticking)["status"]
                        .get("lastScheduleTime"))
    assert status.endswith(":00Z")
