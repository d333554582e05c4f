"""Deployments and their ReplicaSets, as kube-controller-manager's deployment controller keeps them.

Each Deployment gets one ReplicaSet per pod template, named after the
template's hash: the current one scaled like the Deployment, older ones at 0
and pruned to ``revisionHistoryLimit``, each carrying its revision (as does
the Deployment, in ``deployment.kubernetes.io/revision``), so that ``kubectl
rollout history/undo`` and ``helm --wait=legacy`` find what they look for;
every scaling is a ``ScalingReplicaSet`` Event.  ReplicaSets left without a
controller (``--cascade=orphan``) are adopted by the Deployment whose
``matchLabels`` select them; a paused Deployment gets no new ReplicaSet.
With the simulated node, the Deployment's status adds up its ReplicaSets'
(which count their Pods); without it, :mod:`.readiness` reports it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import TYPE_CHECKING, Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers.view import ClusterView, as_manager, safely
from hybrid_operator.localcluster.objects import Obj
from hybrid_operator.localcluster.resources import DEPLOYMENTS_KEY, REPLICASETS_KEY, ResourceInfo
from hybrid_operator.localcluster.semantics.metadata import NAME_SUFFIX_ALPHABET

HASH_LABEL = "pod-template-hash"
HASH_ALPHABET = NAME_SUFFIX_ALPHABET  # kube's rand.SafeEncodeString alphabet serves both
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
COMPONENT = "deployment-controller"

if TYPE_CHECKING:
    from hybrid_operator.localcluster.controllers.events import EventRecorder


def desired_replicas(obj: dict[str, Any]) -> int:
    """``spec.replicas`` (1 when absent or not a number)."""
    value = (obj.get("spec") or {}).get("replicas", 1)
    return int(value) if isinstance(value, int) else 1


def template_hash(obj: dict[str, Any]) -> str:
    """A stable pod-template-hash (same alphabet as kube's, independent of key order)."""
    template = _semantic((obj.get("spec") or {}).get("template") or {})
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).digest()
    return "".join(HASH_ALPHABET[byte % len(HASH_ALPHABET)] for byte in digest[:10])


def _semantic(value: Any) -> Any:
    """``value`` without nulls and empty objects: as a Go struct would see it (``rollout undo`` sends
    ``creationTimestamp: null`` and ``resources: {}``, which must not count as a new template)."""
    if isinstance(value, dict):
        cleaned = {key: _semantic(item) for key, item in value.items() if item is not None}
        return {key: item for key, item in cleaned.items() if item != {}}
    if isinstance(value, list):
        return [_semantic(item) for item in value]
    return value


def revision(obj: dict[str, Any]) -> int:
    """A ReplicaSet's ``deployment.kubernetes.io/revision`` (0 when absent or garbled)."""
    value = (obj["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _controller_ref(deploy: dict[str, Any]) -> dict[str, Any]:
    meta = deploy["metadata"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def replica_set_for(deploy: dict[str, Any], pod_template_hash: str, rev: int) -> dict[str, Any]:
    """The ReplicaSet the deployment controller creates for the Deployment's current pod template."""
    meta = deploy["metadata"]
    spec = deploy.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.setdefault("metadata", {})
    labels = {**(template_meta.get("labels") or {}), HASH_LABEL: pod_template_hash}
    template_meta["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_template_hash}
    rs_spec: dict[str, Any] = {"replicas": desired_replicas(deploy), "selector": selector, "template": template}
    if "minReadySeconds" in spec:
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{pod_template_hash}", "namespace": meta.get("namespace", ""),
                         "labels": dict(labels), "ownerReferences": [_controller_ref(deploy)],
                         "annotations": {DESIRED_ANNOTATION: str(desired_replicas(deploy)),
                                         REVISION_ANNOTATION: str(rev)}},
            "spec": rs_spec}


def _match_labels_only(deploy: dict[str, Any]) -> dict[str, Any]:
    """The selector's ``matchLabels`` when that is all it has (the only selectors adoption handles), else {}."""
    selector = (deploy.get("spec") or {}).get("selector") or {}
    wanted = selector.get("matchLabels")
    if not isinstance(wanted, dict) or selector.get("matchExpressions"):
        return {}
    return wanted


def _by_template(owned: list[Obj], current_hash: str) -> tuple[Obj | None, list[Obj]]:
    """The ReplicaSet of the current pod template (if any), and the older ones."""
    current = next((rs for rs in owned if objects.labels(rs).get(HASH_LABEL) == current_hash), None)
    return current, [rs for rs in owned if rs is not current]


def condition(kind: str, status: str, reason: str, message: str, old: dict[str, Any]) -> dict[str, Any]:
    """A workload condition; its times kept from ``old``'s condition of that type while nothing changed."""
    now = clock.now_rfc3339()
    previous: dict[str, Any] = next((c for c in (old.get("conditions") or [])
                                     if isinstance(c, dict) and c.get("type") == kind), {})
    same = previous.get("status") == status
    unchanged = same and previous.get("reason") == reason and previous.get("message") == message
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": previous.get("lastUpdateTime", now) if unchanged else now,
            "lastTransitionTime": previous.get("lastTransitionTime", now) if same else now}


def _max_unavailable(deploy: dict[str, Any], desired: int) -> int:
    """``maxUnavailable`` as a count (a percentage rounds down), 0 for Recreate."""
    strategy = objects.dig(deploy, "spec", "strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = objects.dig(strategy, "rollingUpdate", "maxUnavailable")
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return desired * int(value[:-1]) // 100
    return value if isinstance(value, int) else desired * 25 // 100


def deployment_status(deploy: dict[str, Any], owned: list[dict[str, Any]], current: dict[str, Any] | None) -> \
        dict[str, Any]:
    """A Deployment's status from its ReplicaSets' (kube omits the zero counts)."""
    desired = desired_replicas(deploy)
    old = deploy.get("status") or {}

    def total(field: str, among: list[dict[str, Any]]) -> int:
        return sum(int(objects.dig(rs, "status", field) or 0) for rs in among)

    counts = {"replicas": total("replicas", owned), "updatedReplicas": total("replicas", [current] if current else []),
              "readyReplicas": total("readyReplicas", owned), "availableReplicas": total("availableReplicas", owned)}
    counts["unavailableReplicas"] = max(desired - counts["availableReplicas"], 0)
    status: dict[str, Any] = {"observedGeneration": objects.meta(deploy).get("generation", 1)}
    status.update({key: value for key, value in counts.items() if value})
    if counts["availableReplicas"] >= desired - _max_unavailable(deploy, desired):
        available = condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                              old)
    else:
        available = condition("Available", "False", "MinimumReplicasUnavailable",
                              "Deployment does not have minimum availability.", old)
    status["conditions"] = [available, _progressing(deploy, counts, current, old)]
    return status


def _progressing(deploy: dict[str, Any], counts: dict[str, int], current: dict[str, Any] | None,
                 old: dict[str, Any]) -> dict[str, Any]:
    if objects.dig(deploy, "spec", "paused"):
        return condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", old)
    if current is None:
        return condition("Progressing", "True", "NewReplicaSetCreated", "Created new replica set", old)
    desired = desired_replicas(deploy)
    name = objects.name(current)
    if counts["updatedReplicas"] == desired == counts["replicas"] == counts["availableReplicas"]:
        return condition("Progressing", "True", "NewReplicaSetAvailable",
                         f'ReplicaSet "{name}" has successfully progressed.', old)
    return condition("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.', old)


class DeploymentController:
    """Keeps each Deployment's ReplicaSets in line with its pod template and replica count."""

    def __init__(self, view: ClusterView, events: EventRecorder | None = None, report_status: bool = False) -> None:
        self.view = view
        self.events = events
        self.report_status = report_status

    def sync(self, seen: dict[str, Any]) -> None:
        """One ReplicaSet per pod template: the current one scaled like the Deployment, the rest at 0."""
        deploy = self._live(seen)
        rs_info = self._replica_set_info()
        if deploy is None or rs_info is None:
            return
        spec = deploy.get("spec") or {}
        self._adopt_replica_sets(rs_info, deploy)
        current_hash = template_hash(deploy)
        current, older = _by_template(self._owned_replica_sets(objects.uid(deploy)), current_hash)
        if current is None and spec.get("paused"):
            return
        latest = max((revision(rs) for rs in older), default=0)
        if current is None:
            body = replica_set_for(deploy, current_hash, latest + 1)
            safely(self.view.api.create, rs_info, objects.namespace(deploy), body, as_manager())
            self._scaled(deploy, "up", str(body["metadata"]["name"]), 0, desired_replicas(deploy))
        else:
            self._scale_replica_set(deploy, rs_info, current, desired_replicas(deploy),
                                    max(revision(current), latest + 1))
        for rs in older:
            self._scale_replica_set(deploy, rs_info, rs, 0, revision(rs))
        self._prune_history(older, spec.get("revisionHistoryLimit", 10))
        self._report(deploy, current_hash)

    def _report(self, deploy: dict[str, Any], current_hash: str) -> None:
        """The revision annotation and (with the simulated node) the status, from the ReplicaSets."""
        owned = self._owned_replica_sets(objects.uid(deploy))
        current, _ = _by_template(owned, current_hash)
        key = (str(deploy["metadata"].get("namespace", "")), objects.name(deploy))
        wanted = str(revision(current)) if current is not None else None
        if wanted and (deploy["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) != wanted:
            def annotate(fresh: dict[str, Any]) -> None:
                fresh["metadata"].setdefault("annotations", {})[REVISION_ANNOTATION] = wanted

            self.view.update((DEPLOYMENTS_KEY, *key), annotate)
        if self.report_status:
            fresh = self.view.peek((DEPLOYMENTS_KEY, *key))
            if fresh is not None:
                self.view.set_status((DEPLOYMENTS_KEY, *key), deployment_status(fresh, owned, current))

    def _scaled(self, deploy: dict[str, Any], direction: str, name: str, old: int, new: int) -> None:
        if self.events is not None:
            self.events.record(deploy, COMPONENT, "ScalingReplicaSet",
                               f"Scaled {direction} replica set {name} from {old} to {new}")

    def _replica_set_info(self) -> ResourceInfo | None:
        return next((i for i in self.view.api.registry.versions_of(REPLICASETS_KEY) if i.version == "v1"), None)

    def _live(self, seen: dict[str, Any]) -> dict[str, Any] | None:
        """The stored Deployment, unless it or its namespace is being deleted."""
        deploy = self.view.live(objects.uid(seen))
        if deploy is None or objects.deleting(deploy) or self.view.terminating(objects.namespace(seen)):
            return None
        return deploy

    def wake(self, rs: dict[str, Any]) -> None:
        """A ReplicaSet changed or went: re-sync the Deployment controlling it (as kube does)."""
        owner = self.view.live(objects.controller_uid(rs))
        if owner is not None and owner.get("kind") == "Deployment":
            self.sync(owner)

    def _adopt_replica_sets(self, info: ResourceInfo, deploy: dict[str, Any]) -> None:
        """Take over ReplicaSets left without a controller (``--cascade=orphan``) that the selector matches."""
        wanted = _match_labels_only(deploy)
        if not wanted:
            return
        for key in self.view.index.unowned_replica_sets(objects.namespace(deploy)):
            rs = self.view.peek(key)
            if rs is None or objects.controller_uid(rs) or objects.deleting(rs):
                continue
            if any(objects.labels(rs).get(k) != v for k, v in wanted.items()):
                continue
            fresh = copy.deepcopy(rs)
            fresh["metadata"]["ownerReferences"] = [*objects.owner_refs(fresh), _controller_ref(deploy)]
            safely(self.view.api.update, info, key[1], key[2], fresh, as_manager())
            self.view.index.update(REPLICASETS_KEY, rs, self.view.peek(key))

    def _owned_replica_sets(self, uid: str) -> list[dict[str, Any]]:
        found = (self.view.peek(key) for key in self.view.index.dependents(uid) if key[0] == REPLICASETS_KEY)
        return [rs for rs in found if rs is not None and objects.controller_uid(rs) == uid
                and not objects.deleting(rs)]

    def _scale_replica_set(self, deploy: dict[str, Any], info: ResourceInfo, rs: dict[str, Any], replicas: int,
                           rev: int) -> None:
        annotations = dict(rs["metadata"].get("annotations") or {})
        wanted = {**annotations, REVISION_ANNOTATION: str(rev)}
        if replicas:
            wanted[DESIRED_ANNOTATION] = str(replicas)
        before = desired_replicas(rs)
        if before == replicas and wanted == annotations:
            return
        fresh = copy.deepcopy(rs)
        fresh.setdefault("spec", {})["replicas"] = replicas
        fresh["metadata"]["annotations"] = wanted
        safely(self.view.api.update, info, objects.namespace(rs), objects.name(rs), fresh, as_manager())
        if before != replicas:
            self._scaled(deploy, "up" if replicas > before else "down", objects.name(rs), before, replicas)

    def _prune_history(self, older: list[dict[str, Any]], limit: Any) -> None:
        """Keep at most ``revisionHistoryLimit`` old ReplicaSets, dropping the oldest revisions."""
        keep = limit if isinstance(limit, int) and limit >= 0 else 10
        ranked = sorted(older, key=revision)
        for rs in ranked[:max(0, len(ranked) - keep)]:
            self.view.delete((REPLICASETS_KEY, objects.namespace(rs), objects.name(rs)))
