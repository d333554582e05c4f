"""The operator process: one controller per watch, fed by kopf, driving the reconciler.

For every ``watches.yaml`` entry a :class:`Controller` owns a work queue of
object keys.  kopf's raw watch events pass an event filter (the Operator SDK's
default predicate: generation changes, objects without a generation, deletion,
and annotation changes when ``watchAnnotationsChanges``) and enqueue the key;
workers run the reconciler on the object as it is *now*, then requeue after
the reconcile period or, after a failure, after an exponential backoff (1 s
doubling to 5 min).  A global semaphore caps runs across all kinds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import dependents, errors, handlers, ownership, related
from hybrid_operator.cluster import ClusterClient
from hybrid_operator.reconciler import Outcome, Reconciler
from hybrid_operator.settings import Settings
from hybrid_operator.watches import AnsibleWatch, HelmWatch, Watch
from hybrid_operator.workqueue import Backoff, WorkQueue

log = logging.getLogger("hybrid_operator.app")

Key = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class Seen:
    """What the event filter remembers of an object (a cache: losing it only costs one reconcile)."""

    generation: Any
    annotations: tuple[tuple[str, str], ...]
    deleting: bool


def _seen(body: dict[str, Any]) -> Seen:
    meta = body.get("metadata") or {}
    annotations = tuple(sorted((str(k), str(v)) for k, v in (meta.get("annotations") or {}).items()
                               if not str(k).startswith("kopf.zalando.org/")
                               and k != dependents.DEPENDENT_KINDS_ANNOTATION))
    return Seen(meta.get("generation"), annotations, bool(meta.get("deletionTimestamp")))


def wants_reconcile(previous: Seen | None, current: Seen, event_type: str, watch_annotations: bool) -> bool:
    """The Operator SDK's default predicate, plus deletion and first sight."""
    if event_type == "DELETED" or previous is None:
        return True
    if current.generation is None or current.generation != previous.generation:
        return True
    if current.deleting != previous.deleting:
        return True
    return watch_annotations and current.annotations != previous.annotations


def _workers(settings: Settings, watch: Watch) -> int:
    """Reconciles at once for a kind: a Helm entry's ``maxConcurrentReconciles``, else the flag/env value."""
    if isinstance(watch, HelmWatch) and watch.max_concurrent_reconciles:
        return watch.max_concurrent_reconciles
    return settings.concurrency_for(watch.gvk)


@dataclass
class Controller:
    """One watch: its event filter, queue, backoff and reconciler."""

    watch: Watch
    reconciler: Reconciler
    workers: int
    seen: dict[Key, Seen] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    queue: WorkQueue[Key] = field(init=False)
    trigger_indexes: list[related.TriggerIndex] = field(default_factory=list)
    on_known_children: Callable[[Controller, set[dependents.ChildKind]], None] | None = None

    def __post_init__(self) -> None:
        self.queue = WorkQueue(self._process, self.workers)
        if isinstance(self.watch, AnsibleWatch):
            self.trigger_indexes = [related.TriggerIndex(t, self.queue.add) for t in self.watch.triggers]

    @property
    def owner_kind(self) -> dependents.OwnerKind:
        return (self.watch.gvk.group, self.watch.gvk.kind)

    async def on_event(self, event_type: str, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not key[1]:
            return
        for index in self.trigger_indexes:
            index.update(key, None if event_type == "DELETED" else body)
        known = dependents.parse_kinds((meta.get("annotations") or {}).get(dependents.DEPENDENT_KINDS_ANNOTATION))
        if known and self.on_known_children is not None and event_type != "DELETED":
            self.on_known_children(self, known)
        current = _seen(body)
        watch_annotations = isinstance(self.watch, AnsibleWatch) and self.watch.watch_annotations_changes
        if wants_reconcile(self.seen.get(key), current, event_type, watch_annotations):
            self.queue.add(key)
        if event_type == "DELETED":
            self.seen.pop(key, None)
        else:
            self.seen[key] = current

    async def _process(self, key: Key) -> None:
        started = time.monotonic()
        try:
            outcome = await self.reconciler.reconcile(key[0], key[1])
        except Exception:
            log.exception("reconcile crashed", extra={"kind": self.watch.gvk.kind, "namespace": key[0],
                                                       "cr": key[1]})
            outcome = Outcome(failed=True)
        duration = round(time.monotonic() - started, 3)
        if outcome.failed:
            delay = outcome.retry_after if outcome.retry_after is not None else self.backoff.next_delay(key)
            log.info("reconcile will retry", extra={"kind": self.watch.gvk.kind, "namespace": key[0], "cr": key[1],
                                                    "retry_in": delay, "duration": duration})
            self.queue.add_after(key, delay)
            return
        self.backoff.forget(key)
        if outcome.requeue_after is not None:
            self.queue.add_after(key, outcome.requeue_after)


class Operator:
    """Everything one ``hybrid-operator run`` process runs."""

    def __init__(self, settings: Settings, watches: Sequence[Watch], cluster: ClusterClient,
                 reconcilers: Sequence[Reconciler]) -> None:
        self.settings = settings
        self.cluster = cluster
        self.controllers = [
            Controller(watch, reconciler, _workers(settings, watch))
            for watch, reconciler in zip(watches, reconcilers, strict=True)
        ]
        self._by_watch = {id(c.watch): c for c in self.controllers}
        self.dependents = dependents.DependentWatches(cluster, self.enqueue_owner, settings.namespaces)
        self.related = related.RelatedWatches(cluster, settings.namespaces)
        for controller in self.controllers:
            controller.on_known_children = self._watch_known_children
            for index in controller.trigger_indexes:
                self.related.add(index)

    # -- dependents ----------------------------------------------------------------------------

    def _controllers_for(self, owner_kind: dependents.OwnerKind) -> list[Controller]:
        return [c for c in self.controllers if c.owner_kind == owner_kind]

    def enqueue_owner(self, owner_kind: dependents.OwnerKind, namespace: str, name: str) -> None:
        for controller in self._controllers_for(owner_kind):
            controller.queue.add((namespace, name))

    def _wants(self, controller: Controller, child: dependents.ChildKind, cluster_scoped_annotation: bool) -> bool:
        watch = controller.watch
        if not watch.watch_dependent_resources:
            return False
        if isinstance(watch, AnsibleWatch):
            if any((b.group, b.version, b.kind) == (child.group, child.version, child.kind) for b in watch.blacklist):
                return False
            if cluster_scoped_annotation and not watch.watch_cluster_scoped_resources:
                return False
        return True

    def _watch_known_children(self, controller: Controller, kinds: set[dependents.ChildKind]) -> None:
        """Restart recovery: the kinds persisted on an owner are watched as soon as it is listed."""
        for kind in kinds:
            if self._wants(controller, kind, cluster_scoped_annotation=False):
                self.dependents.ensure(kind, controller.owner_kind, helm=isinstance(controller.watch, HelmWatch))

    async def child_written(self, owner: ownership.OwnerKey, child: ownership.ChildRef) -> None:
        """The ownership proxy saw a run write a dependent: watch its kind, remember it on the owner."""
        group = owner.api_version.rpartition("/")[0]
        kind = dependents.ChildKind(child.group, child.version, child.kind)
        cluster_scoped = child.link == "annotations" and not child.namespace
        for controller in self._controllers_for((group, owner.kind)):
            if self._wants(controller, kind, cluster_scoped):
                self.dependents.ensure(kind, controller.owner_kind)
                await asyncio.to_thread(self._remember, controller, owner.namespace, owner.name, {kind})

    async def helm_children(self, watch: Watch, obj: dict[str, Any], kinds: set[dependents.ChildKind]) -> None:
        """A release was deployed or repaired: watch the kinds of its manifest."""
        controller = self._by_watch.get(id(watch))
        if controller is None or not kinds or not controller.watch.watch_dependent_resources:
            return
        for kind in kinds:
            self.dependents.ensure(kind, controller.owner_kind, helm=True)
        meta = obj.get("metadata") or {}
        await asyncio.to_thread(self._remember, controller, str(meta.get("namespace") or ""),
                                str(meta.get("name")), kinds)

    def _remember(self, controller: Controller, namespace: str, name: str, kinds: set[dependents.ChildKind]) -> None:
        """Persist the child kinds on the owner (an annotation), so a restart re-watches them at once."""
        gvk = controller.watch.gvk
        try:
            ref = self.cluster.resolve(gvk.group, gvk.version, gvk.kind)
            obj = self.cluster.get(ref, namespace, name)
            if obj is None:
                return
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            known = dependents.parse_kinds(annotations.get(dependents.DEPENDENT_KINDS_ANNOTATION))
            if kinds <= known:
                return
            value = dependents.format_kinds(known | kinds)
            self.cluster.patch_metadata(ref, namespace, name,
                                        {"annotations": {dependents.DEPENDENT_KINDS_ANNOTATION: value}})
        except errors.TemporaryError as exc:
            log.warning("dependent kinds not recorded", extra={"kind": gvk.kind, "cr": name, "error": str(exc)})

    async def _on_event(self, watch: Watch, event_type: str, body: dict[str, Any]) -> None:
        controller = self._by_watch.get(id(watch))
        if controller is not None:
            await controller.on_event(event_type, body)

    async def run(self, stop: asyncio.Event) -> None:
        for controller in self.controllers:
            controller.queue.start()
        registry = handlers.build_registry([c.watch for c in self.controllers], self._on_event,
                                           self.cluster.connection())
        log.info("operator started", extra={"kinds": ",".join(str(c.watch.gvk) for c in self.controllers),
                                            "namespaces": ",".join(self.settings.namespaces) or "*"})
        self.related.start()
        try:
            await handlers.run(registry, self.settings.namespaces, stop)
        finally:
            await self.dependents.close()
            await self.related.close()
            for controller in self.controllers:
                await controller.queue.stop()
            log.info("operator stopped")
