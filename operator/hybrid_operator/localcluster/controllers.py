"""Fake controllers: what kube-controller-manager would do, minus running pods.

Without them nothing ever becomes ready, so ``kubectl wait``, ``helm --wait``
and Ansible's ``wait: true`` would hang.  One asyncio task follows the store's
change stream and:

* marks workloads ready (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
  Pod, PVC status as their real controllers report it);
* garbage-collects dependents by ``ownerReferences`` (background, foreground
  and orphan propagation);
* terminates namespaces (deletes their contents, then the namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import logging
from collections import defaultdict
from typing import Any

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.api import NAMESPACE_KEY, ObjectApi, WriteOptions, iter_all, now_rfc3339
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.store import Change

log = logging.getLogger("hybrid_operator.localcluster.controllers")

MANAGER = "hybrid-cluster-controller"
Key = tuple[str, str, str]  # storage key, namespace, name


def _replicas(obj: dict[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return int(value) if isinstance(value, int) else 1


def _hash(obj: dict[str, Any]) -> str:
    template = (obj.get("spec") or {}).get("template") or {}
    return hashlib.sha256(repr(template).encode()).hexdigest()[:10]


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


class Controllers:
    """The change-stream follower that runs every fake controller."""

    def __init__(self, api: ObjectApi) -> None:
        self.api = api
        self._task: asyncio.Task[None] | None = None
        self._dependents: dict[str, set[Key]] = defaultdict(set)
        self.readiness = True

    def start(self) -> None:
        self._queue = self.api.store.subscribe()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.api.store.unsubscribe(self._queue)

    async def _run(self) -> None:
        for info, obj in list(iter_all(self.api.store, self.api.registry)):
            self._index(info.storage_key, None, obj)
        for info, obj in list(iter_all(self.api.store, self.api.registry)):
            self._safely(self._react, info, Change(self.api.store.rv, "MODIFIED", info.storage_key, obj, None))
        self._collect_orphans()
        while True:
            change = await self._queue.get()
            found = self._info(change.skey)
            self._index(change.skey, change.old, change.obj if change.type != "DELETED" else None)
            if found is not None:
                self._safely(self._react, found, change)
            await asyncio.sleep(0)

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

    # -- owner index --------------------------------------------------------------

    def _index(self, skey: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            meta = obj["metadata"]
            key = (skey, str(meta.get("namespace", "")), str(meta["name"]))
            for ref in meta.get("ownerReferences") or []:
                uid = str(ref.get("uid", ""))
                if add:
                    self._dependents[uid].add(key)
                else:
                    self._dependents[uid].discard(key)

    # -- reactions ----------------------------------------------------------------

    def _react(self, info: ResourceInfo, change: Change) -> None:
        obj = change.obj
        meta = obj["metadata"]
        if change.type == "DELETED":
            self._collect(str(meta.get("uid", "")), str(meta.get("namespace", "")))
            namespace = str(meta.get("namespace", ""))
            if namespace:
                self._finish_namespace(namespace)
            return
        if meta.get("deletionTimestamp"):
            self._deleting(info, obj)
            return
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
        uid = str(meta.get("uid", ""))
        if info.storage_key == NAMESPACE_KEY:
            self._terminate_namespace(str(meta["name"]))
            return
        if "orphan" in finalizers:
            for key in list(self._dependents.get(uid, ())):
                self._strip_owner(key, uid)
            self._remove_finalizer(info, obj, "orphan")
        elif "foregroundDeletion" in finalizers:
            remaining = [key for key in self._dependents.get(uid, ()) if self._exists(key)]
            for key in remaining:
                self._delete_key(key, "Foreground")
            if not remaining:
                self._remove_finalizer(info, obj, "foregroundDeletion")

    def _remove_finalizer(self, info: ResourceInfo, obj: dict[str, Any], finalizer: str) -> None:
        meta = obj["metadata"]
        fresh = self.api.store.get(info.storage_key, str(meta.get("namespace", "")), str(meta["name"]))
        if fresh is None:
            return
        fresh["metadata"]["finalizers"] = [f for f in fresh["metadata"].get("finalizers") or [] if f != finalizer]
        self.api.update(info, str(meta.get("namespace", "")), str(meta["name"]), fresh,
                        WriteOptions(field_manager=MANAGER))

    def _exists(self, key: Key) -> bool:
        return self.api.store.get(*key) is not None

    def _delete_key(self, key: Key, policy: str = "Background") -> None:
        info = self._info(key[0])
        if info is not None and self._exists(key):
            current = self.api.store.get(*key)
            if current is not None and current["metadata"].get("deletionTimestamp"):
                return
            self._safely(self.api.delete, info, key[1], key[2],
                         WriteOptions(field_manager=MANAGER, propagation_policy=policy))

    def _strip_owner(self, key: Key, uid: str) -> None:
        info = self._info(key[0])
        current = self.api.store.get(*key)
        if info is None or current is None:
            return
        refs = [r for r in current["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
        if refs:
            current["metadata"]["ownerReferences"] = refs
        else:
            current["metadata"].pop("ownerReferences", None)
        self._safely(self.api.update, info, key[1], key[2], current, WriteOptions(field_manager=MANAGER))

    def _collect(self, uid: str, namespace: str) -> None:
        """Background GC: an owner is gone, so are dependents owned only by gone owners."""
        for key in list(self._dependents.get(uid, ())):
            current = self.api.store.get(*key)
            if current is None:
                continue
            owners = current["metadata"].get("ownerReferences") or []
            if all(not self._uid_alive(str(ref.get("uid", "")), key[1]) for ref in owners):
                self._delete_key(key)
        self._dependents.pop(uid, None)

    def _uid_alive(self, uid: str, namespace: str) -> bool:
        for _, obj in iter_all(self.api.store, self.api.registry):
            if obj["metadata"].get("uid") == uid:
                return not obj["metadata"].get("deletionTimestamp") or bool(
                    obj["metadata"].get("finalizers"))
        return False

    def _collect_orphans(self) -> None:
        alive = {str(obj["metadata"].get("uid")) for _, obj in iter_all(self.api.store, self.api.registry)}
        for uid in [uid for uid in self._dependents if uid not in alive]:
            self._collect(uid, "")

    def _terminate_namespace(self, namespace: str) -> None:
        remaining = 0
        for info, obj in list(iter_all(self.api.store, self.api.registry)):
            if info.namespaced and obj["metadata"].get("namespace") == namespace:
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    self._safely(self.api.delete, info, namespace, str(obj["metadata"]["name"]),
                                 WriteOptions(field_manager=MANAGER))
        if remaining == 0 or not self._namespace_has_content(namespace):
            self._finish_namespace(namespace)

    def _namespace_has_content(self, namespace: str) -> bool:
        return any(info.namespaced and obj["metadata"].get("namespace") == namespace
                   for info, obj in iter_all(self.api.store, self.api.registry))

    def _finish_namespace(self, namespace: str) -> None:
        ns_info = self._info(NAMESPACE_KEY)
        ns = self.api.store.get(NAMESPACE_KEY, "", namespace)
        if ns_info is None or ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if not self._namespace_has_content(namespace):
            self.api.remove_now(ns_info, ns)
