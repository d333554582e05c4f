"""StatefulSets: ordinal Pods and their claims, as kube-controller-manager's statefulset controller makes them.

Pods are named ``<statefulset>-0 .. N-1``, labelled
``controller-revision-hash`` (the ControllerRevision's name),
``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``,
with ``hostname``/``subdomain`` set, and each gets the claims of the
``volumeClaimTemplates`` (``<template>-<statefulset>-<ordinal>``, created
first, kept when the Pod or the StatefulSet goes unless
``persistentVolumeClaimRetentionPolicy.whenDeleted`` is Delete).  With the
default ``OrderedReady`` policy a Pod is created only once the ones before
it are Ready, scale-down removes the highest ordinal first, one at a time,
and a template change (``RollingUpdate``, above ``partition``) replaces Pods
from the highest ordinal down.  The status counts the Pods per revision and
moves ``currentRevision`` to ``updateRevision`` once the update is done.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers import pods, revisions
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.controllers.workloads import desired_replicas, template_hash
from hybrid_operator.localcluster.resources import PERSISTENTVOLUMECLAIMS_KEY, PODS_KEY, STATEFULSETS_KEY

COMPONENT = "statefulset-controller"
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def ordinal(sts_name: str, pod: dict[str, Any]) -> int | None:
    match = re.fullmatch(re.escape(sts_name) + r"-(\d+)", objects.name(pod))
    return int(match.group(1)) if match else None


def claim_name(template: dict[str, Any], sts_name: str, index: int) -> str:
    return f"{objects.name(template)}-{sts_name}-{index}"


def _templates(sts: dict[str, Any]) -> list[dict[str, Any]]:
    found = objects.dig(sts, "spec", "volumeClaimTemplates")
    return [t for t in found if isinstance(t, dict) and objects.name(t)] if isinstance(found, list) else []


def _partition(sts: dict[str, Any]) -> int:
    value = objects.dig(sts, "spec", "updateStrategy", "rollingUpdate", "partition")
    return value if isinstance(value, int) else 0


def statefulset_status(sts: dict[str, Any], owned: list[dict[str, Any]], update_revision: str) -> dict[str, Any]:
    """A StatefulSet's status from its Pods."""
    old = sts.get("status") or {}
    live = [pod for pod in owned if not objects.deleting(pod)]
    ready = sum(1 for pod in live if pods.ready(pod))
    updated = sum(1 for pod in live if objects.labels(pod).get(REVISION_LABEL) == update_revision)
    current_revision = str(old.get("currentRevision") or update_revision)
    if updated == len(live) == desired_replicas(sts) and ready == updated:
        current_revision = update_revision
    current = sum(1 for pod in live if objects.labels(pod).get(REVISION_LABEL) == current_revision)
    status: dict[str, Any] = {"observedGeneration": objects.meta(sts).get("generation", 1), "replicas": len(live),
                              "readyReplicas": ready, "currentReplicas": current, "updatedReplicas": updated,
                              "currentRevision": current_revision, "updateRevision": update_revision,
                              "collisionCount": 0, "availableReplicas": ready}
    return {key: value for key, value in status.items()
            if value or key in ("replicas", "availableReplicas", "observedGeneration", "collisionCount")}


class StatefulSetController:
    """Creates, replaces and removes each StatefulSet's ordinal Pods and claims."""

    def __init__(self, view: ClusterView, events: EventRecorder) -> None:
        self.view = view
        self.events = events

    def sync(self, seen: dict[str, Any]) -> None:
        key = (STATEFULSETS_KEY, objects.namespace(seen), objects.name(seen))
        sts = self.view.peek(key)
        if sts is None or objects.uid(sts) != objects.uid(seen) or objects.deleting(sts):
            return
        revision = revisions.ensure_revision(self.view, sts, template_hash(sts))
        by_ordinal = {}
        for pod in self.view.owned(PODS_KEY, objects.uid(sts)):
            index = ordinal(objects.name(sts), pod)
            if index is not None:
                by_ordinal[index] = pod
        if not self.view.terminating(objects.namespace(sts)):
            self._converge(sts, by_ordinal, revision)
        owned = list(by_ordinal.values())
        revisions.prune(self.view, sts, {revision, str(objects.dig(sts, "status", "currentRevision") or "")})
        self.view.set_status(key, statefulset_status(sts, owned, revision))

    def _converge(self, sts: dict[str, Any], by_ordinal: dict[int, dict[str, Any]], revision: str) -> None:
        ordered = objects.dig(sts, "spec", "podManagementPolicy") != "Parallel"
        replicas = desired_replicas(sts)
        if not self._scale_up(sts, by_ordinal, revision, ordered):
            return
        extra = sorted((i for i in by_ordinal if i >= replicas), reverse=True)
        for index in extra[:1] if ordered else extra:
            self._delete(sts, by_ordinal[index])
        if extra or objects.dig(sts, "spec", "updateStrategy", "type") == "OnDelete":
            return
        stale = sorted((i for i, pod in by_ordinal.items() if _partition(sts) <= i < replicas
                        and objects.labels(pod).get(REVISION_LABEL) != revision), reverse=True)
        if stale and all(pods.ready(pod) for i, pod in by_ordinal.items() if i < replicas):
            self._delete(sts, by_ordinal[stale[0]])

    def _scale_up(self, sts: dict[str, Any], by_ordinal: dict[int, dict[str, Any]], revision: str,
                  ordered: bool) -> bool:
        """Create the missing ordinals (in order, each once the ones before are Ready); whether all are there."""
        complete = True
        for index in range(desired_replicas(sts)):
            pod = by_ordinal.get(index)
            if pod is None:
                self._create(sts, index, revision)
                complete = False
            elif pods.phase(pod) in pods.FINISHED:
                self._delete(sts, pod)  # a finished stateful Pod is replaced, as kube does
                complete = False
            elif not ordered or pods.ready(pod):
                continue
            if ordered:
                return False
        return complete

    def _create(self, sts: dict[str, Any], index: int, revision: str) -> None:
        sts_name, namespace = objects.name(sts), objects.namespace(sts)
        name = f"{sts_name}-{index}"
        for template in _templates(sts):
            self._claim(sts, template, index, name)
        labels = {REVISION_LABEL: revision, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(index)}
        pod = pods.from_template(sts, objects.dig(sts, "spec", "template"), name=name, labels=labels)
        spec = pod["spec"]
        spec["hostname"] = name
        if objects.dig(sts, "spec", "serviceName"):
            spec["subdomain"] = objects.dig(sts, "spec", "serviceName")
        volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
        for template in _templates(sts):
            volumes = [v for v in volumes if v.get("name") != objects.name(template)]
            volumes.append({"name": objects.name(template),
                            "persistentVolumeClaim": {"claimName": claim_name(template, sts_name, index)}})
        if volumes:
            spec["volumes"] = volumes
        if self.view.create(PODS_KEY, namespace, pod) is not None:
            self.events.record(sts, COMPONENT, "SuccessfulCreate", f"create Pod {name} in StatefulSet {sts_name} "
                                                                   "successful")

    def _claim(self, sts: dict[str, Any], template: dict[str, Any], index: int, pod_name: str) -> None:
        sts_name, namespace = objects.name(sts), objects.namespace(sts)
        name = claim_name(template, sts_name, index)
        key: Key = (PERSISTENTVOLUMECLAIMS_KEY, namespace, name)
        if self.view.peek(key) is not None:
            return
        meta = copy.deepcopy(template.get("metadata") or {})
        selector = objects.dig(sts, "spec", "selector", "matchLabels")
        meta.update(name=name, namespace=namespace,
                    labels={**(meta.get("labels") or {}), **(selector if isinstance(selector, dict) else {})})
        if objects.dig(sts, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted") == "Delete":
            meta["ownerReferences"] = [pods.controller_ref(sts)]
        body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
                "spec": copy.deepcopy(template.get("spec") or {})}
        if self.view.create(PERSISTENTVOLUMECLAIMS_KEY, namespace, body) is not None:
            self.events.record(sts, COMPONENT, "SuccessfulCreate",
                               f"create Claim {name} Pod {pod_name} in StatefulSet {sts_name} success")

    def _delete(self, sts: dict[str, Any], pod: dict[str, Any]) -> None:
        if objects.deleting(pod):
            return
        self.view.delete((PODS_KEY, objects.namespace(pod), objects.name(pod)))
        self.events.record(sts, COMPONENT, "SuccessfulDelete",
                           f"delete Pod {objects.name(pod)} in StatefulSet {objects.name(sts)} successful")
