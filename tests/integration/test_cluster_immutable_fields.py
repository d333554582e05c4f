"""Issue 15 item 6: fields kube-apiserver does not let an update change are refused with its messages."""

from __future__ import annotations

from typing import Any

import pytest

from support.cluster import Cluster, raw_request

pytestmark = pytest.mark.integration

NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"


def deployment(name: str, app: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": app}}, "template": {
        "metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def test_deployment_selector_is_immutable(shared_cluster: Cluster) -> None:
    assert raw_request(shared_cluster, "POST", f"{APPS}/deployments", deployment("sel", "a")).status == 201
    changed = raw_request(shared_cluster, "PUT", f"{APPS}/deployments/sel", deployment("sel", "b"))
    assert changed.status == 422, changed.body
    assert changed.json()["message"].startswith('Deployment.apps "sel" is invalid: ')
    assert "spec.selector: Invalid value: " in changed.json()["message"]
    assert changed.json()["message"].endswith("field is immutable")
    scaled = raw_request(shared_cluster, "PATCH", f"{APPS}/deployments/sel", {"spec": {"replicas": 3}},
                         content_type="application/merge-patch+json")
    assert scaled.status == 200, scaled.body


def test_statefulset_volume_claim_templates_are_immutable(shared_cluster: Cluster) -> None:
    sts = deployment("db", "db")
    sts["spec"]["serviceName"] = "db"
    assert raw_request(shared_cluster, "POST", f"{APPS}/statefulsets", sts).status == 201
    changed = raw_request(shared_cluster, "PATCH", f"{APPS}/statefulsets/db", {"spec": {"volumeClaimTemplates": [
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}]}},
        content_type="application/merge-patch+json")
    assert changed.status == 422, changed.body
    assert "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'" in changed.json()["message"]


def test_service_cluster_ip_and_job_template_are_immutable(shared_cluster: Cluster) -> None:
    service = {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}
    assert raw_request(shared_cluster, "POST", f"{NS}/services", service).status == 201
    moved = raw_request(shared_cluster, "PATCH", f"{NS}/services/svc", {"spec": {"clusterIP": "10.43.99.99"}},
                        content_type="application/merge-patch+json")
    assert moved.status == 422, moved.body
    assert 'spec.clusterIP: Invalid value: "10.43.99.99": field is immutable' in moved.json()["message"]
    job = {"metadata": {"name": "job"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert raw_request(shared_cluster, "POST", "/apis/batch/v1/namespaces/default/jobs", job).status == 201
    edited = raw_request(shared_cluster, "PATCH", "/apis/batch/v1/namespaces/default/jobs/job",
                         {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}},
                         content_type="application/strategic-merge-patch+json")
    assert edited.status == 422, edited.body
    assert "spec.template: Invalid value: " in edited.json()["message"]


def test_immutable_configmap_data(shared_cluster: Cluster) -> None:
    frozen = {"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": True}
    assert raw_request(shared_cluster, "POST", f"{NS}/configmaps", frozen).status == 201
    changed = raw_request(shared_cluster, "PATCH", f"{NS}/configmaps/frozen", {"data": {"a": "2"}},
                          content_type="application/merge-patch+json")
    assert changed.status == 422, changed.body
    assert changed.json()["message"] == ('ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when '
                                         "`immutable` is set")


def test_claim_storage_class_is_set_once_then_immutable(shared_cluster: Cluster) -> None:
    """A claim created without a class gets the default one (as kube >= 1.28 assigns it retroactively); then fixed."""
    body = {"metadata": {"name": "late-class"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                         "resources": {"requests": {"storage": "1Gi"}}}}
    assert raw_request(shared_cluster, "POST", f"{NS}/persistentvolumeclaims", body).status == 201
    shared_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/late-class", "-n", "default",
                           "--timeout=20s")
    assert shared_cluster.get_json("pvc", "late-class", "-n", "default")["spec"]["storageClassName"] == "standard"
    moved = raw_request(shared_cluster, "PATCH", f"{NS}/persistentvolumeclaims/late-class",
                        {"spec": {"storageClassName": "other"}}, content_type="application/merge-patch+json")
    assert moved.status == 422, moved.body
    assert "spec: Forbidden: spec is immutable after creation" in moved.json()["message"]
