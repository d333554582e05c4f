"""Ring membership through Leases, and the hand-over of buckets without two owners at once.

Why this module exists: sharded replicas (``--sharding``) must agree on who reconciles which objects
and must never both reconcile one object, also while buckets move because a replica joined, left
or died. There is no coordinator: every replica runs a :class:`Member` (docs/operations.md,
"Sharding", has the full argument):

* **Membership.** Each replica holds one ``coordination.k8s.io/v1`` Lease of its own, labelled
  with the ring name, renewed every retry period. Another replica's Lease counts as live while its
  record keeps changing: unchanged for ``lease_duration`` by *this* replica's clock, it is expired
  (clocks are never compared). A replica that stops gracefully deletes its Lease; the Lease of one
  that died is deleted by the first member that finds it expired (guarded by the resourceVersion
  it saw, so a Lease renewed meanwhile stays), so Leases of dead replicas do not pile up and a
  replica joining later does not wait a lease duration for them.
* **Assignment.** Every replica computes :func:`ring.assign` over the live members: its *target*.
* **Claims.** A replica's Lease lists in an annotation every bucket it claims. A bucket is
  *held* -- its objects may be reconciled -- only after the replica (1) wrote a claim for it and
  (2) read all Leases afterwards and found no other live claim for it. Two replicas doing this
  for one bucket cannot both succeed: whoever writes second reads the first one's claim.
* **Release.** A bucket leaving the target stops being held at once (no new reconcile starts for
  its objects), runs in progress for its objects get ``handover_grace`` to finish and are then
  cancelled, and only then is the claim dropped from the Lease: the next owner cannot hold it
  earlier.
* **Renew deadline.** A replica whose Lease was not renewed for ``renew_deadline`` drops every
  bucket and cancels its runs before anyone can see its Lease expired (``lease_duration`` later).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hybrid_operator import clock, errors
from hybrid_operator.manager.sharding import ring
from hybrid_operator.manager.sharding.ring import BUCKETS

log = logging.getLogger(__name__)

RING_LABEL = "hybrid-operator.dev/shard-ring"
CLAIMS_ANNOTATION = "hybrid-operator.dev/claimed-buckets"


class LeaseStore(Protocol):
    """What membership needs from the cluster (``ClusterClient`` has it)."""

    def list_leases(self, namespace: str, label_selector: str, timeout: float) -> list[dict[str, Any]]: ...

    def write_lease(self, namespace: str, lease: dict[str, Any], timeout: float) -> dict[str, Any] | None: ...

    def delete_lease(self, namespace: str, name: str, timeout: float,
                     resource_version: str | None = None) -> None: ...


class Owner(Protocol):
    """The side that reconciles: told which buckets are held, asked to drain the ones leaving."""

    async def held_changed(self, held: frozenset[int]) -> None: ...

    async def drain(self, buckets: frozenset[int], grace: float) -> None: ...


@dataclass(frozen=True)
class RingConfig:
    """Which ring, where its Leases live, and the client-go durations (seconds)."""

    ring: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    handover_grace: float = 30.0
    buckets: int = BUCKETS

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline + self.retry_period > self.retry_period > 0:
            raise errors.ConfigurationError(
                "sharding needs lease duration > renew deadline + retry period, and retry period > 0, got "
                f"{self.lease_duration:g}s, {self.renew_deadline:g}s, {self.retry_period:g}s")


@dataclass
class _Seen:
    """Another member's Lease as last read, and when (our clock) its record last changed."""

    version: str
    changed_at: float
    claims: frozenset[int]
    holder: str
    #: unchanged for a lease duration: its claims no longer count, and it is to be deleted
    expired: bool = False


@dataclass
class Member:
    """One replica's membership in the ring (see the module docstring for the protocol)."""

    store: LeaseStore
    config: RingConfig
    owner: Owner
    clock: Callable[[], float] = time.monotonic
    name: str = ""
    held: set[int] = field(default_factory=set)
    pending: set[int] = field(default_factory=set)
    releasing: set[int] = field(default_factory=set)
    members: tuple[str, ...] = ()
    handovers: dict[str, int] = field(default_factory=lambda: {"acquired": 0, "released": 0, "lost": 0})
    #: monotonic start of the last successful write of our Lease (None: not in the ring)
    last_renew: float | None = None
    _lease: dict[str, Any] | None = None
    _written: frozenset[int] = frozenset()
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _drains: dict[int, asyncio.Task[None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.config.ring}-{uuid.uuid4().hex[:10]}"

    # -- state ----------------------------------------------------------------------------------

    def in_ring(self) -> bool:
        """Our Lease was renewed within the renew deadline (``/readyz``'s ``shard-ring`` check)."""
        return self.last_renew is not None and self.clock() - self.last_renew <= self.config.renew_deadline

    def _remaining(self) -> float:
        """Seconds until the renew deadline (the whole deadline while out of the ring)."""
        if self.last_renew is None:
            return self.config.renew_deadline
        return max(0.0, self.last_renew + self.config.renew_deadline - self.clock())

    def owns(self, bucket: int) -> bool:
        return bucket in self.held

    # -- the loop -------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Join, follow the ring every retry period, and leave (delete the Lease) once ``stop`` is set."""
        log.info("shard ring joined", extra={"ring": self.config.ring, "member": self.name,
                                            "namespace": self.config.namespace})
        try:
            while not stop.is_set():
                await self.tick()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.1, min(self.config.retry_period, self._remaining())))
        finally:
            await self._leave()

    async def tick(self) -> None:
        """One round: read the ring, confirm, release and claim buckets, renew our Lease."""
        started = self.clock()
        if self.last_renew is not None and started - self.last_renew > self.config.renew_deadline:
            await self._lose("lease not renewed within the renew deadline")
        timeout = max(0.5, min(self.config.retry_period * 2, self._remaining() / 2))
        try:
            leases = await asyncio.to_thread(self.store.list_leases, self.config.namespace,
                                             f"{RING_LABEL}={self.config.ring}", timeout)
        except errors.TemporaryError as exc:
            log.debug("shard ring not readable", extra={"ring": self.config.ring, "error": str(exc)})
            return
        others = self._observe(leases)
        await self._delete_expired(timeout)
        self.members = tuple(sorted({self.name, *others}))
        target = ring.assign(self.members, self.config.buckets).get(self.name, frozenset())
        claimed_elsewhere = frozenset().union(*others.values()) if others else frozenset()
        acquired = self._confirm(claimed_elsewhere)
        self._release(target)
        self.pending |= {b for b in target if b not in self.held | self.pending | self.releasing
                         and b not in claimed_elsewhere}
        await self._write(started, timeout)
        if acquired:
            self.handovers["acquired"] += len(acquired)
            log.info("shard buckets acquired", extra={"ring": self.config.ring, "member": self.name,
                                                      "buckets": ring.describe(acquired),
                                                      "held": ring.describe(frozenset(self.held)),
                                                      "members": len(self.members)})
            await self.owner.held_changed(frozenset(self.held))

    def _observe(self, leases: list[dict[str, Any]]) -> dict[str, frozenset[int]]:
        """Record the other members' Leases; the claims of the live ones."""
        now = self.clock()
        live: dict[str, frozenset[int]] = {}
        present = set()
        for lease in leases:
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name or name == self.name:
                continue
            present.add(name)
            version = str(meta.get("resourceVersion") or "")
            spec = lease.get("spec") or {}
            claims = ring.parse_buckets((meta.get("annotations") or {}).get(CLAIMS_ANNOTATION))
            seen = self._seen.get(name)
            if seen is None or seen.version != version:
                seen = self._seen[name] = _Seen(version, now, claims, str(spec.get("holderIdentity") or ""))
            duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
            if seen.holder and now - seen.changed_at <= duration:
                live[name] = seen.claims
            elif seen.holder:
                seen.expired = True
        for gone in set(self._seen) - present:
            del self._seen[gone]
        return live

    async def _delete_expired(self, timeout: float) -> None:
        """Delete the Leases found expired (each only in the version seen expired); errors wait for the next round."""
        for name, seen in list(self._seen.items()):
            if not seen.expired:
                continue
            try:
                await asyncio.to_thread(self.store.delete_lease, self.config.namespace, name, timeout, seen.version)
            except errors.TemporaryError as exc:
                log.debug("expired shard lease not deleted", extra={"ring": self.config.ring, "lease": name,
                                                                   "error": str(exc)})
                continue
            del self._seen[name]
            log.info("expired shard lease deleted", extra={"ring": self.config.ring, "member": self.name,
                                                           "lease": name})

    def _confirm(self, claimed_elsewhere: frozenset[int]) -> frozenset[int]:
        """Pending buckets whose claim was written before this read and that nobody else claims: held now.

        A pending bucket someone else claims too is given up by the member with the larger name; the
        smaller one keeps its claim and confirms once the other claim is gone.
        """
        acquired = set()
        for bucket in sorted(self.pending):
            if bucket not in self._written:
                continue
            if bucket not in claimed_elsewhere:
                acquired.add(bucket)
            elif any(bucket in s.claims and name < self.name for name, s in self._seen.items()):
                self.pending.discard(bucket)
        self.pending -= acquired
        self.held |= acquired
        return frozenset(acquired)

    def _release(self, target: frozenset[int]) -> None:
        """Buckets out of the target: no longer held, drained in the background, then unclaimed."""
        self.pending &= target
        leaving = frozenset(self.held - target)
        if not leaving:
            return
        self.held -= leaving
        self.releasing |= leaving
        log.info("shard buckets releasing", extra={"ring": self.config.ring, "member": self.name,
                                                   "buckets": ring.describe(leaving),
                                                   "members": len(self.members)})
        task = asyncio.create_task(self._drain(leaving))
        for bucket in leaving:
            self._drains[bucket] = task

    async def _drain(self, buckets: frozenset[int]) -> None:
        try:
            await self.owner.held_changed(frozenset(self.held))
            await self.owner.drain(buckets, self.config.handover_grace)
        finally:
            self.releasing -= buckets
            self.handovers["released"] += len(buckets)
            for bucket in buckets:
                self._drains.pop(bucket, None)
            log.info("shard buckets released", extra={"ring": self.config.ring, "member": self.name,
                                                      "buckets": ring.describe(buckets)})

    async def _lose(self, why: str) -> None:
        """Renew deadline passed: drop everything now (others may take it once our Lease expires)."""
        dropped = frozenset(self.held | self.releasing)
        log.warning("shard buckets lost", extra={"ring": self.config.ring, "member": self.name, "reason": why,
                                                 "buckets": ring.describe(dropped)})
        self.handovers["lost"] += len(dropped)
        self.held.clear()
        self.pending.clear()
        self.last_renew = None
        self._written = frozenset()
        await self.owner.held_changed(frozenset())
        await self.owner.drain(dropped, 0.0)
        for task in set(self._drains.values()):
            await asyncio.gather(task, return_exceptions=True)

    # -- our Lease ------------------------------------------------------------------------------

    def _claims(self) -> frozenset[int]:
        return frozenset(self.held | self.pending | self.releasing)

    async def _write(self, started: float, timeout: float) -> None:
        claims = self._claims()
        lease = self._next_lease(claims)
        try:
            written = await asyncio.to_thread(self.store.write_lease, self.config.namespace, lease, timeout)
        except errors.TemporaryError as exc:
            log.debug("shard lease not renewed", extra={"ring": self.config.ring, "error": str(exc)})
            written = None
            if "not found" in str(exc).lower():
                self._lease = None  # deleted by someone: create it again next round
        if written is None:
            return
        self._lease = written
        self._written = claims
        self.last_renew = started

    def _next_lease(self, claims: frozenset[int]) -> dict[str, Any]:
        now = clock.micro_time()
        if self._lease is None:
            return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.config.namespace,
                                 "labels": {RING_LABEL: self.config.ring},
                                 "annotations": {CLAIMS_ANNOTATION: ring.describe(claims)}},
                    "spec": {"holderIdentity": self.config.identity,
                             "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        meta = dict(self._lease.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), CLAIMS_ANNOTATION: ring.describe(claims)}
        spec = {**(self._lease.get("spec") or {}), "renewTime": now, "holderIdentity": self.config.identity}
        return {**self._lease, "metadata": meta, "spec": spec}

    async def _leave(self) -> None:
        """Stop: the owner has drained (graceful shutdown) before; our Lease goes, so others take over at once."""
        for task in set(self._drains.values()):
            await asyncio.gather(task, return_exceptions=True)
        self.held.clear()
        self.pending.clear()
        if self._lease is None:
            return
        try:
            await asyncio.to_thread(self.store.delete_lease, self.config.namespace, self.name, 5.0)
            log.info("shard ring left", extra={"ring": self.config.ring, "member": self.name})
        except errors.TemporaryError as exc:
            log.warning("shard lease not deleted", extra={"ring": self.config.ring, "error": str(exc)})
        self._lease = None
        self.last_renew = None

