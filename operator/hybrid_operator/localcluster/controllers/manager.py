"""Fake controllers: what kube-controller-manager would do, minus running pods.

Without them nothing ever becomes ready, so ``kubectl wait``, ``helm --wait``
and Ansible's ``wait: true`` would hang.  One asyncio task follows the store's
change stream and:

* marks workloads ready (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
  Pod, PVC status as their real controllers report it);
* gives each Deployment its ReplicaSets (one per pod template, the older ones
  scaled to 0), as ``helm --wait=legacy`` looks for them; no Pods;
* garbage-collects dependents by ``ownerReferences`` (background, foreground
  and orphan propagation);
* terminates namespaces (deletes their contents, then the namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.clock import now_rfc3339
from hybrid_operator.localcluster.resources import NAMESPACES_KEY as NAMESPACE_KEY
from hybrid_operator.localcluster.resources import Registry, ResourceInfo
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions
from hybrid_operator.localcluster.storage.changes import Change
from hybrid_operator.localcluster.storage.store import Store

log = logging.getLogger("hybrid_operator.localcluster.controllers")

MANAGER = "hybrid-cluster-controller"
Key = tuple[str, str, str]  # storage key, namespace, name

DEPLOYMENT_KEY = "apps/deployments"
REPLICASET_KEY = "apps/replicasets"
HASH_LABEL = "pod-template-hash"
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
SOLID, WAITING, DANGLING = "solid", "waiting", "dangling"


def _replicas(obj: dict[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return int(value) if isinstance(value, int) else 1


def _hash(obj: dict[str, Any]) -> str:
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


def owner_refs(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The usable ownerReferences of an object's metadata (malformed entries are ignored, never fatal)."""
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if isinstance(ref, dict) and ref.get("uid")]


def controller_uid(obj: dict[str, Any]) -> str:
    """The uid of the ``controller: true`` owner, or ""."""
    return next((str(ref["uid"]) for ref in owner_refs(obj.get("metadata") or {}) if ref.get("controller") is True),
                "")


def revision(obj: dict[str, Any]) -> int:
    """A ReplicaSet's ``deployment.kubernetes.io/revision`` (0 when absent or garbled)."""
    value = (obj["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def replica_set_for(deploy: dict[str, Any], template_hash: str, rev: int) -> dict[str, Any]:
    """The ReplicaSet the deployment controller creates for the Deployment's current pod template."""
    meta = deploy["metadata"]
    spec = deploy.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.setdefault("metadata", {})
    labels = {**(template_meta.get("labels") or {}), HASH_LABEL: template_hash}
    template_meta["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: template_hash}
    rs_spec: dict[str, Any] = {"replicas": _replicas(deploy), "selector": selector, "template": template}
    if "minReadySeconds" in spec:
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{template_hash}", "namespace": meta.get("namespace", ""),
                         "labels": dict(labels), "ownerReferences": [owner],
                         "annotations": {DESIRED_ANNOTATION: str(_replicas(deploy)),
                                         REVISION_ANNOTATION: str(rev)}},
            "spec": rs_spec}


def _condition(kind: str, reason: str, message: str, old: dict[str, Any]) -> dict[str, Any]:
    now = now_rfc3339()
    previous: dict[str, Any] = next((c for c in (old.get("conditions") or []) if c.get("type") == kind), {})
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": previous.get("lastUpdateTime", now),
            "lastTransitionTime": previous.get("lastTransitionTime", now)}


def ready_status(kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status a healthy real controller would report, or None if not ours to set."""
    old = obj.get("status") or {}
    meta = obj["metadata"]
    generation = meta.get("generation", 1)
    name = meta["name"]
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        count = _replicas(obj)
        status: dict[str, Any] = {"observedGeneration": generation, "replicas": count, "readyReplicas": count,
                                  "availableReplicas": count}
        if kind == "Deployment":
            status["updatedReplicas"] = count
            status["conditions"] = [
                _condition("Available", "MinimumReplicasAvailable", "Deployment has minimum availability.", old),
                _condition("Progressing", "NewReplicaSetAvailable",
                           f'ReplicaSet "{name}-{_hash(obj)}" has successfully progressed.', old),
            ]
        elif kind == "ReplicaSet":
            status["fullyLabeledReplicas"] = count
        else:
            revision = f"{name}-{_hash(obj)}"
            status.update(currentReplicas=count, updatedReplicas=count, currentRevision=revision,
                          updateRevision=revision, collisionCount=0)
        return status
    if kind == "DaemonSet":
        return {"observedGeneration": generation, "currentNumberScheduled": 1, "desiredNumberScheduled": 1,
                "numberAvailable": 1, "numberReady": 1, "updatedNumberScheduled": 1, "numberMisscheduled": 0}
    if kind == "Job":
        if old.get("succeeded"):
            return None
        now = now_rfc3339()
        return {"startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0,
                "terminating": 0, "uncountedTerminatedPods": {},
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": now,
                     "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": now,
                     "lastTransitionTime": now}]}
    if kind == "Pod":
        if old.get("phase") == "Running":
            return None
        now = now_rfc3339()
        containers = (obj.get("spec") or {}).get("containers") or []
        return {"phase": "Running", "podIP": "10.42.0.10", "hostIP": "10.0.0.1", "startTime": now,
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                               for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                "containerStatuses": [{"name": c.get("name", ""), "ready": True, "restartCount": 0,
                                       "started": True, "image": c.get("image", ""), "imageID": "",
                                       "state": {"running": {"startedAt": now}}} for c in containers]}
    if kind == "PersistentVolumeClaim":
        if old.get("phase") == "Bound":
            return None
        spec = obj.get("spec") or {}
        return {"phase": "Bound", "accessModes": spec.get("accessModes", []),
                "capacity": ((spec.get("resources") or {}).get("requests") or {})}
    return None


def iter_all(store: Store, registry: Registry) -> Iterable[tuple[ResourceInfo, dict[str, Any]]]:
    """Every stored object with one resource that serves it."""
    seen: set[str] = set()
    for info in registry.all():
        if info.storage_key in seen:
            continue
        seen.add(info.storage_key)
        for obj in list(store.list(info.storage_key)):
            yield info, obj


class Controllers:
    """The change-stream follower that runs every fake controller.

    Indexes kept from the change stream (so every reaction is O(its dependents), never a scan):
    owner uid -> dependents, uid -> where the object lives, namespace -> its objects.
    """

    def __init__(self, api: ObjectApi) -> None:
        self.api = api
        self._task: asyncio.Task[None] | None = None
        self._dependents: dict[str, set[Key]] = defaultdict(set)
        self._uids: dict[str, Key] = {}
        self._namespaced: dict[str, set[Key]] = defaultdict(set)
        self._unowned_replica_sets: dict[str, set[Key]] = defaultdict(set)  # by namespace: adoption candidates
        self.readiness = True
        self.rollouts = True

    def start(self) -> None:
        self._queue = self.api.store.changes.subscribe()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.api.store.changes.unsubscribe(self._queue)

    async def _run(self) -> None:
        self._safely(self._resync)
        while True:
            change = await self._queue.get()
            self._safely(self._handle, change)
            await asyncio.sleep(0)

    def _resync(self) -> None:
        """Start-up: index everything, then react to every object as if it had just changed."""
        snapshot = list(iter_all(self.api.store, self.api.registry))
        for info, obj in snapshot:
            self._index(info.storage_key, None, obj)
        for info, obj in snapshot:
            self._safely(self._react, info, Change(self.api.store.rv, "MODIFIED", info.storage_key, obj, None))
        for uid in [uid for uid in self._dependents if uid not in self._uids]:
            self._collect(uid)

    def _handle(self, change: Change) -> None:
        found = self._info(change.skey)
        self._index(change.skey, change.old, change.obj if change.type != "DELETED" else None)
        if found is not None:
            self._safely(self._react, found, change)
        self._safely(self._wake_owners, change)

    def _safely(self, func: Any, *args: Any) -> None:
        try:
            func(*args)
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("controller write failed", extra={"reason": exc.reason, "error": exc.message})
        except Exception:
            log.exception("controller failed")

    def _info(self, skey: str) -> ResourceInfo | None:
        versions = self.api.registry.versions_of(skey)
        return versions[0] if versions else None

    # -- indexes ------------------------------------------------------------------

    def _index(self, skey: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            meta = obj.get("metadata") or {}
            key = (skey, str(meta.get("namespace", "")), str(meta.get("name", "")))
            uid = str(meta.get("uid", ""))
            if add:
                self._uids[uid] = key
                self._namespaced[key[1]].add(key)
                if skey == REPLICASET_KEY and not controller_uid(obj):
                    self._unowned_replica_sets[key[1]].add(key)
            else:
                if self._uids.get(uid) == key:
                    del self._uids[uid]
                _discard(self._namespaced, key[1], key)
                _discard(self._unowned_replica_sets, key[1], key)
            for owner in {str(ref["uid"]) for ref in owner_refs(meta)}:
                if add:
                    self._dependents[owner].add(key)
                else:
                    _discard(self._dependents, owner, key)

    def _live(self, uid: str) -> dict[str, Any] | None:
        """The stored object with this uid (shared, read-only), or None."""
        key = self._uids.get(uid)
        obj = self.api.store.peek(*key) if key is not None else None
        return obj if obj is not None and obj["metadata"].get("uid") == uid else None

    def _terminating(self, namespace: str) -> bool:
        ns = self.api.store.peek(NAMESPACE_KEY, "", namespace)
        return ns is not None and bool(ns["metadata"].get("deletionTimestamp"))

    # -- reactions ----------------------------------------------------------------

    def _react(self, info: ResourceInfo, change: Change) -> None:
        obj = change.obj
        meta = obj["metadata"]
        namespace = str(meta.get("namespace", ""))
        if change.type == "DELETED":
            self._collect(str(meta.get("uid", "")))
            if namespace:
                self._finish_namespace(namespace)
            if info.storage_key == REPLICASET_KEY:
                self._wake_deployment(obj)
            return
        if meta.get("deletionTimestamp"):
            self._deleting(info, obj)
            return
        if namespace and info.namespaced and self._terminating(namespace):
            self._delete_key((info.storage_key, namespace, str(meta["name"])))
            return
        if owner_refs(meta):
            self._attempt_delete((info.storage_key, namespace, str(meta["name"])))
        if self.rollouts and info.storage_key == DEPLOYMENT_KEY:
            self._sync_deployment(obj)
        elif info.storage_key == REPLICASET_KEY:
            self._wake_deployment(obj)
        if self.readiness:
            self._mark_ready(info, obj)

    def _mark_ready(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.custom:
            return
        status = ready_status(info.kind, obj)
        if status is None or status == obj.get("status"):
            return
        updated = copy.deepcopy(obj)
        updated["status"] = status
        meta = obj["metadata"]
        self.api.update(info, str(meta.get("namespace", "")), str(meta["name"]), updated,
                        WriteOptions(field_manager=MANAGER), "status" if "status" in info.subresources else "")

    def _deleting(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if info.storage_key == NAMESPACE_KEY:
            self._terminate_namespace(str(meta["name"]))
        elif ORPHAN in finalizers:
            self._orphan(info, obj)
        elif FOREGROUND in finalizers:
            self._foreground(info, obj)

    def _remove_finalizer(self, info: ResourceInfo, obj: dict[str, Any], finalizer: str) -> None:
        meta = obj["metadata"]
        fresh = self.api.store.get(info.storage_key, str(meta.get("namespace", "")), str(meta["name"]))
        if fresh is None or fresh["metadata"].get("uid") != meta.get("uid"):
            return
        if finalizer not in (fresh["metadata"].get("finalizers") or []):
            return
        fresh["metadata"]["finalizers"] = [f for f in fresh["metadata"].get("finalizers") or [] if f != finalizer]
        self.api.update(info, str(meta.get("namespace", "")), str(meta["name"]), fresh,
                        WriteOptions(field_manager=MANAGER))

    def _delete_key(self, key: Key, policy: str = "Background") -> None:
        info = self._info(key[0])
        current = self.api.store.peek(*key)
        if info is None or current is None or current["metadata"].get("deletionTimestamp"):
            return
        self._safely(self.api.delete, info, key[1], key[2],
                     WriteOptions(field_manager=MANAGER, propagation_policy=policy))

    def _strip_owners(self, key: Key, uids: set[str]) -> None:
        info = self._info(key[0])
        current = self.api.store.get(*key)
        if info is None or current is None:
            return
        refs = [r for r in current["metadata"].get("ownerReferences") or [] if str(r.get("uid")) not in uids]
        if refs:
            current["metadata"]["ownerReferences"] = refs
        else:
            current["metadata"].pop("ownerReferences", None)
        self._safely(self.api.update, info, key[1], key[2], current, WriteOptions(field_manager=MANAGER))

    # -- garbage collection (kube-controller-manager's garbagecollector) -------------

    def _owner_state(self, ref: dict[str, Any], namespace: str) -> str:
        """solid (keeps the dependent), waiting (foreground-deleting) or dangling (absent)."""
        uid = str(ref["uid"])
        owner = self._live(uid)
        if owner is None:
            return DANGLING
        owner_namespace = str(owner["metadata"].get("namespace", ""))
        if owner_namespace and owner_namespace != namespace:
            return DANGLING  # a namespaced owner must live in the dependent's namespace
        if owner["metadata"].get("deletionTimestamp") and FOREGROUND in (owner["metadata"].get("finalizers") or []):
            return WAITING
        return SOLID

    def _attempt_delete(self, key: Key) -> None:
        """Delete a dependent that has no solid owner left; drop dead references from one that has."""
        current = self.api.store.peek(*key)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return
        refs = owner_refs(current["metadata"])
        if not refs:
            return
        states = {str(ref["uid"]): self._owner_state(ref, key[1]) for ref in refs}
        if SOLID in states.values():
            stale = {uid for uid, state in states.items() if state != SOLID}
            if stale:
                self._strip_owners(key, stale)
            return
        uid = str(current["metadata"].get("uid", ""))
        if WAITING in states.values() and self._has_dependents(uid):
            if any(self._foreground_deleting(dep) for dep in self._dependent_objects(uid)):
                self._unblock(key)  # an ownership cycle: let the owner go first
            self._delete_key(key, "Foreground")
        else:
            self._delete_key(key, "Background")

    def _dependent_objects(self, uid: str) -> list[dict[str, Any]]:
        found = (self.api.store.peek(*key) for key in sorted(self._dependents.get(uid, ())))
        return [obj for obj in found if obj is not None]

    def _has_dependents(self, uid: str) -> bool:
        return bool(self._dependent_objects(uid))

    @staticmethod
    def _foreground_deleting(obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or [])

    def _unblock(self, key: Key) -> None:
        info = self._info(key[0])
        current = self.api.store.get(*key)
        if info is None or current is None:
            return
        for ref in owner_refs(current["metadata"]):
            if ref.get("blockOwnerDeletion") is True:
                ref["blockOwnerDeletion"] = False
        self._safely(self.api.update, info, key[1], key[2], current, WriteOptions(field_manager=MANAGER))

    def _collect(self, uid: str) -> None:
        """Background GC: an owner is gone, so are dependents owned only by gone owners."""
        for key in sorted(self._dependents.get(uid, ())):
            self._attempt_delete(key)

    def _orphan(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        uid = str(obj["metadata"].get("uid", ""))
        for key in sorted(self._dependents.get(uid, ())):
            self._strip_owners(key, {uid})
        self._remove_finalizer(info, obj, ORPHAN)

    def _foreground(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Delete the dependents; drop ``foregroundDeletion`` once no blocking one is left."""
        uid = str(obj["metadata"].get("uid", ""))
        for key in sorted(self._dependents.get(uid, ())):
            self._attempt_delete(key)
        if not any(_blocks(dep, uid) for dep in self._dependent_objects(uid)):
            self._remove_finalizer(info, obj, FOREGROUND)

    def _wake_owners(self, change: Change) -> None:
        """A dependent changed or went: its foreground-deleting owners may now be done."""
        uids: set[str] = set()
        for obj in (change.old, change.obj):
            if obj is not None:
                uids.update(str(ref["uid"]) for ref in owner_refs(obj.get("metadata") or {}))
        for uid in sorted(uids):
            owner = self._live(uid)
            key = self._uids.get(uid)
            info = self._info(key[0]) if key is not None else None
            if owner is not None and info is not None and self._foreground_deleting(owner):
                self._foreground(info, owner)

    # -- namespaces (kube-controller-manager's namespace controller) ------------------

    def _terminate_namespace(self, namespace: str) -> None:
        for key in sorted(self._namespaced.get(namespace, ())):
            info = self._info(key[0])
            if info is not None and info.namespaced:
                self._delete_key(key)
        self._finish_namespace(namespace)

    def _finish_namespace(self, namespace: str) -> None:
        ns_info = self._info(NAMESPACE_KEY)
        ns = self.api.store.peek(NAMESPACE_KEY, "", namespace)
        if ns_info is None or ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if ns["metadata"].get("finalizers"):
            return  # its own finalizers first; their removal brings us back here
        if not any(self.api.store.peek(*key) is not None for key in self._namespaced.get(namespace, ())):
            self.api.remove_now(ns_info, ns)

    # -- Deployments (kube-controller-manager's deployment controller, minus pods) ---

    def _sync_deployment(self, seen: dict[str, Any]) -> None:
        """One ReplicaSet per pod template: the current one scaled like the Deployment, the rest at 0."""
        meta = seen["metadata"]
        namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
        deploy = self._live(uid)
        rs_info = next((i for i in self.api.registry.versions_of(REPLICASET_KEY) if i.version == "v1"), None)
        if deploy is None or rs_info is None or deploy["metadata"].get("deletionTimestamp"):
            return
        if self._terminating(namespace):
            return
        spec = deploy.get("spec") or {}
        self._adopt_replica_sets(rs_info, deploy)
        owned = self._owned_replica_sets(uid)
        template_hash = _hash(deploy)
        current = next((rs for rs in owned if _labels(rs).get(HASH_LABEL) == template_hash), None)
        older = [rs for rs in owned if rs is not current]
        latest = max((revision(rs) for rs in older), default=0)
        if current is None:
            if spec.get("paused"):
                return
            self._safely(self.api.create, rs_info, namespace, replica_set_for(deploy, template_hash, latest + 1),
                         WriteOptions(field_manager=MANAGER))
        else:
            wanted = revision(current) if revision(current) > latest else latest + 1
            self._scale_replica_set(rs_info, current, _replicas(deploy), wanted)
        for rs in older:
            self._scale_replica_set(rs_info, rs, 0, revision(rs))
        self._prune_history(older, spec.get("revisionHistoryLimit", 10))

    def _adopt_replica_sets(self, info: ResourceInfo, deploy: dict[str, Any]) -> None:
        """Take over ReplicaSets left without a controller (``--cascade=orphan``) that the selector matches."""
        meta = deploy["metadata"]
        selector = (deploy.get("spec") or {}).get("selector") or {}
        wanted = selector.get("matchLabels")
        if not isinstance(wanted, dict) or not wanted or selector.get("matchExpressions"):
            return
        namespace = str(meta.get("namespace", ""))
        for key in sorted(self._unowned_replica_sets.get(namespace, ())):
            rs = self.api.store.peek(*key)
            if rs is None or controller_uid(rs) or rs["metadata"].get("deletionTimestamp"):
                continue
            if any(_labels(rs).get(k) != v for k, v in wanted.items()):
                continue
            fresh = copy.deepcopy(rs)
            fresh["metadata"]["ownerReferences"] = [*owner_refs(fresh["metadata"]), {
                "apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True}]
            self._safely(self.api.update, info, key[1], key[2], fresh, WriteOptions(field_manager=MANAGER))
            self._index(REPLICASET_KEY, rs, self.api.store.peek(*key))

    def _owned_replica_sets(self, uid: str) -> list[dict[str, Any]]:
        keys = sorted(key for key in self._dependents.get(uid, ()) if key[0] == REPLICASET_KEY)
        found = (self.api.store.peek(*key) for key in keys)
        return [rs for rs in found if rs is not None and controller_uid(rs) == uid
                and not rs["metadata"].get("deletionTimestamp")]

    def _scale_replica_set(self, info: ResourceInfo, rs: dict[str, Any], replicas: int, rev: int) -> None:
        meta = rs["metadata"]
        annotations = dict(meta.get("annotations") or {})
        wanted = {**annotations, REVISION_ANNOTATION: str(rev)}
        if replicas:
            wanted[DESIRED_ANNOTATION] = str(replicas)
        if _replicas(rs) == replicas and wanted == annotations:
            return
        fresh = copy.deepcopy(rs)
        fresh.setdefault("spec", {})["replicas"] = replicas
        fresh["metadata"]["annotations"] = wanted
        self._safely(self.api.update, info, str(meta.get("namespace", "")), str(meta["name"]), fresh,
                     WriteOptions(field_manager=MANAGER))

    def _prune_history(self, older: list[dict[str, Any]], limit: Any) -> None:
        """Keep at most ``revisionHistoryLimit`` old ReplicaSets, dropping the oldest revisions."""
        keep = limit if isinstance(limit, int) and limit >= 0 else 10
        ranked = sorted(older, key=revision)
        for rs in ranked[:max(0, len(ranked) - keep)]:
            meta = rs["metadata"]
            self._delete_key((REPLICASET_KEY, str(meta.get("namespace", "")), str(meta["name"])))

    def _wake_deployment(self, rs: dict[str, Any]) -> None:
        """A ReplicaSet changed or went: re-sync the Deployment controlling it (as kube does)."""
        owner = self._live(controller_uid(rs))
        if self.rollouts and owner is not None and owner.get("kind") == "Deployment":
            self._sync_deployment(owner)


def _discard(index: dict[str, set[Key]], bucket: str, key: Key) -> None:
    members = index.get(bucket)
    if members is not None:
        members.discard(key)
        if not members:
            del index[bucket]


def _blocks(dependent: dict[str, Any], uid: str) -> bool:
    """Whether ``dependent`` holds back its owner ``uid``'s foreground deletion."""
    return any(str(ref["uid"]) == uid and ref.get("blockOwnerDeletion") is True
               for ref in owner_refs(dependent["metadata"]))


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = obj["metadata"].get("labels")
    return labels if isinstance(labels, dict) else {}
