"""Sharded replicas (``hybrid-operator run --sharding``): the ring, its membership, the sharded primaries.

Why this package exists: more replicas of an Ansible or Helm operator should add throughput, not only
standbys. :mod:`.ring` places objects on buckets and buckets on members, :mod:`.membership` keeps
the members and hands buckets over through Leases without two owners at once, :mod:`.primaries`
lists and watches only the held buckets (KEP-5866 ``shardSelector``, client-side filtering when the
server ignores it) and gates the controllers. :class:`Sharding` puts them together for the manager.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from hybrid_operator.controller.controller import Controller
from hybrid_operator.controller.metrics import Registry
from hybrid_operator.kube.client import ClusterClient
from hybrid_operator.manager.sharding.membership import Member, RingConfig
from hybrid_operator.manager.sharding.primaries import EventSink, ShardedPrimaries, ShardMetrics


class Sharding:
    """One replica's part in the ring: its membership and its sharded primaries, run together."""

    def __init__(self, cluster: ClusterClient, config: RingConfig, controllers: Sequence[Controller],
                 namespaces: Sequence[str], sink: EventSink, *, key: str = "uid",
                 registry: Registry | None = None, clock: Callable[[], float] | None = None) -> None:
        self.metrics = ShardMetrics(registry) if registry is not None else None
        self.primaries = ShardedPrimaries(cluster, controllers, namespaces, sink, key=key, metrics=self.metrics)
        self.member = Member(cluster, config, self.primaries) if clock is None else \
            Member(cluster, config, self.primaries, clock=clock)
        self.controllers = list(controllers)
        self._counted = {"acquired": 0, "released": 0, "lost": 0}
        if registry is not None:
            registry.add_collector(self._collect)

    def ready(self) -> bool:
        """``/readyz``'s ``shard-ring`` check: this replica's Lease is renewed (it is in the ring)."""
        return self.member.in_ring()

    def _collect(self) -> None:
        assert self.metrics is not None
        self.metrics.members.set(len(self.member.members))
        for controller in self.controllers:
            self.metrics.objects.set(self.primaries.owned_objects(controller), controller.name)
        for direction, total in self.member.handovers.items():
            if total > self._counted[direction]:
                self.metrics.handovers.inc(direction, amount=total - self._counted[direction])
                self._counted[direction] = total

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Membership and primaries until ``stop``; the Lease is deleted last (after the operator drained)."""
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(self.primaries.run(stop, ready)),
                                          asyncio.create_task(self.member.run(stop))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
