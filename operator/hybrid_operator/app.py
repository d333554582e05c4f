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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import handlers
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
                               if not str(k).startswith("kopf.zalando.org/")))
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

    def __post_init__(self) -> None:
        self.queue = WorkQueue(self._process, self.workers)

    async def on_event(self, event_type: str, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not key[1]:
            return
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
        try:
            await handlers.run(registry, self.settings.namespaces, stop)
        finally:
            for controller in self.controllers:
                await controller.queue.stop()
            log.info("operator stopped")
