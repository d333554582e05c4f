"""Reported readiness: without the simulated node (``--no-simulated-node``), workloads are only *said* to be ready.

No Pod is made then, so nothing would ever become ready and ``kubectl
wait``, ``helm --wait`` (kstatus) and Ansible's ``wait: true`` would hang.
This controller writes the status a healthy controller and kubelet would
report: Deployments, ReplicaSets and StatefulSets have all replicas ready at
their current generation, DaemonSets one ready node, Jobs complete, bare
Pods run with ready containers.  Custom resources are left to their
operators, and so are Pods once a Node is registered: a node agent
(``hybrid-operator node``) runs them then.  With the simulated node, the
workload controllers count real Pods instead (:mod:`.replicasets`,
:mod:`.statefulsets`, ...).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers.view import ClusterView, as_manager
from hybrid_operator.localcluster.controllers.workloads import desired_replicas, template_hash
from hybrid_operator.localcluster.resources import NODES_KEY, ResourceInfo

Status = dict[str, Any]


def _condition(kind: str, reason: str, message: str, old: Status) -> dict[str, Any]:
    now = clock.now_rfc3339()
    previous: dict[str, Any] = next((c for c in (old.get("conditions") or []) if c.get("type") == kind), {})
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": previous.get("lastUpdateTime", now),
            "lastTransitionTime": previous.get("lastTransitionTime", now)}


def _replicated(obj: dict[str, Any]) -> Status:
    count = desired_replicas(obj)
    return {"observedGeneration": obj["metadata"].get("generation", 1), "replicas": count, "readyReplicas": count,
            "availableReplicas": count}


def _deployment(obj: dict[str, Any], old: Status) -> Status | None:
    status = _replicated(obj)
    status["updatedReplicas"] = status["replicas"]
    status["conditions"] = [
        _condition("Available", "MinimumReplicasAvailable", "Deployment has minimum availability.", old),
        _condition("Progressing", "NewReplicaSetAvailable",
                   f'ReplicaSet "{obj["metadata"]["name"]}-{template_hash(obj)}" has successfully progressed.', old),
    ]
    return status


def _replica_set(obj: dict[str, Any], old: Status) -> Status | None:
    status = _replicated(obj)
    status["fullyLabeledReplicas"] = status["replicas"]
    return status


def _stateful_set(obj: dict[str, Any], old: Status) -> Status | None:
    status = _replicated(obj)
    count = status["replicas"]
    revision = f"{obj['metadata']['name']}-{template_hash(obj)}"
    status.update(currentReplicas=count, updatedReplicas=count, currentRevision=revision,
                  updateRevision=revision, collisionCount=0)
    return status


def _daemon_set(obj: dict[str, Any], old: Status) -> Status | None:
    return {"observedGeneration": obj["metadata"].get("generation", 1), "currentNumberScheduled": 1,
            "desiredNumberScheduled": 1, "numberAvailable": 1, "numberReady": 1, "updatedNumberScheduled": 1,
            "numberMisscheduled": 0}


def _job(obj: dict[str, Any], old: Status) -> Status | None:
    if old.get("succeeded"):
        return None
    now = clock.now_rfc3339()
    return {"startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0,
            "terminating": 0, "uncountedTerminatedPods": {},
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now,
                 "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now,
                 "lastTransitionTime": now}]}


def _pod(obj: dict[str, Any], old: Status) -> Status | None:
    if old.get("phase") == "Running":
        return None
    now = clock.now_rfc3339()
    containers = (obj.get("spec") or {}).get("containers") or []
    return {"phase": "Running", "podIP": "10.42.0.10", "hostIP": "10.0.0.1", "startTime": now,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": c.get("name", ""), "ready": True, "restartCount": 0,
                                   "started": True, "image": c.get("image", ""), "imageID": "",
                                   "state": {"running": {"startedAt": now}}} for c in containers]}


_READY: dict[str, Callable[[dict[str, Any], Status], Status | None]] = {
    "Deployment": _deployment,
    "ReplicaSet": _replica_set,
    "StatefulSet": _stateful_set,
    "DaemonSet": _daemon_set,
    "Job": _job,
    "Pod": _pod,
}


def ready_status(kind: str, obj: dict[str, Any]) -> Status | None:
    """The status a healthy real controller would report, or None if not ours to set."""
    status_of = _READY.get(kind)
    return status_of(obj, obj.get("status") or {}) if status_of is not None else None


class ReadinessController:
    """Writes the ready status of built-in workloads whenever it differs from the stored one."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def mark(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.custom or (info.kind == "Pod" and self.view.index.of_kind(NODES_KEY)):
            return
        status = ready_status(info.kind, obj)
        if status is None or status == obj.get("status"):
            return
        updated = copy.deepcopy(obj)
        updated["status"] = status
        self.view.api.update(info, objects.namespace(obj), objects.name(obj), updated, as_manager(),
                             "status" if "status" in info.subresources else "")
