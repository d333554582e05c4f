"""The operator process: every controller, their shared watches of dependents and triggers, and its lifecycle.

One :class:`~hybrid_operator.controller.controller.Controller` per ``watches.yaml`` entry, all fed
by one kopf event source; dependents' and related objects' events bring their owners back. It runs
the process's lifecycle (docs/operations.md): workers only while this replica leads (leader
election), readiness signals and metrics, and the graceful shutdown -- stop taking work, let
running reconciles finish within ``--graceful-shutdown-timeout``, cancel the rest (their status
says so), release the Lease, and only then stop kopf.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from hybrid_operator.ansible import ownership
from hybrid_operator.config.model import AnsibleWatch, HelmWatch, Watch
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller import dependents, source, triggers
from hybrid_operator.controller.controller import Controller, controller_names, workers_for
from hybrid_operator.controller.metrics import OperatorMetrics
from hybrid_operator.controller.reconcile import OwnWrites, Reconciler, RunCancel
from hybrid_operator.kube.client import ClusterClient
from hybrid_operator.manager import health, leader
from hybrid_operator.manager.leader import LeaderElector

log = logging.getLogger(__name__)

#: after cancelling the runs still going at the end of the graceful shutdown timeout, how long they
#: get to stop and write their status (ansible notices within 0.5 s; helm gets 10 s after SIGTERM)
CANCEL_GRACE = 15.0
#: a background task restarted after a crash counts as working again once it ran this long
STABLE_AFTER = 10.0
MAX_RESTART_DELAY = 60.0
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
                 background: Sequence[Background] = (), own_writes: OwnWrites | None = None) -> None:
        self.settings = settings
        self.cluster = cluster
        self.metrics = metrics
        self.readiness = readiness
        self.run_cancel = run_cancel or RunCancel()
        self.background = list(background)
        self.elector: LeaderElector | None = None
        #: sharding (``--sharding``): what follows the primaries instead of kopf, given (stop, ready)
        self.primaries: Callable[[asyncio.Event, asyncio.Event], Coroutine[Any, Any, None]] | None = None
        self.stop = asyncio.Event()
        self.force = asyncio.Event()
        self.own_writes = own_writes if own_writes is not None else OwnWrites()
        self.controllers = [
            Controller(watch, reconciler, workers_for(settings, watch), name=name, metrics=metrics, readiness=readiness,
                       own_writes=self.own_writes)
            for watch, reconciler, name in zip(watches, reconcilers, controller_names(watches), strict=True)
        ]
        if metrics is not None:
            metrics.registry.add_collector(self._collect)
        self._by_watch = {id(c.watch): c for c in self.controllers}
        self.dependents = dependents.DependentWatches(cluster, self.enqueue_owner, settings.namespaces, readiness)
        self.related = triggers.RelatedWatches(cluster, settings.namespaces, readiness)
        namespace = settings.leader_election_namespace or leader.default_namespace(dict(settings.environ))
        self.known_kinds = dependents.KnownKinds(cluster, namespace, f"{settings.leader_election_id}-dependents",
                                                 self.own_writes)
        for controller in self.controllers:
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

    async def restore_dependent_watches(self) -> None:
        """Start-up: watch again every child kind kept in our ConfigMap, before any run."""
        stored = await asyncio.to_thread(self.known_kinds.load)
        for controller in self.controllers:
            for kind in stored.get(dependents.owner_key(controller.owner_kind), set()):
                if self._wants(controller, kind, cluster_scoped_annotation=False):
                    self._ensure_dependent(kind, controller.owner_kind, helm=isinstance(controller.watch, HelmWatch))

    async def child_written(self, owner: ownership.OwnerKey, child: ownership.ChildRef) -> None:
        """The ownership proxy saw a run write a dependent: watch its kind, remember it for the owner kind."""
        group = owner.api_version.rpartition("/")[0]
        kind = dependents.ChildKind(child.group, child.version, child.kind)
        cluster_scoped = child.link == "annotations" and not child.namespace
        for controller in self._controllers_for((group, owner.kind)):
            if self._wants(controller, kind, cluster_scoped):
                self._ensure_dependent(kind, controller.owner_kind)
                await self._record_kinds(controller, {kind})

    async def helm_children(self, watch: Watch, obj: dict[str, Any], kinds: set[dependents.ChildKind]) -> None:
        """A release was deployed or repaired: watch the kinds of its manifest."""
        controller = self._by_watch.get(id(watch))
        if controller is None or not kinds or not controller.watch.watch_dependent_resources:
            return
        for kind in kinds:
            self._ensure_dependent(kind, controller.owner_kind, helm=True)
        await self._record_kinds(controller, kinds)

    async def _record_kinds(self, controller: Controller, kinds: set[dependents.ChildKind]) -> None:
        """Keep the child kinds of the controller's owner kind in our ConfigMap (only new ones are written)."""
        await asyncio.to_thread(self.known_kinds.add, controller.owner_kind, kinds)

    async def on_primary_event(self, watch: Watch, event_type: str, body: dict[str, Any]) -> None:
        """An event of a watched primary from the sharded followers (``--sharding``) instead of kopf."""
        await self._on_event(watch, event_type, body)

    async def _on_event(self, watch: Watch, event_type: str, body: dict[str, Any]) -> None:
        controller = self._by_watch.get(id(watch))
        if controller is not None:
            await controller.on_event(event_type, body)
            if self.metrics is not None:
                self.metrics.resource_seen(watch.gvk, body, deleted=event_type == "DELETED")

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
        registry = source.build_registry([c.watch for c in self.controllers], self._on_event,
                                           self.cluster.connection())
        self.related.start()
        await self.restore_dependent_watches()
        # every task of ours is created before kopf starts: kopf waits 5 s for "hung" tasks born after it
        tasks = [asyncio.create_task(self._on_ready(ready)),
                 *(asyncio.create_task(self.supervise(getattr(b, "__name__", f"background-{i}"), b))
                   for i, b in enumerate(self.background))]
        elector = self.elector
        election = None if elector is None else \
            asyncio.create_task(self.supervise("leader-election", lambda: elector.run(election_stop)))
        if self.elector is None:
            await self.start_leading()
        stopping = asyncio.create_task(self.stop.wait())
        kopf_task = asyncio.create_task(
            self.primaries(kopf_stop, ready) if self.primaries is not None else
            source.run(registry, self.settings.namespaces, kopf_stop, ready, on_signal=self.handle_signal))
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

    async def supervise(self, name: str, start: Background) -> None:
        """Run ``start()`` until it returns; a crash is logged, shown in ``/readyz`` and restarted with a
        backoff (1 s doubling to a minute), so that no background task dies unnoticed."""
        delay = 1.0
        while True:
            started = time.monotonic()
            stable = asyncio.get_running_loop().call_later(STABLE_AFTER, self._task_ok, name)
            try:
                await start()
                return
            except Exception as exc:
                if time.monotonic() - started > STABLE_AFTER:
                    delay = 1.0
                log.exception("background task crashed", extra={"task": name, "retry_in": delay})
                if self.readiness is not None:
                    self.readiness.task_failed(name, f"crashed ({type(exc).__name__}: {exc}); restarting in "
                                                     f"{delay:g}s")
            finally:
                stable.cancel()
            await asyncio.sleep(delay)
            delay = min(MAX_RESTART_DELAY, delay * 2)

    def _task_ok(self, name: str) -> None:
        if self.readiness is not None:
            self.readiness.task_ok(name)

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
