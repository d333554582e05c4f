"""DaemonSets: one Pod on the one simulated node, as kube-controller-manager's daemonset controller makes it.

The Pod (``generateName`` ``<daemonset>-``) is labelled
``controller-revision-hash`` (the template hash) and
``pod-template-generation``, pinned to the node by a required node affinity
on ``metadata.name``, and tolerates the node conditions kube's DaemonSet
Pods tolerate.  A template change replaces it (``RollingUpdate``; with
``OnDelete`` only once it is deleted); a ``nodeSelector`` the node does not
match means no Pod at all.  The status counts that Pod.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers import pods, revisions
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.controllers.workloads import template_hash
from hybrid_operator.localcluster.resources import DAEMONSETS_KEY, PODS_KEY
from hybrid_operator.localcluster.simnode.node import NODE_NAME, node_labels

COMPONENT = "daemonset-controller"
REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"
TOLERATED = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/disk-pressure",
             "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
             "node.kubernetes.io/unschedulable")


def _wants_node(ds: dict[str, Any]) -> bool:
    selector = objects.dig(ds, "spec", "template", "spec", "nodeSelector")
    return not isinstance(selector, dict) or pods.labels_match(node_labels(), selector)


def daemonset_status(ds: dict[str, Any], live: list[dict[str, Any]], current_hash: str, desired: int) -> \
        dict[str, Any]:
    ready = sum(1 for pod in live if pods.ready(pod))
    status: dict[str, Any] = {"currentNumberScheduled": len(live), "numberMisscheduled": 0,
                              "desiredNumberScheduled": desired, "numberReady": ready,
                              "observedGeneration": objects.meta(ds).get("generation", 1)}
    updated = sum(1 for pod in live if objects.labels(pod).get(REVISION_LABEL) == current_hash)
    extra = {"updatedNumberScheduled": updated,
             "numberAvailable": ready, "numberUnavailable": max(desired - ready, 0)}
    status.update({key: value for key, value in extra.items() if value})
    return status


class DaemonSetController:
    """Keeps one up-to-date Pod per DaemonSet on the simulated node."""

    def __init__(self, view: ClusterView, events: EventRecorder) -> None:
        self.view = view
        self.events = events

    def sync(self, seen: dict[str, Any]) -> None:
        key = (DAEMONSETS_KEY, objects.namespace(seen), objects.name(seen))
        ds = self.view.peek(key)
        if ds is None or objects.uid(ds) != objects.uid(seen) or objects.deleting(ds):
            return
        current_hash = template_hash(ds)
        revision = revisions.ensure_revision(self.view, ds, current_hash)
        live = [pod for pod in self.view.owned(PODS_KEY, objects.uid(ds)) if pods.active(pod)]
        desired = 1 if _wants_node(ds) else 0
        if not self.view.terminating(objects.namespace(ds)):
            self._converge(ds, live, current_hash, desired)
        revisions.prune(self.view, ds, {revision})
        self.view.set_status(key, daemonset_status(ds, live, current_hash, desired))

    def _converge(self, ds: dict[str, Any], live: list[dict[str, Any]], current_hash: str, desired: int) -> None:
        on_delete = objects.dig(ds, "spec", "updateStrategy", "type") == "OnDelete"
        stale = [] if on_delete else [p for p in live if objects.labels(p).get(REVISION_LABEL) != current_hash]
        keep = [p for p in live if p not in stale][:desired]
        for pod in live:
            if pod not in keep and (pod in stale or len(live) > desired):
                self.view.delete((PODS_KEY, objects.namespace(pod), objects.name(pod)))
                self.events.record(ds, COMPONENT, "SuccessfulDelete", f"Deleted pod: {objects.name(pod)}")
        if desired and not keep and len(live) == len(stale):
            self._create(ds, current_hash)

    def _create(self, ds: dict[str, Any], current_hash: str) -> None:
        labels = {REVISION_LABEL: current_hash, GENERATION_LABEL: str(objects.meta(ds).get("generation", 1))}
        pod = pods.from_template(ds, objects.dig(ds, "spec", "template"), labels=labels)
        spec = pod["spec"]
        spec["affinity"] = {**(spec.get("affinity") or {}), "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [NODE_NAME]}]}]}}}
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        present = {t.get("key") for t in tolerations}
        tolerations += [{"key": key, "operator": "Exists", "effect": "NoExecute" if "not-ready" in key
                         or "unreachable" in key else "NoSchedule"} for key in TOLERATED if key not in present]
        spec["tolerations"] = tolerations
        created = self.view.create(PODS_KEY, objects.namespace(ds), pod)
        if created is not None:
            self.events.record(ds, COMPONENT, "SuccessfulCreate", f"Created pod: {objects.name(created)}")
