"""Built-in defaulting (Deployment, StatefulSet, Job, Service, pods, …); cluster IPs are in test_serviceips.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hybrid_operator.localcluster.semantics.defaulting import (
    default_builtin,
    image_pull_policy,
)

pytestmark = pytest.mark.unit


def _template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": list(containers), **spec}}


DEFAULTED_CONTAINER = {
    "name": "nginx",
    "image": "nginx:1.25",
    "imagePullPolicy": "IfNotPresent",
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
    "ports": [{"containerPort": 80, "protocol": "TCP"}],
}

DEFAULTED_POD_SPEC = {
    "containers": [DEFAULTED_CONTAINER],
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
}


def _nginx() -> dict[str, Any]:
    return {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}


# --------------------------------------------------------------------------- whole objects

DEPLOYMENT_IN: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": _template(_nginx())},
}

DEPLOYMENT_OUT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": DEFAULTED_POD_SPEC},
    },
}

SERVICE_IN: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]},
}

SERVICE_OUT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"app": "web"},
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [
            {"port": 80, "protocol": "TCP", "targetPort": 80},
            {"port": 443, "targetPort": "https", "protocol": "TCP"},
        ],
    },
}

WHOLE_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("deployment", DEPLOYMENT_IN, DEPLOYMENT_OUT),
    ("service", SERVICE_IN, SERVICE_OUT),
    (
        "secret",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}, "type": "Opaque"},
    ),
    (
        "pvc",
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}},
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c"},
            "spec": {"volumeMode": "Filesystem"},
            "status": {"phase": "Pending"},
        },
    ),
    (
        "configmap untouched",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
    ),
    (
        "service account untouched",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}},
    ),
    (
        "custom resource untouched",
        {"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}},
        {"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}},
    ),
    (
        "namespace",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in WHOLE_CASES], ids=[c[0] for c in WHOLE_CASES])
def test_default_builtin(obj: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    assert default_builtin(obj) == expected
    assert obj == before, "default_builtin must not mutate its input"


def test_defaulting_is_idempotent() -> None:
    once = default_builtin(DEPLOYMENT_IN)
    assert default_builtin(once) == once


def test_given_values_win() -> None:
    obj = copy.deepcopy(DEPLOYMENT_IN)
    obj["spec"].update({"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2})
    obj["spec"]["template"]["spec"].update({"restartPolicy": "Never", "dnsPolicy": "Default"})
    spec = default_builtin(obj)["spec"]
    assert spec["replicas"] == 0
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["revisionHistoryLimit"] == 2
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["template"]["spec"]["dnsPolicy"] == "Default"


def test_kind_override_for_stored_objects_without_type_meta() -> None:
    obj = {"metadata": {"name": "s"}}
    assert default_builtin(obj, api_version="v1", kind="Secret")["type"] == "Opaque"


# --------------------------------------------------------------------------- workloads


def test_statefulset() -> None:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "spec": {
            "template": _template(_nginx()),
            "volumeClaimTemplates": [
                {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
            ],
        },
    }
    spec = default_builtin(obj)["spec"]
    assert spec["replicas"] == 1
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["template"]["spec"] == DEFAULTED_POD_SPEC


def test_daemonset_and_replicaset() -> None:
    daemon = default_builtin(
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": _template()}}
    )
    assert daemon["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert daemon["spec"]["revisionHistoryLimit"] == 10
    replica = default_builtin(
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"template": _template()}}
    )
    assert replica["spec"]["replicas"] == 1
    assert replica["spec"]["template"]["spec"]["restartPolicy"] == "Always"


JOB_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("neither completions nor parallelism", {}, {"completions": 1, "parallelism": 1}),
    ("parallelism only keeps completions unset", {"parallelism": 3}, {"completions": None, "parallelism": 3}),
    ("completions only", {"completions": 5}, {"completions": 5, "parallelism": 1}),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in JOB_CASES], ids=[c[0] for c in JOB_CASES])
def test_job(given: dict[str, Any], expected: dict[str, Any]) -> None:
    template = _template({"name": "c", "image": "busybox"})
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": template, **given},
    }
    result = default_builtin(obj)
    spec = result["spec"]
    assert spec.get("completions") == expected["completions"]
    assert spec["parallelism"] == expected["parallelism"]
    assert spec["backoffLimit"] == 6
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False
    assert "restartPolicy" not in spec["template"]["spec"], "a Job's restartPolicy is never defaulted"
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert result["metadata"]["labels"] == {"app": "web"}


def test_job_keeps_given_restart_policy_and_labels() -> None:
    template = _template({"name": "c", "image": "busybox:1"}, restartPolicy="Never")
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": {"x": "y"}},
        "spec": {"template": template},
    }
    result = default_builtin(obj)
    assert result["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert result["metadata"]["labels"] == {"x": "y"}


def test_cronjob() -> None:
    template = _template({"name": "c", "image": "busybox:1"})
    obj = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
    }
    spec = default_builtin(obj)["spec"]
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["suspend"] is False
    assert spec["successfulJobsHistoryLimit"] == 3
    assert spec["failedJobsHistoryLimit"] == 1
    pod_spec = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod_spec["dnsPolicy"] == "ClusterFirst"
    assert "restartPolicy" not in pod_spec


# --------------------------------------------------------------------------- pods and containers


def test_pod_with_probes_env_volumes_and_init_containers() -> None:
    container = {
        "name": "app",
        "image": "registry:5000/app",
        "readinessProbe": {"httpGet": {"port": 8080}},
        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    }
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "containers": [container],
            "initContainers": [{"name": "init", "image": "busybox@sha256:abc"}],
            "volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "tmp", "emptyDir": {}}],
        },
    }
    spec = default_builtin(obj)["spec"]
    app = spec["containers"][0]
    assert app["imagePullPolicy"] == "Always"
    assert app["readinessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert app["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName", "apiVersion": "v1"}
    assert spec["initContainers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["initContainers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert spec["volumes"] == [
        {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}},
        {"name": "tmp", "emptyDir": {}},
    ]
    assert spec["enableServiceLinks"] is True
    assert spec["restartPolicy"] == "Always"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v1", "IfNotPresent"),
        ("nginx@sha256:0123", "IfNotPresent"),
        ("", "Always"),
    ],
)
def test_image_pull_policy(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


# --------------------------------------------------------------------------- services

SERVICE_TYPE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    (
        "node port",
        {"type": "NodePort", "ports": [{"port": 80}]},
        {"externalTrafficPolicy": "Cluster", "ipFamilyPolicy": "SingleStack"},
        ["allocateLoadBalancerNodePorts"],
    ),
    (
        "load balancer",
        {"type": "LoadBalancer"},
        {"externalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": True},
        [],
    ),
    (
        "external name has no IP families",
        {"type": "ExternalName", "externalName": "db.example.com"},
        {"sessionAffinity": "None"},
        ["ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"],
    ),
    (
        "client ip affinity timeout",
        {"sessionAffinity": "ClientIP"},
        {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
        ["externalTrafficPolicy"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "present", "absent"),
    [c[1:] for c in SERVICE_TYPE_CASES],
    ids=[c[0] for c in SERVICE_TYPE_CASES],
)
def test_service_types(spec: dict[str, Any], present: dict[str, Any], absent: list[str]) -> None:
    result = default_builtin({"apiVersion": "v1", "kind": "Service", "spec": spec})["spec"]
    for key, value in present.items():
        assert result[key] == value
    for key in absent:
        assert key not in result


def test_secret_string_data_is_folded_into_data() -> None:
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
           "data": {"a": "b2xk", "keep": "eA=="}, "stringData": {"a": "new", "c": "ü"}}
    result = default_builtin(obj)
    assert "stringData" not in result
    assert result["data"] == {"a": "bmV3", "keep": "eA==", "c": "w7w="}
