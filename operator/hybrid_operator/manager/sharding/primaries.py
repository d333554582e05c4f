"""The watched primaries of a sharded replica: only its buckets, listed and watched with ``shardSelector``.

Why this module exists: with ``--sharding`` a replica must see the objects of the buckets it holds
and reconcile nothing else. kopf builds its list/watch URLs from settings read once per request and
cannot change a running watch's selector when buckets move, so in sharded mode the primaries are
followed by our own list-then-watch loop (:func:`hybrid_operator.kube.informer.follow`) instead of
kopf, one per ``watches.yaml`` entry, restarted with a new selector whenever the held buckets
change (a re-list, which brings the objects of newly held buckets to the work queue).

Whether the server filtered is found out per controller without trusting ``shardInfo`` alone
(kube-apiserver echoes it for built-in kinds only, and these are mostly custom resources):
:class:`hybrid_operator.kube.informer.ShardRequest` checks every listed object and watch event
against the held buckets and probes with a one-value range when the answer cannot tell. A server
that does not filter as asked (before Kubernetes 1.36, the ``ShardedListAndWatch`` gate off) is
followed without the selector from then on, for as long as this process runs. Either way every
object and event is checked here against the held buckets (:meth:`ShardedPrimaries.deliver`): an
object outside them is dropped, so a server that ignored the selector never causes a second replica
to reconcile it, and a server that filtered never sent one to drop. The controllers' gate
(``Controller.owns``) stays the authority: a key is reconciled only while its bucket is held, which
keeps dependents, triggers and resyncs on their owner's shard. A server refusing the selector (a
500 ``invalid shard selector``) stops the operator with a configuration error (exit code 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import errors
from hybrid_operator.controller.controller import Controller, Key
from hybrid_operator.controller.metrics import Counter, Gauge, Registry
from hybrid_operator.kube import informer, objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef
from hybrid_operator.manager.sharding import ring

log = logging.getLogger(__name__)

EventSink = Callable[[Controller, str, dict[str, Any]], Awaitable[None]]


class ShardMetrics:
    """The per-replica sharding metrics (docs/operations.md lists them)."""

    def __init__(self, registry: Registry) -> None:
        self.buckets = registry.register(Gauge(
            "hybrid_operator_shard_buckets_owned", "Hash buckets (1/32 of the key space each) this replica holds"))
        self.ranges = registry.register(Gauge(
            "hybrid_operator_shard_ranges_owned", "Contiguous hash ranges in this replica's shard selector"))
        self.objects = registry.register(Gauge(
            "hybrid_operator_shard_objects_owned", "Watched objects in the buckets this replica holds",
            ["controller"]))
        self.members = registry.register(Gauge(
            "hybrid_operator_shard_ring_members", "Live members of the ring as this replica sees them"))
        self.handovers = registry.register(Counter(
            "hybrid_operator_shard_handovers_total",
            "Buckets that changed hands here: acquired, released (drained), lost (renew deadline passed)",
            ["direction"]))
        self.events = registry.register(Counter(
            "hybrid_operator_shard_watch_events_total",
            "Watch events and listed objects received for the primaries, before any client-side filtering",
            ["controller"]))
        self.server_side = registry.register(Gauge(
            "hybrid_operator_shard_server_side",
            "1 when the API server applied the shard selector (echoed, or found by checking and probing), "
            "0 when it did not and the replica follows everything, filtering client-side",
            ["controller"]))


@dataclass
class _Followed:
    """One controller's primaries: which bucket each key is in, and the follower task."""

    controller: Controller
    buckets: dict[Key, int] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    #: the server was found not to filter this kind: follow it without a selector from now on
    unfiltered: bool = False


class ShardedPrimaries:
    """Follows each controller's primaries within the held buckets and feeds their events to ``sink``."""

    def __init__(self, cluster: ClusterClient, controllers: Sequence[Controller], namespaces: Sequence[str],
                 sink: EventSink, *, key: str = "uid", metrics: ShardMetrics | None = None) -> None:
        self.cluster = cluster
        self.namespaces = list(namespaces)
        self.sink = sink
        self.key = key
        self.metrics = metrics
        self.held: frozenset[int] = frozenset()
        self.selector = ""
        self._followed = [_Followed(c) for c in controllers]
        #: set when a follower cannot go on (the server refuses the selector): :meth:`run` raises it
        self._fatal: asyncio.Future[None] | None = None
        self._by_controller = {id(f.controller): f for f in self._followed}
        for followed in self._followed:
            followed.controller.owns = self._gate(followed)

    # -- ownership ------------------------------------------------------------------------------

    def bucket(self, followed: _Followed, key: Key) -> int | None:
        if self.key == "namespace":
            return ring.bucket_of(key[0])
        return followed.buckets.get(key)

    def _gate(self, followed: _Followed) -> Callable[[Key], bool]:
        def owns(key: Key) -> bool:
            bucket = self.bucket(followed, key)
            return bucket is not None and bucket in self.held
        return owns

    def owned_objects(self, controller: Controller) -> int:
        followed = self._by_controller[id(controller)]
        return sum(1 for key in followed.buckets if followed.controller.owns is not None
                   and followed.controller.owns(key))

    # -- the Owner side of membership -----------------------------------------------------------

    async def held_changed(self, held: frozenset[int]) -> None:
        """New held buckets: the gate follows at once, the watches restart with the new selector."""
        self.held = held
        selector = ring.selector(held, self.key)
        if self.metrics is not None:
            self.metrics.buckets.set(len(held))
            self.metrics.ranges.set(len(ring.ranges(held)))
        if selector == self.selector:
            return
        self.selector = selector
        log.info("shard selector changed", extra={"buckets": ring.describe(held), "ranges": len(ring.ranges(held))})
        for followed in self._followed:
            await self._restart(followed)

    async def drain(self, buckets: frozenset[int], grace: float) -> None:
        """Hand over ``buckets``: their running reconciles finish within ``grace`` or are cancelled."""
        for followed in self._followed:
            def leaving(key: Key, followed: _Followed = followed) -> bool:
                return self.bucket(followed, key) in buckets
            cancelled = await followed.controller.release_keys(leaving, grace)
            if cancelled:
                log.warning("reconciles cancelled for a hand-over", extra={"controller": followed.controller.name,
                                                                           "reconciles": cancelled})

    # -- following ------------------------------------------------------------------------------

    async def _restart(self, followed: _Followed) -> None:
        if followed.task is not None:
            followed.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await followed.task
            followed.task = None
        if self.selector:
            followed.task = asyncio.create_task(self._follow(followed, self.selector))
            followed.task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A follower ended: only a configuration error ends one (it retries everything else)."""
        if task.cancelled() or self._fatal is None or self._fatal.done():
            return
        failure = task.exception()
        if isinstance(failure, errors.ConfigurationError):
            self._fatal.set_exception(failure)

    async def _follow(self, followed: _Followed, selector: str) -> None:
        controller = followed.controller
        gvk = controller.watch.gvk
        handler = _Handler(self, followed)
        held = self.held

        def inside(obj: dict[str, Any]) -> bool:
            return ring.bucket_of(ring.key_value(obj, self.key)) in held

        def decided(applied: bool) -> None:
            followed.unfiltered = not applied
            log.info("shard selector checked", extra={"controller": controller.name, "server_side": applied})
            if self.metrics is not None:
                self.metrics.server_side.set(1 if applied else 0, controller.name)

        shard = informer.ShardRequest("" if followed.unfiltered else selector, inside=inside,
                                      probe=ring.probe_selector(self.key), decided=decided,
                                      verdict=False if followed.unfiltered else None)
        await informer.follow(self.cluster, (gvk.group, gvk.version, gvk.kind), self.namespaces, handler,
                              what=f"primaries {controller.name}", shard=shard)

    async def deliver(self, followed: _Followed, event_type: str, obj: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.events.inc(followed.controller.name)
        key = objects.key(obj)
        bucket = ring.bucket_of(ring.key_value(obj, self.key))
        followed.buckets[key] = bucket
        if bucket not in self.held:
            return  # a server that did not filter, or a bucket being handed over: never ours to reconcile
        await self.sink(followed.controller, event_type, obj)

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Until ``stop``: the followers run as the held buckets dictate (started by :meth:`held_changed`)."""
        if ready is not None:
            ready.set()
        self._fatal = asyncio.get_running_loop().create_future()
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({stopping, self._fatal}, return_when=asyncio.FIRST_COMPLETED)
            if self._fatal.done():
                self._fatal.result()  # raises the follower's configuration error
        finally:
            stopping.cancel()
            for followed in self._followed:
                if followed.task is not None:
                    followed.task.cancel()
            await asyncio.gather(*(f.task for f in self._followed if f.task is not None), return_exceptions=True)


class _Handler:
    """Hands the follower's objects and events to :meth:`ShardedPrimaries.deliver` in order."""

    def __init__(self, primaries: ShardedPrimaries, followed: _Followed) -> None:
        self.primaries = primaries
        self.followed = followed
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None

    def _put(self, event_type: str, obj: dict[str, Any]) -> None:
        self._queue.put_nowait((event_type, obj))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while not self._queue.empty():
            event_type, obj = self._queue.get_nowait()
            await self.primaries.deliver(self.followed, event_type, obj)

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        self._put("ADDED", obj)

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        self._put(event_type, obj)
