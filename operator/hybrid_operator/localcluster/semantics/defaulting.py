"""Defaults kube-apiserver fills into built-in objects on create and update.

Without them ``kubectl describe`` shows blank fields (``StrategyType:``),
``kubectl diff`` and re-applies report spurious changes, and Helm or Ansible
status checks read missing values.  The values here are the ones the
upstream ``SetDefaults_*`` functions and registry strategies write for the
kinds clients commonly send; a field is only ever filled when absent.
Cluster IPs and node ports for Services are handed out by :mod:`.serviceips`.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import objects

Obj = dict[str, Any]


# --------------------------------------------------------------------------- helpers


def _sub(parent: Obj, key: str) -> Obj:
    """``parent[key]`` as a dict, created when absent (an existing non-dict is replaced)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _dicts(parent: Obj, key: str) -> list[Obj]:
    value = parent.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _fill(target: Obj, defaults: Obj) -> None:
    """Set each default whose key is absent (or null) in ``target``."""
    for key, value in defaults.items():
        if target.get(key) is None:
            target[key] = copy.deepcopy(value)


# --------------------------------------------------------------------------- containers and pods


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or untagged images, ``IfNotPresent`` otherwise."""
    if "@" in image:
        return "IfNotPresent"
    last_component = image.rsplit("/", 1)[-1]
    if ":" not in last_component:
        return "Always"
    return "Always" if last_component.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    _fill(probe, {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    http_get = probe.get("httpGet")
    if isinstance(http_get, dict):
        _fill(http_get, {"path": "/", "scheme": "HTTP"})


def _default_env(container: Obj) -> None:
    for env in _dicts(container, "env"):
        field_ref = objects.dig(env, "valueFrom", "fieldRef")
        if isinstance(field_ref, dict):
            _fill(field_ref, {"apiVersion": "v1"})


def _default_container(container: Obj) -> None:
    _fill(
        container,
        {
            "imagePullPolicy": image_pull_policy(str(container.get("image") or "")),
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "resources": {},
        },
    )
    for port in _dicts(container, "ports"):
        _fill(port, {"protocol": "TCP"})
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(probe_key))
    _default_env(container)


_MODE_VOLUMES = ("configMap", "secret", "projected", "downwardAPI")


def _default_volume(volume: Obj) -> None:
    for source_key in _MODE_VOLUMES:
        source = volume.get(source_key)
        if isinstance(source, dict):
            _fill(source, {"defaultMode": 420})


def default_pod_spec(spec: Obj, *, restart_policy: bool = True) -> None:
    """PodSpec defaults, in place; ``restart_policy=False`` leaves ``restartPolicy`` alone (Jobs)."""
    defaults: Obj = {
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
        "securityContext": {},
    }
    if restart_policy:
        defaults["restartPolicy"] = "Always"
    _fill(spec, defaults)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(spec, key):
            _default_container(container)
    for volume in _dicts(spec, "volumes"):
        _default_volume(volume)


def _default_template(owner_spec: Obj, *, restart_policy: bool = True) -> None:
    template = owner_spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(_sub(template, "spec"), restart_policy=restart_policy)


def _pod(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    default_pod_spec(spec)
    _fill(spec, {"enableServiceLinks": True})


# --------------------------------------------------------------------------- workloads


def _deployment(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(spec, {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600})
    strategy = _sub(spec, "strategy")
    _fill(strategy, {"type": "RollingUpdate"})
    if strategy["type"] == "RollingUpdate":
        _fill(_sub(strategy, "rollingUpdate"), {"maxUnavailable": "25%", "maxSurge": "25%"})
    _default_template(spec)


def _stateful_set(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(
        spec,
        {
            "replicas": 1,
            "podManagementPolicy": "OrderedReady",
            "revisionHistoryLimit": 10,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        },
    )
    strategy = _sub(spec, "updateStrategy")
    _fill(strategy, {"type": "RollingUpdate"})
    if strategy["type"] == "RollingUpdate":
        _fill(_sub(strategy, "rollingUpdate"), {"partition": 0})
    for claim in _dicts(spec, "volumeClaimTemplates"):
        _fill(_sub(claim, "spec"), {"volumeMode": "Filesystem"})
    _default_template(spec)


def _daemon_set(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(spec, {"revisionHistoryLimit": 10})
    strategy = _sub(spec, "updateStrategy")
    _fill(strategy, {"type": "RollingUpdate"})
    if strategy["type"] == "RollingUpdate":
        _fill(_sub(strategy, "rollingUpdate"), {"maxUnavailable": 1, "maxSurge": 0})
    _default_template(spec)


def _replica_set(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(spec, {"replicas": 1})
    _default_template(spec)


def _job_spec(spec: Obj) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _fill(
        spec,
        {
            "parallelism": 1,
            "backoffLimit": 6,
            "completionMode": "NonIndexed",
            "suspend": False,
        },
    )
    policy = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    _fill(spec, {"podReplacementPolicy": policy})
    _default_template(spec, restart_policy=False)


def _job(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _job_spec(spec)
    template_labels = objects.dig(spec, "template", "metadata", "labels")
    metadata = _sub(obj, "metadata")
    if not metadata.get("labels") and isinstance(template_labels, dict) and template_labels:
        metadata["labels"] = copy.deepcopy(template_labels)


def _cron_job(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(
        spec,
        {
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
        },
    )
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict):
        _default_template(_sub(job_template, "spec"), restart_policy=False)


# --------------------------------------------------------------------------- core objects


def _service(obj: Obj) -> None:
    spec = _sub(obj, "spec")
    _fill(spec, {"type": "ClusterIP", "sessionAffinity": "None"})
    service_type = spec["type"]
    for port in _dicts(spec, "ports"):
        _fill(port, {"protocol": "TCP"})
        if port.get("targetPort") in (None, 0, "") and port.get("port") is not None:
            port["targetPort"] = port["port"]
    if spec["sessionAffinity"] == "ClientIP":
        _fill(_sub(_sub(spec, "sessionAffinityConfig"), "clientIP"), {"timeoutSeconds": 10800})
    if service_type == "ExternalName":
        return
    _fill(spec, {"internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"})
    if service_type in ("NodePort", "LoadBalancer"):
        _fill(spec, {"externalTrafficPolicy": "Cluster"})
    if service_type == "LoadBalancer":
        _fill(spec, {"allocateLoadBalancerNodePorts": True})


def _pvc(obj: Obj) -> None:
    _fill(_sub(obj, "spec"), {"volumeMode": "Filesystem"})
    _fill(_sub(obj, "status"), {"phase": "Pending"})


def _secret(obj: Obj) -> None:
    _fill(obj, {"type": "Opaque"})
    # The Secret strategy folds write-only ``stringData`` into ``data`` (base64), stringData winning.
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = _sub(obj, "data")
        for key, value in string_data.items():
            data[str(key)] = base64.b64encode(str(value).encode()).decode()


def _namespace(obj: Obj) -> None:
    metadata = _sub(obj, "metadata")
    name = metadata.get("name")
    if isinstance(name, str) and name:
        _fill(_sub(metadata, "labels"), {"kubernetes.io/metadata.name": name})
    _fill(_sub(obj, "spec"), {"finalizers": ["kubernetes"]})
    _fill(_sub(obj, "status"), {"phase": "Active"})


_DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "StatefulSet"): _stateful_set,
    ("apps/v1", "DaemonSet"): _daemon_set,
    ("apps/v1", "ReplicaSet"): _replica_set,
    ("batch/v1", "Job"): _job,
    ("batch/v1", "CronJob"): _cron_job,
    ("v1", "Pod"): _pod,
    ("v1", "Service"): _service,
    ("v1", "PersistentVolumeClaim"): _pvc,
    ("v1", "Secret"): _secret,
    ("v1", "Namespace"): _namespace,
}


def default_builtin(obj: Obj, *, api_version: str | None = None, kind: str | None = None) -> Obj:
    """A copy of ``obj`` with kube-apiserver's defaults filled in where absent.

    ``api_version`` and ``kind`` override the object's own (stored built-in
    objects may omit them); unknown kinds come back unchanged.
    """
    result = copy.deepcopy(obj)
    key = (api_version or str(obj.get("apiVersion", "")), kind or str(obj.get("kind", "")))
    defaulter = _DEFAULTERS.get(key)
    if defaulter is not None:
        defaulter(result)
    return result
