"""Unit tests for hybrid_operator.leader: taking, renewing, losing and releasing a Lease.

The Lease store is an in-memory fake with the API server's optimistic concurrency (resourceVersion
checked on replace, 409 on a stale one); time is a fake clock the tests move.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.manager.leader import ElectionConfig, LeaderElector
from support.fakes import FakeClock

pytestmark = pytest.mark.unit


class FakeLeases:
    """Leases by (namespace, name); ``down`` makes every call fail as an unreachable API would."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0
        self.down = False

    def get_lease(self, namespace: str, name: str, timeout: float) -> dict[str, Any] | None:
        if self.down:
            raise errors.TemporaryError("connection refused")
        found = self.items.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def write_lease(self, namespace: str, lease: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        if self.down:
            raise errors.TemporaryError("connection refused")
        key = (namespace, lease["metadata"]["name"])
        current = self.items.get(key)
        version = lease["metadata"].get("resourceVersion")
        if (current is None) != (version is None):
            return None  # exists already, or replaced a deleted one
        if current is not None and current["metadata"]["resourceVersion"] != version:
            return None  # stale: someone wrote in between
        self.version += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.items[key] = stored
        return copy.deepcopy(stored)

    def holder(self) -> Any:
        return next(iter(self.items.values()))["spec"].get("holderIdentity")


def elector(store: FakeLeases, clock: FakeClock, identity: str, calls: list[str] | None = None,
            **durations: float) -> LeaderElector:
    log = calls if calls is not None else []

    async def started() -> None:
        log.append(f"{identity} started")

    async def stopped() -> None:
        log.append(f"{identity} stopped")

    config = ElectionConfig("ops", "default", identity, **durations)
    return LeaderElector(store, config, started, stopped, clock=clock)


async def test_a_standby_takes_an_unrenewed_lease_only_after_the_lease_duration() -> None:
    store, clock = FakeLeases(), FakeClock(1000.0)
    first, second = elector(store, clock, "a"), elector(store, clock, "b")
    assert await first._attempt(timeout=1)
    assert not await second._attempt(timeout=1)  # held and fresh
    clock.now += 14
    assert not await second._attempt(timeout=1)
    clock.now += 2  # 16 s since b first saw this record: expired by b's own clock
    assert await second._attempt(timeout=1)
    spec = store.items[("default", "ops")]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("b", 1, 15)
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]


async def test_renewals_keep_the_lease_from_a_standby() -> None:
    store, clock = FakeLeases(), FakeClock(1000.0)
    first, second = elector(store, clock, "a"), elector(store, clock, "b")
    assert await first._attempt(timeout=1)
    for _ in range(10):
        clock.now += 5
        assert await first._attempt(timeout=1)  # a renewal changes renewTime: b starts counting again
        assert not await second._attempt(timeout=1)
    assert store.holder() == "a"


async def test_of_two_standbys_racing_for_an_expired_lease_one_wins() -> None:
    store, clock = FakeLeases(), FakeClock(1000.0)
    first, second, third = elector(store, clock, "a"), elector(store, clock, "b"), elector(store, clock, "c")
    assert await first._attempt(timeout=1)
    assert not await second._attempt(timeout=1) and not await third._attempt(timeout=1)
    clock.now += 16
    seen_by_b = store.get_lease("default", "ops", 1)
    assert seen_by_b is not None
    assert await third._attempt(timeout=1)  # c writes between b's read and b's write
    assert not await second._write(second._claim(seen_by_b), timeout=1)  # b's write is stale: 409
    assert store.holder() == "c"


async def test_release_hands_over_at_once() -> None:
    store, clock = FakeLeases(), FakeClock(1000.0)
    first, second = elector(store, clock, "a"), elector(store, clock, "b")
    assert await first._attempt(timeout=1)
    first.leading = True
    await first.release()
    spec = store.items[("default", "ops")]["spec"]
    assert spec["holderIdentity"] is None and spec["leaseDurationSeconds"] == 1
    assert not first.leading
    assert await second._attempt(timeout=1)  # no waiting for expiry


async def test_a_leader_whose_lease_was_taken_stops_at_once() -> None:
    store, clock = FakeLeases(), FakeClock(1000.0)
    first = elector(store, clock, "a")
    assert await first._attempt(timeout=1)
    lease = store.get_lease("default", "ops", 1)
    assert lease is not None
    lease["spec"]["holderIdentity"] = "intruder"
    store.write_lease("default", lease, 1)
    assert not await first._renew()  # no waiting for the renew deadline


async def test_run_loses_leadership_when_the_api_is_gone_for_the_renew_deadline() -> None:
    store, calls = FakeLeases(), []
    real = LeaderElector(store, ElectionConfig("ops", "default", "a", lease_duration=0.6, renew_deadline=0.3,
                                               retry_period=0.05), _note(calls, "started"), _note(calls, "stopped"))
    stop = asyncio.Event()
    task = asyncio.create_task(real.run(stop))
    await _until(lambda: calls == ["started"])
    assert real.leading and real.healthy()
    store.down = True
    await _until(lambda: calls == ["started", "stopped"])
    assert not real.leading
    store.down = False
    await _until(lambda: calls == ["started", "stopped", "started"])  # leads again once it can
    stop.set()
    await asyncio.wait_for(task, 2)


@pytest.mark.parametrize(("durations", "ok"), [
    ({}, True),
    ({"lease_duration": 15, "renew_deadline": 15}, False),
    ({"renew_deadline": 1, "retry_period": 2}, False),
    ({"retry_period": 0}, False),
])
def test_durations_must_be_ordered(durations: dict[str, float], ok: bool) -> None:
    if ok:
        assert ElectionConfig("ops", "default", "a", **durations).lease_duration == 15
        return
    with pytest.raises(errors.ConfigurationError, match="lease duration > renew deadline > retry period"):
        ElectionConfig("ops", "default", "a", **durations)


def _note(calls: list[str], what: str) -> Any:
    async def note() -> None:
        calls.append(what)
    return note


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)
