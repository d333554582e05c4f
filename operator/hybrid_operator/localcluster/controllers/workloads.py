"""Deployments and their ReplicaSets, as kube-controller-manager's deployment controller keeps them (minus pods).

Each Deployment gets one ReplicaSet per pod template, named after the
template's hash: the current one scaled like the Deployment, older ones at 0
and pruned to ``revisionHistoryLimit``, each carrying its revision, so that
``kubectl rollout history/undo`` and ``helm --wait=legacy`` find what they
look for.  ReplicaSets left without a controller (``--cascade=orphan``) are
adopted by the Deployment whose ``matchLabels`` select them; a paused
Deployment gets no new ReplicaSet.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.view import ClusterView, as_manager, safely
from hybrid_operator.localcluster.objects import Obj
from hybrid_operator.localcluster.resources import REPLICASETS_KEY, ResourceInfo
from hybrid_operator.localcluster.semantics.metadata import NAME_SUFFIX_ALPHABET

HASH_LABEL = "pod-template-hash"
HASH_ALPHABET = NAME_SUFFIX_ALPHABET  # kube's rand.SafeEncodeString alphabet serves both
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_ANNOTATION = "deployment.kubernetes.io/desired-replicas"


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


class DeploymentController:
    """Keeps each Deployment's ReplicaSets in line with its pod template and replica count."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

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
            safely(self.view.api.create, rs_info, objects.namespace(deploy),
                   replica_set_for(deploy, current_hash, latest + 1), as_manager())
        else:
            self._scale_replica_set(rs_info, current, desired_replicas(deploy), max(revision(current), latest + 1))
        for rs in older:
            self._scale_replica_set(rs_info, rs, 0, revision(rs))
        self._prune_history(older, spec.get("revisionHistoryLimit", 10))

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

    def _scale_replica_set(self, info: ResourceInfo, rs: dict[str, Any], replicas: int, rev: int) -> None:
        annotations = dict(rs["metadata"].get("annotations") or {})
        wanted = {**annotations, REVISION_ANNOTATION: str(rev)}
        if replicas:
            wanted[DESIRED_ANNOTATION] = str(replicas)
        if desired_replicas(rs) == replicas and wanted == annotations:
            return
        fresh = copy.deepcopy(rs)
        fresh.setdefault("spec", {})["replicas"] = replicas
        fresh["metadata"]["annotations"] = wanted
        safely(self.view.api.update, info, objects.namespace(rs), objects.name(rs), fresh, as_manager())

    def _prune_history(self, older: list[dict[str, Any]], limit: Any) -> None:
        """Keep at most ``revisionHistoryLimit`` old ReplicaSets, dropping the oldest revisions."""
        keep = limit if isinstance(limit, int) and limit >= 0 else 10
        ranked = sorted(older, key=revision)
        for rs in ranked[:max(0, len(ranked) - keep)]:
            self.view.delete((REPLICASETS_KEY, objects.namespace(rs), objects.name(rs)))
