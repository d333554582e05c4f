"""Unit tests for hybrid_operator.localcluster.gcpacing: full collections freeze their survivors, and a
thaw every ``thaw_seconds`` lets a garbage cycle made of frozen containers be freed after all."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from hybrid_operator.localcluster.gcpacing import FullCollectionPacing

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Node:
    """A container in a reference cycle (the only kind the cycle collector has to free)."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pacing(clock: Clock) -> Iterator[FullCollectionPacing]:
    instance = FullCollectionPacing(thaw_seconds=600, clock=clock)
    instance.install()
    yield instance
    instance.uninstall()


def cycle() -> weakref.ref[Node]:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def test_a_full_collection_freezes_its_survivors(pacing: FullCollectionPacing) -> None:
    kept = [Node() for _ in range(100)]

    gc.collect()

    assert pacing.freezes == 1
    assert gc.get_freeze_count() >= len(kept)


def test_a_younger_collection_changes_nothing(pacing: FullCollectionPacing) -> None:
    gc.collect(0)
    gc.collect(1)

    assert (pacing.freezes, pacing.thaws) == (0, 0)
    assert gc.get_freeze_count() == 0


def test_a_frozen_cycle_is_freed_after_the_thaw(pacing: FullCollectionPacing, clock: Clock) -> None:
    holder = [cycle()]
    strong = holder[0]()  # keep the cycle alive through the collection that freezes it
    gc.collect()
    assert pacing.freezes == 1
    del strong

    gc.collect()
    assert holder[0]() is not None, "frozen: not examined"

    clock.now = 600.0
    gc.collect()  # ends with the thaw
    assert pacing.thaws == 1
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert holder[0]() is None, "examined again after the thaw, and freed"


def test_uninstall_gives_everything_back(clock: Clock) -> None:
    pacing = FullCollectionPacing(thaw_seconds=600, clock=clock)
    pacing.install()
    pacing.install()  # once only
    gc.collect()
    assert pacing.freezes == 1

    pacing.uninstall()

    assert gc.get_freeze_count() == 0
    gc.collect()
    assert pacing.freezes == 1, "no longer called"
