"""One controller per watch: its event filter, its work queue, its backoff, its reconciler.

For every ``watches.yaml`` entry a :class:`Controller` turns kopf's raw watch events into keys on a
work queue (after the event filter of :mod:`.predicates`); workers run the reconciler on the object
as it is *now*, then requeue after the reconcile period or, after a failure, after the queue's
per-key exponential backoff (1 s doubling to 5 min, reset by a success).  The queue keeps one
pending entry per key, so an event never starts a second resync chain.  Workers run only while
the process reconciles (see :mod:`hybrid_operator.manager.operator` for leadership and shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hybrid_operator import errors
from hybrid_operator.config.model import AnsibleWatch, HelmWatch, Watch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller import dependents, predicates, triggers
from hybrid_operator.controller.metrics import OperatorMetrics
from hybrid_operator.controller.reconcile import Outcome, Reconciler
from hybrid_operator.controller.workqueue import Backoff, Clock, MonotonicClock, WorkQueue
from hybrid_operator.kube import objects

log = logging.getLogger(__name__)

Key = tuple[str, str]  # namespace, name


class Liveness(Protocol):
    """Told whenever a controller's watch delivers an event (the readiness probe's watch health)."""

    def alive(self, name: str) -> None: ...


def workers_for(settings: Settings, watch: Watch) -> int:
    """Reconciles at once for a kind: a Helm entry's ``maxConcurrentReconciles``, else the flag/env value."""
    if isinstance(watch, HelmWatch) and watch.max_concurrent_reconciles:
        return watch.max_concurrent_reconciles
    return settings.concurrency_for(watch.gvk)


def outcome_result(outcome: Outcome) -> str:
    """controller-runtime's ``result`` label: error, requeue_after, requeue or success."""
    if outcome.failed:
        return "error"
    if outcome.requeue_after is not None:
        return "requeue_after" if outcome.requeue_after > 0 else "requeue"
    return "success"


def controller_names(watches: Sequence[Watch]) -> list[str]:
    """The ``controller`` label of each watch: its kind, or ``kind.group`` when two groups share a kind."""
    kinds = [w.gvk.kind for w in watches]
    return [w.gvk.kind if kinds.count(w.gvk.kind) == 1 else f"{w.gvk.kind}.{w.gvk.group}" for w in watches]


@dataclass
class Controller:
    """One watch: its event filter, queue, backoff and reconciler.

    Workers run only once :meth:`start` is called (at once, or when this replica becomes the leader);
    events are filtered and queued either way, so a standby that takes over has its queue ready.
    """

    watch: Watch
    reconciler: Reconciler
    workers: int
    seen: dict[Key, predicates.Seen] = field(default_factory=dict)
    #: the retry rate limiter of every queue this controller makes (kept across leadership changes)
    backoff: Backoff = field(default_factory=Backoff)
    clock: Clock = field(default_factory=MonotonicClock)
    queue: WorkQueue[Key] = field(init=False)
    trigger_indexes: list[triggers.TriggerIndex] = field(default_factory=list)
    on_known_children: Callable[[Controller, set[dependents.ChildKind]], None] | None = None
    name: str = ""
    metrics: OperatorMetrics | None = None
    readiness: Liveness | None = None
    #: shutting down: queued keys are no longer reconciled
    draining: bool = False
    #: reconciles running now, and an event set whenever there are none
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    running: bool = False

    def __post_init__(self) -> None:
        self.name = self.name or self.watch.gvk.kind
        self.queue = self._new_queue()
        self.idle.set()
        if isinstance(self.watch, AnsibleWatch):
            self.trigger_indexes = [triggers.TriggerIndex(t, self.enqueue) for t in self.watch.triggers]
        if self.metrics is not None:
            self.metrics.max_concurrent.set(self.workers, self.name)
            self.metrics.active_workers.set(0, self.name)

    @property
    def owner_kind(self) -> dependents.OwnerKind:
        return (self.watch.gvk.group, self.watch.gvk.kind)

    def enqueue(self, key: Key) -> None:
        self.queue.add(key)

    def start(self) -> None:
        """Start the workers (this replica reconciles from now on)."""
        if not self.running:
            self.running = True
            self.queue.start()

    async def stop_now(self) -> None:
        """Stop reconciling at once (leadership lost): running reconciles are cancelled, every known
        object is queued again for when this replica leads again."""
        if not self.running:
            return
        self.running = False
        old = self.queue
        self.queue = self._new_queue()
        await old.stop()
        for key in self.seen:
            self.queue.add(key)

    def _new_queue(self) -> WorkQueue[Key]:
        return WorkQueue(self._process, self.workers, rate_limiter=self.backoff, clock=self.clock)

    async def close(self) -> None:
        self.running = False
        await self.queue.stop()

    async def on_event(self, event_type: str, body: dict[str, Any]) -> None:
        if self.readiness is not None:
            self.readiness.alive(self.name)
        if self.metrics is not None:
            self.metrics.last_event.set(time.time(), self.name)
        key = objects.key(body)
        if not key[1]:
            return
        for index in self.trigger_indexes:
            index.update(key, None if event_type == "DELETED" else body)
        known = dependents.parse_kinds(objects.annotations(body).get(dependents.DEPENDENT_KINDS_ANNOTATION))
        if known and self.on_known_children is not None and event_type != "DELETED":
            self.on_known_children(self, known)
        current = predicates.seen(body)
        watch_annotations = isinstance(self.watch, AnsibleWatch) and self.watch.watch_annotations_changes
        if predicates.wants_reconcile(self.seen.get(key), current, event_type, watch_annotations):
            self.queue.add(key)
        if event_type == "DELETED":
            self.seen.pop(key, None)
        else:
            self.seen[key] = current

    async def _process(self, key: Key) -> None:
        if self.draining:
            return
        self.in_flight += 1
        self.idle.clear()
        if self.metrics is not None:
            self.metrics.active_workers.add(1, self.name)
        try:
            await self._reconcile(key)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()
            if self.metrics is not None:
                self.metrics.active_workers.add(-1, self.name)

    async def _reconcile(self, key: Key) -> None:
        started = time.monotonic()
        try:
            outcome = await self.reconciler.reconcile(key[0], key[1])
        except errors.TemporaryError as exc:  # the API went away mid-reconcile, a conflict: retry, no traceback
            if not isinstance(exc, errors.Unreachable):  # an outage is logged once, by the client
                log.warning("reconcile deferred", extra={"kind": self.watch.gvk.kind, "namespace": key[0],
                                                         "cr": key[1], "error": str(exc)})
            outcome = Outcome(failed=True, retry_after=exc.delay)
        except Exception:
            log.exception("reconcile crashed", extra={"kind": self.watch.gvk.kind, "namespace": key[0],
                                                       "cr": key[1]})
            outcome = Outcome(failed=True)
        if self.metrics is not None:
            self.metrics.reconciled(self.name, outcome_result(outcome), time.monotonic() - started)
        duration = round(time.monotonic() - started, 3)
        if outcome.failed:
            if outcome.retry_after is not None:
                delay = outcome.retry_after
                self.queue.add_after(key, delay)
            else:
                delay = self.queue.add_rate_limited(key)
            log.info("reconcile will retry", extra={"kind": self.watch.gvk.kind, "namespace": key[0], "cr": key[1],
                                                    "retry_in": delay, "duration": duration})
            return
        self.queue.forget(key)
        if outcome.requeue_after is not None:
            self.queue.add_after(key, outcome.requeue_after)
