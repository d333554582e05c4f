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
from hybrid_operator.controller.reconcile import Outcome, OwnWrites, Reconciler
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
    #: the object states the operator wrote itself: their events start no reconcile
    own_writes: OwnWrites = field(default_factory=OwnWrites)
    name: str = ""
    metrics: OperatorMetrics | None = None
    readiness: Liveness | None = None
    #: shutting down: queued keys are no longer reconciled
    draining: bool = False
    #: reconciles running now, and an event set whenever there are none
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    running: bool = False
    #: keys being reconciled now, and the events that came for them meanwhile (decided at the end)
    _running: set[Key] = field(default_factory=set)
    _deferred: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)
    #: sharding (``--sharding``): whether this replica owns a key now; a key it does not own is dropped
    #: when its turn comes (dependents, triggers and resyncs follow their owner's shard)
    owns: Callable[[Key], bool] | None = None
    #: the task of each running reconcile (sharding cancels those of a bucket it hands over)
    _tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict)

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
        current = predicates.seen(body)
        previous = self.seen.get(key)
        if predicates.wants_reconcile(previous, current, event_type, predicates.metadata_changes(self.watch)):
            self._wanted(key, event_type, body, first_sight=previous is None)
        if event_type == "DELETED":
            self.seen.pop(key, None)
        else:
            self.seen[key] = current

    def _wanted(self, key: Key, event_type: str, body: dict[str, Any], *, first_sight: bool) -> None:
        """An event the filter passed: queue the key, unless the event is the echo of our own write.

        While the key is being reconciled, the reconcile's own writes are not all known yet (an event
        can arrive before the write's answer): the event is decided when the reconcile ends. A first
        sight is never an echo: an object forgotten at a shard hand-over (:meth:`release_keys`) comes
        back in the state its cancelled reconcile wrote last, and must be reconciled.
        """
        if event_type == "DELETED":
            self.queue.add(key)
        elif key in self._running:
            self._deferred.setdefault(key, []).append(body)
        elif first_sight or not self.own_writes.is_own(body):
            self.queue.add(key)

    def _settle_deferred(self, key: Key) -> None:
        """The reconcile of ``key`` ended: events that came meanwhile count unless they were its own writes."""
        bodies = self._deferred.pop(key, [])
        if any(not self.own_writes.is_own(body) for body in bodies):
            self.queue.add(key)

    async def _process(self, key: Key) -> None:
        if self.draining or (self.owns is not None and not self.owns(key)):
            return
        self.in_flight += 1
        self.idle.clear()
        self._running.add(key)
        if self.metrics is not None:
            self.metrics.active_workers.add(1, self.name)
        try:
            await self._reconcile_task(key)
        finally:
            self._running.discard(key)
            self._settle_deferred(key)
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()
            if self.metrics is not None:
                self.metrics.active_workers.add(-1, self.name)

    async def _reconcile_task(self, key: Key) -> None:
        """The reconcile in a task of its own, so that a hand-over can cancel it without ending the worker."""
        task = asyncio.ensure_future(self._reconcile(key))
        self._tasks[key] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise
            log.info("reconcile cancelled: shard handed over", extra={"kind": self.watch.gvk.kind,
                                                                       "namespace": key[0], "cr": key[1]})
        finally:
            self._tasks.pop(key, None)

    async def release_keys(self, leaving: Callable[[Key], bool], grace: float) -> int:
        """Sharding hands over the keys ``leaving`` selects: their running reconciles get ``grace`` seconds
        to finish, then are cancelled (runs killed, nothing more written); what they knew is forgotten, so a
        later return of the bucket reconciles them afresh. Returns how many were cancelled."""
        for key in [k for k in self.seen if leaving(k)]:
            self.seen.pop(key, None)
        deadline = time.monotonic() + grace
        while any(leaving(k) for k in self._tasks) and time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        doomed = [task for k, task in self._tasks.items() if leaving(k)]
        for task in doomed:
            task.cancel()
        await asyncio.gather(*doomed, return_exceptions=True)
        return len(doomed)

    def _log_retry(self, key: Key, backoff: float, duration: float) -> None:
        """When the key really runs again: an event that came during the run brings it back now, not after
        the backoff."""
        due = self.queue.pending(key)
        retry_in = backoff if due is None else max(0.0, due - self.clock.monotonic())
        extra: dict[str, Any] = {"kind": self.watch.gvk.kind, "namespace": key[0], "cr": key[1],
                                 "retry_in": round(retry_in, 3), "duration": duration}
        if retry_in < backoff:
            extra["backoff"] = backoff
            extra["because"] = "a watch event arrived during the reconcile"
        log.info("reconcile will retry", extra=extra)

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
            self._settle_deferred(key)
            self._log_retry(key, delay, duration)
            return
        self.queue.forget(key)
        if outcome.requeue_after is not None:
            self.queue.add_after(key, outcome.requeue_after)
