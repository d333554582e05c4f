"""The controller manager: one asyncio task that follows the change feed and runs every controller.

Like kube-controller-manager's informers, it first lists everything (and
reacts to each object as if it had just changed, so a restarted server
finishes what it left undone), then handles each committed change in order:
the index follows, then the change goes to the controllers that care: the
garbage collector (dependents, owners waiting in foreground deletion),
namespace termination, Deployments and their ReplicaSets, and readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.garbagecollector import GarbageCollector
from hybrid_operator.localcluster.controllers.namespaces import NamespaceController
from hybrid_operator.localcluster.controllers.readiness import ReadinessController
from hybrid_operator.localcluster.controllers.view import ClusterView, safely
from hybrid_operator.localcluster.controllers.workloads import DeploymentController
from hybrid_operator.localcluster.resources import (
    DEPLOYMENTS_KEY,
    NAMESPACES_KEY,
    REPLICASETS_KEY,
    Registry,
    ResourceInfo,
)
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.storage.changes import Change
from hybrid_operator.localcluster.storage.store import Store


def iter_all(store: Store, registry: Registry) -> Iterable[tuple[ResourceInfo, dict[str, Any]]]:
    """Every stored object with one resource that serves it."""
    seen: set[str] = set()
    for info in registry.all():
        if info.storage_key in seen:
            continue
        seen.add(info.storage_key)
        for obj in list(store.list(info.storage_key)):
            yield info, obj


class ControllerManager:
    """The change-feed follower that runs every controller."""

    def __init__(self, api: ObjectApi) -> None:
        self.view = ClusterView(api)
        self.garbage_collector = GarbageCollector(self.view)
        self.namespaces = NamespaceController(self.view)
        self.deployments = DeploymentController(self.view)
        self.readiness = ReadinessController(self.view)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._queue = self.view.api.store.changes.subscribe()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.view.api.store.changes.unsubscribe(self._queue)

    async def _run(self) -> None:
        safely(self._resync)
        while True:
            change = await self._queue.get()
            safely(self._handle, change)
            await asyncio.sleep(0)

    def _resync(self) -> None:
        """Start-up: index everything, then react to every object as if it had just changed."""
        store = self.view.api.store
        snapshot = list(iter_all(store, self.view.api.registry))
        for info, obj in snapshot:
            self.view.index.update(info.storage_key, None, obj)
        for info, obj in snapshot:
            safely(self._react, info, Change(store.rv, "MODIFIED", info.storage_key, obj, None))
        for uid in self.view.index.missing_owners():
            self.garbage_collector.collect(uid)

    def _handle(self, change: Change) -> None:
        found = self.view.info(change.skey)
        self.view.index.update(change.skey, change.old, change.obj if change.type != "DELETED" else None)
        if found is not None:
            safely(self._react, found, change)
        safely(self.garbage_collector.wake_owners, change)

    def _react(self, info: ResourceInfo, change: Change) -> None:
        obj = change.obj
        if change.type == "DELETED":
            self._gone(info, obj)
        elif objects.deleting(obj):
            self._deleting(info, obj)
        else:
            self._changed(info, obj)

    def _gone(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        self.garbage_collector.collect(objects.uid(obj))
        if objects.namespace(obj):
            self.namespaces.finish(objects.namespace(obj))
        if info.storage_key == REPLICASETS_KEY:
            self.deployments.wake(obj)

    def _deleting(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.storage_key == NAMESPACES_KEY:
            self.namespaces.terminate(objects.name(obj))
        else:
            self.garbage_collector.finalize(info, obj)

    def _changed(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        namespace = objects.namespace(obj)
        key = (info.storage_key, namespace, objects.name(obj))
        if namespace and info.namespaced and self.view.terminating(namespace):
            self.view.delete(key)
            return
        if objects.owner_refs(obj):
            self.garbage_collector.attempt_delete(key)
        if info.storage_key == DEPLOYMENTS_KEY:
            self.deployments.sync(obj)
        elif info.storage_key == REPLICASETS_KEY:
            self.deployments.wake(obj)
        self.readiness.mark(info, obj)
