"""ReplicaSets keep ``spec.replicas`` Pods, as kube-controller-manager's replicaset controller does.

A ReplicaSet creates the Pods it lacks from its template (``generateName``
``<replicaset>-``: kube's random 5-character suffix) and deletes the ones it
has too many of (unscheduled, then not ready, then the newest first), posting
``SuccessfulCreate``/``SuccessfulDelete`` Events.  Its status counts the Pods
that exist: ``replicas`` (not finished, not being deleted),
``fullyLabeledReplicas``, ``readyReplicas`` and ``availableReplicas``, at
``observedGeneration``.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.controllers.workloads import desired_replicas
from hybrid_operator.localcluster.resources import PODS_KEY, REPLICASETS_KEY

COMPONENT = "replicaset-controller"


def _deletion_rank(pod: dict[str, Any]) -> tuple[int, int, str]:
    """Pods to delete first sort first: unscheduled, not ready, newest."""
    scheduled = 1 if objects.dig(pod, "spec", "nodeName") else 0
    return scheduled, 1 if pods.ready(pod) else 0, _negated(str(objects.meta(pod).get("creationTimestamp", "")))


def _negated(stamp: str) -> str:
    return "".join(chr(0x10FFFF - ord(ch)) for ch in stamp)


def replica_status(obj: dict[str, Any], owned: list[dict[str, Any]]) -> dict[str, Any]:
    """A ReplicaSet's status from its Pods (kube omits the zero counts but ``replicas``)."""
    live = [pod for pod in owned if pods.active(pod)]
    template_labels = objects.dig(obj, "spec", "template", "metadata", "labels") or {}
    counts = {"fullyLabeledReplicas": sum(1 for pod in live if pods.labels_match(objects.labels(pod),
                                                                                template_labels)),
              "readyReplicas": sum(1 for pod in live if pods.ready(pod)),
              "availableReplicas": sum(1 for pod in live if pods.ready(pod))}
    status: dict[str, Any] = {"replicas": len(live)}
    status.update({key: value for key, value in counts.items() if value})
    status["observedGeneration"] = objects.meta(obj).get("generation", 1)
    return status


class ReplicaSetController:
    """Creates and deletes each ReplicaSet's Pods and reports their counts."""

    def __init__(self, view: ClusterView, events: EventRecorder) -> None:
        self.view = view
        self.events = events

    def sync(self, seen: dict[str, Any]) -> None:
        key = (REPLICASETS_KEY, objects.namespace(seen), objects.name(seen))
        rs = self.view.peek(key)
        if rs is None or objects.uid(rs) != objects.uid(seen) or objects.deleting(rs):
            return
        owned = self.view.owned(PODS_KEY, objects.uid(rs))
        live = [pod for pod in owned if pods.active(pod)]
        missing = desired_replicas(rs) - len(live)
        if not self.view.terminating(objects.namespace(rs)):
            for _ in range(max(0, missing)):
                self._create(rs)
            for pod in sorted(live, key=_deletion_rank)[:max(0, -missing)]:
                self.view.delete((PODS_KEY, objects.namespace(pod), objects.name(pod)))
                self.events.record(rs, COMPONENT, "SuccessfulDelete", f"Deleted pod: {objects.name(pod)}")
        self.view.set_status(key, replica_status(rs, owned))

    def _create(self, rs: dict[str, Any]) -> None:
        template = objects.dig(rs, "spec", "template")
        created = self.view.create(PODS_KEY, objects.namespace(rs), pods.from_template(rs, template))
        if created is not None:
            self.events.record(rs, COMPONENT, "SuccessfulCreate", f"Created pod: {objects.name(created)}")
