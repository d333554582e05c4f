"""Unit tests for hybrid_operator.localcluster.gcpacing: the heap is frozen at every step, and a thaw every
``thaw_seconds`` lets a garbage cycle that was frozen while alive be freed after all."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from hybrid_operator.localcluster.gcpacing import HeapPacing, PacingTask
from support.fakes import FakeClock

pytestmark = pytest.mark.unit


class Node:
    """A container in a reference cycle (the only kind the cycle collector has to free)."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def cycle() -> tuple[Node, weakref.ref[Node]]:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return first, weakref.ref(first)


def test_a_step_freezes_what_is_alive() -> None:
    kept = [Node() for _ in range(100)]
    pacing = HeapPacing(clock=FakeClock(0.0))

    pacing.step()

    assert pacing.freezes == 1
    assert gc.get_freeze_count() >= len(kept)


def test_a_cycle_frozen_while_alive_is_freed_after_the_thaw() -> None:
    clock = FakeClock(0.0)
    pacing = HeapPacing(thaw_seconds=600, clock=clock)
    strong, ref = cycle()
    pacing.step()  # frozen while alive
    del strong

    gc.collect()
    assert ref() is not None, "frozen: not examined"
    clock.now = 599.0
    pacing.step()
    assert pacing.full_collections == 0 and ref() is not None

    clock.now = 600.0
    pacing.step()

    assert pacing.full_collections == 1
    assert ref() is None, "thawed, examined by the full collection, and freed"
    assert gc.get_freeze_count() > 0, "the survivors are frozen again"


async def test_the_task_steps_until_stopped_and_then_thaws_everything() -> None:
    task = PacingTask(HeapPacing(freeze_seconds=0.01, clock=FakeClock(0.0)))
    task.start()
    await asyncio.sleep(0.1)
    assert task.pacing.freezes >= 2
    assert gc.get_freeze_count() > 0

    await task.stop()

    assert gc.get_freeze_count() == 0
    steps = task.pacing.freezes
    await asyncio.sleep(0.05)
    assert task.pacing.freezes == steps
