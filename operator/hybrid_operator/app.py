"""The operator process: one controller per watch, fed by kopf, driving the reconciler.

For every ``watches.yaml`` entry a :class:`Controller` owns a work queue of
object keys.  kopf's raw watch events pass an event filter (the Operator SDK's
default predicate: generation changes, objects without a generation, deletion,
and annotation changes when ``watchAnnotationsChanges``) and enqueue the key;
workers run the reconciler on the object as it is *now*, then requeue after
the reconcile period or, after a failure, after an exponential backoff (1 s
doubling to 5 min).  A global semaphore caps runs across all kinds.

It also runs the process's lifecycle (docs/operations.md): workers only while this replica leads
(leader election), readiness signals and metrics, and the graceful shutdown -- stop taking work,
let running reconciles finish within ``--graceful-shutdown-timeout``, cancel the rest (their
status says so), release the Lease, and only then stop kopf.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import dependents, errors, handlers, health, ownership, related
from hybrid_operator.cluster import ClusterClient
from hybrid_operator.leader import LeaderElector
from hybrid_operator.metrics import OperatorMetrics
from hybrid_operator.reconciler import Outcome, Reconciler, RunCancel
from hybrid_operator.settings import Settings
from hybrid_operator.watches import AnsibleWatch, GroupVersionKind, HelmWatch, Watch
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
    seen: dict[Key, Seen] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    queue: WorkQueue[Key] = field(init=False)
    trigger_indexes: list[related.TriggerIndex] = field(default_factory=list)
    on_known_children: Callable[[Controller, set[dependents.ChildKind]], None] | None = None
    name: str = ""
    metrics: OperatorMetrics | None = None
    readiness: health.Readiness | None = None
    #: shutting down: queued keys are no longer reconciled
    draining: bool = False
    #: reconciles running now, and an event set whenever there are none
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    running: bool = False

    def __post_init__(self) -> None:
        self.name = self.name or self.watch.gvk.kind
        self.queue = WorkQueue(self._process, self.workers)
        self.idle.set()
        if isinstance(self.watch, AnsibleWatch):
            self.trigger_indexes = [related.TriggerIndex(t, self.enqueue) for t in self.watch.triggers]
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
        self.queue = WorkQueue(self._process, self.workers)
        await old.stop()
        for key in self.seen:
            self.queue.add(key)

    async def close(self) -> None:
        self.running = False
        await self.queue.stop()

    async def on_event(self, event_type: str, body: dict[str, Any]) -> None:
        if self.readiness is not None:
            self.readiness.alive(self.name)
        if self.metrics is not None:
            self.metrics.last_event.set(time.time(), self.name)
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
        except Exception:
            log.exception("reconcile crashed", extra={"kind": self.watch.gvk.kind, "namespace": key[0],
                                                       "cr": key[1]})
            outcome = Outcome(failed=True)
        if self.metrics is not None:
            self.metrics.reconciled(self.name, outcome_result(outcome), time.monotonic() - started)
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


#: after cancelling the runs still going at the end of the graceful shutdown timeout, how long they
#: get to stop and write their status (ansible notices within 0.5 s; helm gets 10 s after SIGTERM)
CANCEL_GRACE = 15.0
SHUTDOWN_REASON = "the operator is shutting down"

Background = Callable[[], Coroutine[Any, Any, None]]


class Operator:
    """Everything one ``hybrid-operator run`` process runs.

    ``stop`` is set by the first SIGTERM/SIGINT (a second one skips the wait for running reconciles).
    With an ``elector`` the workers run only while this replica leads; ``background`` coroutines
    (readiness probes) run until shutdown; ``run_cancel`` is what cancels runs at the end of the
    graceful shutdown timeout.
    """

    def __init__(self, settings: Settings, watches: Sequence[Watch], cluster: ClusterClient,
                 reconcilers: Sequence[Reconciler], *, metrics: OperatorMetrics | None = None,
                 readiness: health.Readiness | None = None, run_cancel: RunCancel | None = None,
                 background: Sequence[Background] = ()) -> None:
        self.settings = settings
        self.cluster = cluster
        self.metrics = metrics
        self.readiness = readiness
        self.run_cancel = run_cancel or RunCancel()
        self.background = list(background)
        self.elector: LeaderElector | None = None
        self.stop = asyncio.Event()
        self.force = asyncio.Event()
        self.controllers = [
            Controller(watch, reconciler, _workers(settings, watch), name=name, metrics=metrics, readiness=readiness)
            for watch, reconciler, name in zip(watches, reconcilers, controller_names(watches), strict=True)
        ]
        if metrics is not None:
            metrics.registry.add_collector(self._collect)
        self._by_watch = {id(c.watch): c for c in self.controllers}
        self.dependents = dependents.DependentWatches(cluster, self.enqueue_owner, settings.namespaces)
        self.related = related.RelatedWatches(cluster, settings.namespaces)
        self._recorded: set[tuple[GroupVersionKind, str, str, dependents.ChildKind]] = set()
        for controller in self.controllers:
            controller.on_known_children = self._watch_known_children
            for index in controller.trigger_indexes:
                self.related.add(index)

    # -- dependents ----------------------------------------------------------------------------

    def _ensure_dependent(self, kind: dependents.ChildKind, owner: dependents.OwnerKind, helm: bool = False) -> None:
        if self.dependents.ensure(kind, owner, helm=helm) and self.metrics is not None:
            self.metrics.dependent_watches.add(1)

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
                self._ensure_dependent(kind, controller.owner_kind, helm=isinstance(controller.watch, HelmWatch))

    async def child_written(self, owner: ownership.OwnerKey, child: ownership.ChildRef) -> None:
        """The ownership proxy saw a run write a dependent: watch its kind, remember it on the owner."""
        group = owner.api_version.rpartition("/")[0]
        kind = dependents.ChildKind(child.group, child.version, child.kind)
        cluster_scoped = child.link == "annotations" and not child.namespace
        for controller in self._controllers_for((group, owner.kind)):
            if self._wants(controller, kind, cluster_scoped):
                self._ensure_dependent(kind, controller.owner_kind)
                await self._record_kinds(controller, owner.namespace, owner.name, {kind})

    async def helm_children(self, watch: Watch, obj: dict[str, Any], kinds: set[dependents.ChildKind]) -> None:
        """A release was deployed or repaired: watch the kinds of its manifest."""
        controller = self._by_watch.get(id(watch))
        if controller is None or not kinds or not controller.watch.watch_dependent_resources:
            return
        for kind in kinds:
            self._ensure_dependent(kind, controller.owner_kind, helm=True)
        meta = obj.get("metadata") or {}
        await self._record_kinds(controller, str(meta.get("namespace") or ""), str(meta.get("name")), kinds)

    async def _record_kinds(self, controller: Controller, namespace: str, name: str,
                            kinds: set[dependents.ChildKind]) -> None:
        """Persist the child kinds on the owner unless already done.

        ``_recorded`` only caches what is known to be on the owner (it saves a GET per write a playbook
        makes); it is dropped when the owner is deleted, and losing it costs one GET.
        """
        recorded = {(controller.watch.gvk, namespace, name, kind) for kind in kinds}
        if recorded <= self._recorded:
            return
        await asyncio.to_thread(self._remember, controller, namespace, name, kinds)
        self._recorded |= recorded

    def _remember(self, controller: Controller, namespace: str, name: str, kinds: set[dependents.ChildKind]) -> None:
        """Persist the child kinds on the owner (an annotation), so a restart re-watches them at once.

        Runs in a thread; the callers keep ``_recorded``.
        """
        gvk = controller.watch.gvk
        try:
            ref = self.cluster.resolve(gvk.group, gvk.version, gvk.kind)
            obj = self.cluster.get(ref, namespace, name)
            if obj is None:
                return
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            known = dependents.parse_kinds(annotations.get(dependents.DEPENDENT_KINDS_ANNOTATION))
            if not kinds <= known:
                value = dependents.format_kinds(known | kinds)
                self.cluster.patch_metadata(ref, namespace, name,
                                            {"annotations": {dependents.DEPENDENT_KINDS_ANNOTATION: value}})
        except errors.TemporaryError as exc:
            log.warning("dependent kinds not recorded", extra={"kind": gvk.kind, "cr": name, "error": str(exc)})

    async def _on_event(self, watch: Watch, event_type: str, body: dict[str, Any]) -> None:
        controller = self._by_watch.get(id(watch))
        if controller is not None:
            await controller.on_event(event_type, body)
            if event_type == "DELETED" and self._recorded:
                meta = body.get("metadata") or {}
                gone = (watch.gvk, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                self._recorded = {entry for entry in self._recorded if entry[:3] != gone}

    # -- metrics -------------------------------------------------------------------------------

    def _collect(self) -> None:
        """Refresh the gauges read at scrape time."""
        assert self.metrics is not None
        for controller in self.controllers:
            self.metrics.queue_depth.set(controller.queue.depth(), controller.name)
            if self.readiness is not None:
                self.metrics.watch_healthy.set(1 if self.readiness.fresh(controller.name) else 0, controller.name)

    # -- leadership ----------------------------------------------------------------------------

    async def start_leading(self) -> None:
        if self.stop.is_set():
            return
        self._set_leader(1)
        for controller in self.controllers:
            controller.start()

    async def stop_leading(self) -> None:
        """Leadership lost: stop every reconcile at once (runs are killed, nothing more is written)."""
        self._set_leader(0)
        await asyncio.gather(*(controller.stop_now() for controller in self.controllers))

    def _set_leader(self, value: int) -> None:
        if self.metrics is not None and self.elector is not None:
            self.metrics.leader.set(value, self.elector.config.name)

    # -- running and stopping ------------------------------------------------------------------

    def handle_signal(self, *_: Any) -> None:
        """SIGTERM/SIGINT: the first one starts the graceful shutdown, the next one cuts it short."""
        if self.stop.is_set():
            log.warning("second stop signal: cancelling the runs in progress now")
            self.force.set()
        self.stop.set()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` (default :attr:`stop`) is set or kopf ends; then shut down gracefully."""
        if stop is not None:
            self.stop = stop
        ready, kopf_stop, election_stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
        registry = handlers.build_registry([c.watch for c in self.controllers], self._on_event,
                                           self.cluster.connection())
        self.related.start()
        # every task of ours is created before kopf starts: kopf waits 5 s for "hung" tasks born after it
        tasks = [asyncio.create_task(self._on_ready(ready)), *(asyncio.create_task(b()) for b in self.background)]
        election = asyncio.create_task(self.elector.run(election_stop)) if self.elector is not None else None
        if self.elector is None:
            await self.start_leading()
        stopping = asyncio.create_task(self.stop.wait())
        kopf_task = asyncio.create_task(handlers.run(registry, self.settings.namespaces, kopf_stop, ready,
                                                     on_signal=self.handle_signal))
        log.info("operator started", extra={"kinds": ",".join(str(c.watch.gvk) for c in self.controllers),
                                            "namespaces": ",".join(self.settings.namespaces) or "*",
                                            "leader_election": self.elector is not None})
        try:
            await asyncio.wait({stopping, kopf_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            started = time.monotonic()
            await self._drain()
            election_stop.set()
            if election is not None and self.elector is not None:
                await asyncio.gather(election, return_exceptions=True)
                await self.elector.release()
            await self.dependents.close()
            await self.related.close()
            for task in (*tasks, stopping):
                task.cancel()
            await asyncio.gather(*tasks, stopping, return_exceptions=True)
            kopf_stop.set()
            await kopf_task
            log.info("operator stopped", extra={"shutdown_seconds": round(time.monotonic() - started, 3)})

    async def _on_ready(self, ready: asyncio.Event) -> None:
        await ready.wait()
        if self.readiness is not None:
            self.readiness.started = True
        log.info("watching started")

    async def _drain(self) -> None:
        """Stop taking work; let running reconciles finish within the graceful timeout, then cancel them."""
        if self.readiness is not None:
            self.readiness.stopping = True
        for controller in self.controllers:
            controller.draining = True
        timeout = self.settings.graceful_shutdown_timeout.total_seconds()
        running = self._in_flight()
        if running:
            log.info("waiting for running reconciles", extra={"reconciles": running, "timeout": timeout})
            if not await self._wait_idle(timeout, self.force):
                log.warning("cancelling running reconciles", extra={"reconciles": self._in_flight(),
                                                                    "reason": SHUTDOWN_REASON})
                self.run_cancel.cancel(SHUTDOWN_REASON)
                await self._wait_idle(CANCEL_GRACE, None)
        for controller in self.controllers:
            await controller.close()

    def _in_flight(self) -> int:
        return sum(c.in_flight for c in self.controllers)

    async def _wait_idle(self, timeout: float, force: asyncio.Event | None) -> bool:
        """True when no reconcile runs any more; False after ``timeout`` or when ``force`` is set."""
        idle = asyncio.ensure_future(asyncio.gather(*(c.idle.wait() for c in self.controllers)))
        waiters: set[asyncio.Future[Any]] = {idle}
        if force is not None:
            waiters.add(asyncio.ensure_future(force.wait()))
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        return self._in_flight() == 0
