"""Pods as the workload controllers make them, and the facts about a Pod they count.

ReplicaSets, StatefulSets, DaemonSets and Jobs all turn their pod template
into Pods the same way kube's ``controller.GetPodFromTemplate`` does: the
template's labels, annotations and spec, a name (or ``generateName``), and
an ownerReference to the workload with ``controller: true`` and
``blockOwnerDeletion: true``.  What the simulated kubelet reports
(:mod:`.kubelet`) is read back here: phase, readiness, whether a Pod still
counts as one of its workload's replicas (the facts the node agent reads too
come from :mod:`..simnode.podstatus`).
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.simnode.podstatus import FINISHED, condition, labels_match, phase, restart_policy

# the Pod facts live with the node's pure parts; the controllers keep reading them from here
__all__ = ["FINISHED", "active", "condition", "controller_ref", "from_template", "labels_match", "phase", "ready",
           "restart_policy"]


def controller_ref(owner: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference a controller puts on what it creates."""
    meta = owner["metadata"]
    return {"apiVersion": owner.get("apiVersion", ""), "kind": owner.get("kind", ""), "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def from_template(owner: dict[str, Any], template: Any, *, name: str = "", generate_name: str = "",
                  labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Pod made from ``template`` for ``owner``, with extra ``labels``."""
    template = template if isinstance(template, dict) else {}
    template_meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    meta: dict[str, Any] = {"namespace": objects.namespace(owner),
                            "labels": {**(template_meta.get("labels") or {}), **(labels or {})},
                            "ownerReferences": [controller_ref(owner)]}
    if template_meta.get("annotations"):
        meta["annotations"] = dict(template_meta["annotations"])
    if template_meta.get("finalizers"):
        meta["finalizers"] = list(template_meta["finalizers"])
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name or f"{objects.name(owner)}-"
    spec = copy.deepcopy(template.get("spec")) if isinstance(template.get("spec"), dict) else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def ready(pod: dict[str, Any]) -> bool:
    """Running, Ready and not being deleted (what counts as a ready replica)."""
    return phase(pod) == "Running" and condition(pod, "Ready") and not objects.deleting(pod)


def active(pod: dict[str, Any]) -> bool:
    """Neither finished nor being deleted (what counts as a replica)."""
    return phase(pod) not in FINISHED and not objects.deleting(pod)
