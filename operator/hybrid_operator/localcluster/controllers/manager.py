"""The controller manager: one asyncio task that follows the change feed and runs every controller.

Like kube-controller-manager's informers, it first lists everything (and
reacts to each object as if it had just changed, so a restarted server
finishes what it left undone), then handles each committed change in order:
the index follows, then the change goes to the controllers that care.  The
garbage collector and namespace termination react at once; every other
controller's sync is queued with :meth:`~.view.ClusterView.soon`, keyed by
object, and the queued syncs run only once every committed change has been
handled (so the index has caught up with the controllers' own writes, and a
ReplicaSet never counts its Pods before it sees the ones it just made): a
burst of changes to one workload's Pods costs one sync of the workload.  A change to an
object with a controlling owner (a Pod of a ReplicaSet, a ReplicaSet of a
Deployment, a Job of a CronJob) also queues the owner's sync.

With the simulated node (the default) the node, its kubelet and the
workload controllers make and run Pods, and workloads report what their
Pods do; without it (``--no-simulated-node``) no Pod is made and
:mod:`.readiness` reports every workload ready, as before the node existed.
Namespaces' defaults, Services' endpoints and storage run either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.cronjobs import CronJobController
from hybrid_operator.localcluster.controllers.daemonsets import DaemonSetController
from hybrid_operator.localcluster.controllers.endpoints import EndpointsController
from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.garbagecollector import GarbageCollector
from hybrid_operator.localcluster.controllers.jobs import JobController
from hybrid_operator.localcluster.controllers.kubelet import Kubelet
from hybrid_operator.localcluster.controllers.namespaces import NamespaceController, NamespaceDefaults
from hybrid_operator.localcluster.controllers.node import NodeController
from hybrid_operator.localcluster.controllers.readiness import ReadinessController
from hybrid_operator.localcluster.controllers.replicasets import ReplicaSetController
from hybrid_operator.localcluster.controllers.statefulsets import StatefulSetController
from hybrid_operator.localcluster.controllers.storage import StorageController
from hybrid_operator.localcluster.controllers.view import ClusterView, safely
from hybrid_operator.localcluster.controllers.workloads import DeploymentController
from hybrid_operator.localcluster.resources import (
    CONFIGMAPS_KEY,
    CRONJOBS_KEY,
    DAEMONSETS_KEY,
    DEPLOYMENTS_KEY,
    JOBS_KEY,
    NAMESPACES_KEY,
    NODES_KEY,
    PERSISTENTVOLUMECLAIMS_KEY,
    PERSISTENTVOLUMES_KEY,
    PODS_KEY,
    REPLICASETS_KEY,
    SERVICEACCOUNTS_KEY,
    SERVICES_KEY,
    STATEFULSETS_KEY,
    Registry,
    ResourceInfo,
)
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.storage.changes import Change
from hybrid_operator.localcluster.storage.store import Store

Sync = Callable[[dict[str, Any]], None]

# Dependents whose changes wake their controlling owner, and the owners that care.
WAKING = frozenset({PODS_KEY, REPLICASETS_KEY, JOBS_KEY})
WORKLOADS = frozenset({DEPLOYMENTS_KEY, REPLICASETS_KEY, STATEFULSETS_KEY, DAEMONSETS_KEY, JOBS_KEY, CRONJOBS_KEY})
SETTLE_ROUNDS = 20  # rounds of (drain the feed, run the queued syncs) before requests get a turn


@dataclass(frozen=True)
class ControllerSettings:
    """What the controllers need to know about the server they run in."""

    simulated_node: bool = True
    api_port: int = 0  # where the ``kubernetes`` Service's endpoints point (0: no such Service)
    ca_pem: str = ""  # the cluster CA, published in every namespace's ``kube-root-ca.crt``


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

    def __init__(self, api: ObjectApi, settings: ControllerSettings | None = None) -> None:
        self.settings = settings or ControllerSettings()
        view = self.view = ClusterView(api)
        self.events = EventRecorder(view)
        self.garbage_collector = GarbageCollector(view)
        self.namespaces = NamespaceController(view)
        self.defaults = NamespaceDefaults(view, self.settings.ca_pem)
        simulated = self.settings.simulated_node
        self.deployments = DeploymentController(view, self.events, report_status=simulated)
        self.storage = StorageController(view)
        self.endpoints = EndpointsController(view, load_balancers=simulated)
        self.syncs: dict[str, Sync] = {
            DEPLOYMENTS_KEY: self.deployments.sync, SERVICES_KEY: self.endpoints.sync,
            PERSISTENTVOLUMECLAIMS_KEY: self.storage.sync_claim, PERSISTENTVOLUMES_KEY: self.storage.sync_volume,
            NAMESPACES_KEY: lambda ns: self.defaults.ensure(objects.name(ns)),
        }
        self.readiness = None if simulated else ReadinessController(view)
        self.node = NodeController(view) if simulated else None
        self.kubelet = Kubelet(view) if simulated else None
        self.cronjobs = CronJobController(view, self.events) if simulated else None
        if simulated:
            assert self.kubelet is not None and self.cronjobs is not None
            self.syncs.update({
                PODS_KEY: self.kubelet.sync,
                REPLICASETS_KEY: ReplicaSetController(view, self.events).sync,
                STATEFULSETS_KEY: StatefulSetController(view, self.events).sync,
                DAEMONSETS_KEY: DaemonSetController(view, self.events).sync,
                JOBS_KEY: JobController(view, self.events).sync,
                CRONJOBS_KEY: self.cronjobs.sync,
            })
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._queue = self.view.api.store.changes.subscribe()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.view.cancel_timers()
        self.view.api.store.changes.unsubscribe(self._queue)

    async def _run(self) -> None:
        self.view.settle = self._settle
        safely(self._resync)
        self._settle()
        while True:
            change = await self._queue.get()
            safely(self._handle, change)
            self._settle()
            await asyncio.sleep(0)

    def _settle(self) -> None:
        """Handle every queued change, then run the queued syncs; again while they write (a bounded number of
        rounds, so a long cascade still lets requests in between: what is left runs after the next change)."""
        for _ in range(SETTLE_ROUNDS):
            while not self._queue.empty():
                safely(self._handle, self._queue.get_nowait())
            if not self.view.pending:
                return
            self.view.flush()
        self.view.later(0.0, lambda: None)  # the rest: after the requests waiting meanwhile

    def _resync(self) -> None:
        """Start-up: index everything, start the node, then react to every object as if it had just changed."""
        store = self.view.api.store
        snapshot = list(iter_all(store, self.view.api.registry))
        for info, obj in snapshot:
            self.view.index.update(info.storage_key, None, obj)
        if self.kubelet is not None:
            self.kubelet.prime()
        self._start_controllers()
        for info, obj in snapshot:
            safely(self._react, info, Change(store.rv, "MODIFIED", info.storage_key, obj, None))
        for uid in self.view.index.missing_owners():
            self.garbage_collector.collect(uid)

    def _start_controllers(self) -> None:
        safely(self.storage.start)
        if self.settings.api_port:
            safely(self.endpoints.ensure_kubernetes, self.settings.api_port)
        if self.node is not None:
            safely(self.node.start)
        if self.cronjobs is not None:
            self.cronjobs.start()

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
        if info.storage_key == PODS_KEY:
            new = obj if change.type != "DELETED" else None
            self.endpoints.pod_changed(change.old, new)
            self.storage.pod_changed(change.old, new)
        if info.storage_key in WAKING:
            self._wake_owner(obj)

    def _wake_owner(self, obj: dict[str, Any]) -> None:
        """A dependent changed or went: queue its controlling workload's sync."""
        uid = objects.controller_uid(obj)
        where = self.view.index.where(uid) if uid else None
        sync = self.syncs.get(where[0]) if where is not None and where[0] in WORKLOADS else None
        owner = self.view.live(uid) if sync is not None else None
        if sync is not None and owner is not None and where is not None:
            self.view.soon("sync", where, sync, owner)

    def _gone(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        self.garbage_collector.collect(objects.uid(obj))
        if objects.namespace(obj):
            self.namespaces.finish(objects.namespace(obj))
        skey = info.storage_key
        if skey in (SERVICEACCOUNTS_KEY, CONFIGMAPS_KEY):
            self.defaults.gone(skey, obj)
        elif skey == SERVICES_KEY:
            self.endpoints.service_gone(obj)
        elif skey == PERSISTENTVOLUMECLAIMS_KEY:
            self.storage.claim_gone(obj)
        elif skey == NODES_KEY and self.node is not None:
            self.node.gone(obj)
        elif skey == PODS_KEY and self.kubelet is not None:
            self.kubelet.gone(obj)

    def _deleting(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        if info.storage_key == NAMESPACES_KEY:
            self.namespaces.terminate(objects.name(obj))
            return
        self.garbage_collector.finalize(info, obj)
        if info.storage_key in (PERSISTENTVOLUMECLAIMS_KEY, PERSISTENTVOLUMES_KEY):
            self._queue_sync(info, obj)

    def _changed(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        namespace = objects.namespace(obj)
        key = (info.storage_key, namespace, objects.name(obj))
        if namespace and info.namespaced and self.view.terminating(namespace):
            self.view.delete(key)
            return
        if objects.owner_refs(obj):
            self.garbage_collector.attempt_delete(key)
        self._queue_sync(info, obj)
        if self.readiness is not None:
            self.readiness.mark(info, obj)

    def _queue_sync(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        sync = self.syncs.get(info.storage_key)
        if sync is not None and not info.custom:
            self.view.soon("sync", (info.storage_key, objects.namespace(obj), objects.name(obj)), sync, obj)
