"""Unit tests for hybrid_operator.manager.sharding: the ring's assignment and the Lease hand-over protocol.

Members share an in-memory Lease store (resourceVersion-guarded, as the API server) and a clock the
tests move by hand; after every single tick of every member the test checks the safety invariant:
no bucket is held by two members at once.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.manager.sharding import ring
from hybrid_operator.manager.sharding.membership import Member, RingConfig
from support.fakes import FakeClock

pytestmark = pytest.mark.unit


def test_fnv1a_known_values() -> None:
    assert ring.fnv1a64("") == 0xCBF29CE484222325
    assert ring.fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert ring.fnv1a64("foobar") == 0x85944171F73967E8


def test_assignment_is_a_balanced_partition_and_moves_little() -> None:
    for count in range(1, 7):
        members = [f"m{i}" for i in range(count)]
        assigned = ring.assign(members)
        everything = [b for owned in assigned.values() for b in owned]
        assert sorted(everything) == list(range(ring.BUCKETS))
        sizes = [len(owned) for owned in assigned.values()]
        assert max(sizes) - min(sizes) <= 1 or max(sizes) <= -(-ring.BUCKETS // count)
        assert ring.assign(list(reversed(members))) == assigned
    before, after = ring.assign(["a", "b"]), ring.assign(["a", "b", "c"])
    moved = sum(1 for b in range(ring.BUCKETS) if not any(b in before[m] and b in after[m] for m in ("a", "b")))
    assert moved <= ring.BUCKETS // 2


def test_selector_merges_adjacent_buckets_and_covers_the_space() -> None:
    assert ring.selector(set()) == ""
    whole = ring.selector(range(ring.BUCKETS))
    assert whole == "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
    two = ring.selector({0, 1, 5}, key="namespace")
    assert two.count("shardRange(object.metadata.namespace") == 2 and " || " in two
    assert ring.ranges({0, 1}) == [(0, 2 * ring.WIDTH)]
    for value in ("x", "y", "z"):
        assert 0 <= ring.bucket_of(value) < ring.BUCKETS


class Store:
    """Leases in memory with the API server's optimistic concurrency; ``broken`` fails every call."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.broken: set[str] = set()
        self.deleted: list[str] = []

    def _check(self, who: str) -> None:
        if who in self.broken:
            raise errors.TemporaryError("unreachable")

    def list_leases(self, namespace: str, label_selector: str, timeout: float) -> list[dict[str, Any]]:
        return [copy.deepcopy(lease) for lease in self.leases.values()]

    def write_lease(self, namespace: str, lease: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        name = lease["metadata"]["name"]
        self._check(name)
        current = self.leases.get(name)
        given = lease["metadata"].get("resourceVersion")
        if (current is None) != (given is None) or (current is not None and
                                                     current["metadata"]["resourceVersion"] != given):
            return None
        self.rv += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[name] = stored
        return copy.deepcopy(stored)

    def delete_lease(self, namespace: str, name: str, timeout: float, resource_version: str | None = None) -> None:
        self._check(name)
        current = self.leases.get(name)
        if current is not None and resource_version in (None, current["metadata"]["resourceVersion"]):
            del self.leases[name]
            self.deleted.append(name)


class Owner:
    def __init__(self) -> None:
        self.held: frozenset[int] = frozenset()
        self.drained: list[frozenset[int]] = []

    async def held_changed(self, held: frozenset[int]) -> None:
        self.held = held

    async def drain(self, buckets: frozenset[int], grace: float) -> None:
        self.drained.append(buckets)


CONFIG = dict(ring="r", namespace="ns", lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


def member(store: Store, clock: FakeClock, name: str) -> Member:
    return Member(store, RingConfig(identity=name, **CONFIG), Owner(), clock=clock, name=name)  # type: ignore[arg-type]


def assert_safe(members: list[Member]) -> None:
    for i, first in enumerate(members):
        for second in members[i + 1:]:
            assert not first.held & second.held, f"{first.name} and {second.name} both hold {first.held & second.held}"


async def rounds(members: list[Member], everyone: list[Member], clock: FakeClock, count: int) -> None:
    for _ in range(count):
        clock.now += 2.0
        for m in members:
            await m.tick()
            await asyncio.sleep(0)  # let drains finish
            await asyncio.sleep(0)
            assert_safe(everyone)


async def test_one_member_holds_everything_after_claim_and_confirm() -> None:
    store, clock = Store(), FakeClock(100.0)
    alone = member(store, clock, "a")
    await alone.tick()
    assert alone.held == set() and alone.pending == set(range(ring.BUCKETS))
    await alone.tick()
    assert alone.held == set(range(ring.BUCKETS))
    assert alone.owner.held == frozenset(range(ring.BUCKETS))  # type: ignore[attr-defined]
    assert alone.in_ring()


async def test_joining_members_split_the_buckets_without_double_ownership() -> None:
    store, clock = Store(), FakeClock(100.0)
    a, b, c = member(store, clock, "a"), member(store, clock, "b"), member(store, clock, "c")
    await rounds([a], [a, b, c], clock, 3)
    await rounds([a, b], [a, b, c], clock, 5)
    assert a.held | b.held == set(range(ring.BUCKETS))
    await rounds([a, b, c], [a, b, c], clock, 6)
    assert a.held | b.held | c.held == set(range(ring.BUCKETS))
    assert all(len(m.held) in (10, 11) for m in (a, b, c))
    assert a.handovers["released"] > 0


async def test_a_dead_member_s_buckets_move_only_after_its_lease_expired() -> None:
    store, clock = Store(), FakeClock(100.0)
    a, b = member(store, clock, "a"), member(store, clock, "b")
    await rounds([a, b], [a, b], clock, 6)
    dead = frozenset(b.held)
    assert dead
    died_at = clock.now
    while clock.now - died_at < 15.0:  # b's Lease unchanged, but not yet for a lease duration
        await rounds([a], [a], clock, 1)
        assert not a.held & dead
    await rounds([a], [a], clock, 3)
    assert a.held == set(range(ring.BUCKETS))
    assert "b" not in store.leases and store.deleted == ["b"], "the dead member's Lease is deleted"


async def test_a_lease_renewed_after_it_was_seen_expired_is_not_deleted() -> None:
    store, clock = Store(), FakeClock(100.0)
    a, b = member(store, clock, "a"), member(store, clock, "b")
    await rounds([a, b], [a, b], clock, 6)
    store.broken.add("b")  # b cannot renew, and a's deletes of b's Lease fail as well
    while not a._seen["b"].expired:
        await rounds([a, b], [a, b], clock, 1)
    assert "b" in store.leases
    store.broken.clear()

    await b.tick()  # b renews between a's read and a's delete
    await a._delete_expired(1.0)

    assert "b" in store.leases, "the delete was guarded by the resourceVersion a saw expired"
    assert store.deleted == []


async def test_a_member_that_cannot_renew_drops_everything_before_others_may_take_over() -> None:
    store, clock = Store(), FakeClock(100.0)
    a, b = member(store, clock, "a"), member(store, clock, "b")
    await rounds([a, b], [a, b], clock, 6)
    held = frozenset(b.held)
    store.broken.add("b")
    cut_at = clock.now
    while b.held:
        await rounds([a, b], [a, b], clock, 1)
    assert clock.now - cut_at <= 10.0 + 2.0
    assert b.owner.held == frozenset()  # type: ignore[attr-defined]
    assert held in b.owner.drained  # type: ignore[attr-defined]
    assert not a.held & held  # a still waits for b's Lease to expire


async def test_leaving_deletes_the_lease_and_others_take_over_at_once() -> None:
    store, clock = Store(), FakeClock(100.0)
    a, b = member(store, clock, "a"), member(store, clock, "b")
    await rounds([a, b], [a, b], clock, 6)
    stop = asyncio.Event()
    stop.set()
    await b.run(stop)
    assert "b" not in store.leases
    await rounds([a], [a, b], clock, 3)
    assert a.held == set(range(ring.BUCKETS))
