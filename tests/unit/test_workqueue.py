"""Unit tests for hybrid_operator.controller.workqueue: client-go's delaying, rate-limited queue semantics.

Time is a FakeClock the tests move by hand, so "after 5 s" costs nothing and nothing depends on how
loaded the machine is; concurrency is checked with events the tests release, never with sleeps.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from hybrid_operator.controller.workqueue import Backoff, WorkQueue
from support.fakes import FakeClock, settle

pytestmark = pytest.mark.unit


class Recorder:
    """A process function that records keys and the time they were processed."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.seen: list[tuple[str, float]] = []

    async def __call__(self, key: str) -> None:
        self.seen.append((key, self.clock.monotonic()))

    def keys(self) -> list[str]:
        return [key for key, _ in self.seen]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


@pytest.fixture
async def started() -> AsyncIterator[Callable[..., WorkQueue[str]]]:
    queues: list[WorkQueue[str]] = []

    def start(process: Callable[[str], Awaitable[None]], clock: FakeClock, workers: int = 2,
              rate_limiter: Backoff | None = None) -> WorkQueue[str]:
        queue: WorkQueue[str] = WorkQueue(process, workers, clock=clock, rate_limiter=rate_limiter)
        queue.start()
        queues.append(queue)
        return queue

    yield start
    for queue in queues:
        await queue.stop()


# -- one pending entry per key, earliest ready time wins ------------------------------------------


async def test_many_adds_of_one_key_make_one_pending_entry(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(Recorder(clock), 1, clock=clock)
    for _ in range(5):
        queue.add("a")
        queue.add_after("a", 3)
    queue.add("b")
    assert (queue.depth(), queue.waiting()) == (2, 0)
    assert queue.pending("a") == clock.now


async def test_delayed_adds_keep_the_earliest_ready_time(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(Recorder(clock), 1, clock=clock)
    queue.add_after("a", 5)
    queue.add_after("a", 2)     # earlier: moves the entry forward
    queue.add_after("a", 10)    # later: no-op
    queue.add_after("a", 2.5)   # later than 2: no-op
    assert queue.waiting() == 1
    assert queue.pending("a") == clock.now + 2
    assert queue.pending("b") is None


async def test_an_add_supersedes_a_delayed_entry_and_a_delay_never_postpones_a_ready_key(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(Recorder(clock), 1, clock=clock)
    queue.add_after("a", 5)
    queue.add("a")
    assert (queue.depth(), queue.waiting()) == (1, 0)
    queue.add_after("a", 1)
    assert (queue.depth(), queue.waiting()) == (1, 0)
    assert queue.pending("a") == clock.now


async def test_a_delayed_key_is_processed_once_when_its_time_comes(clock: FakeClock, started) -> None:
    recorder = Recorder(clock)
    queue = started(recorder, clock)
    queue.add_after("a", 5)
    queue.add_after("a", 7)
    await clock.advance(4.9)
    assert recorder.seen == []
    await clock.advance(0.2)
    assert recorder.seen == [("a", 105.0)]
    await clock.advance(10)
    assert recorder.keys() == ["a"]  # the later time was never a second entry


async def test_an_add_before_the_delay_ends_processes_once_now_and_not_again_later(clock: FakeClock,
                                                                                   started) -> None:
    recorder = Recorder(clock)
    queue = started(recorder, clock)
    queue.add_after("a", 5)
    await clock.advance(1)
    queue.add("a")
    await settle()
    assert recorder.seen == [("a", 101.0)]
    await clock.advance(10)
    assert recorder.keys() == ["a"]


async def test_moving_a_delay_forward_wakes_the_timer_earlier(clock: FakeClock, started) -> None:
    recorder = Recorder(clock)
    queue = started(recorder, clock)
    queue.add_after("a", 60)
    await settle()            # the timer now sleeps until +60
    queue.add_after("a", 1)
    await clock.advance(1)
    assert recorder.seen == [("a", 101.0)]


# -- rate-limited retries ---------------------------------------------------------------------------


def test_backoff_doubles_from_the_base_and_is_capped() -> None:
    backoff = Backoff(base=1.0, cap=8.0)
    assert [backoff.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.num_requeues("a") == 6
    assert backoff.when("b") == 1.0, "every key has its own count"


def test_forget_resets_the_backoff() -> None:
    backoff = Backoff()
    for _ in range(3):
        backoff.when("a")
    backoff.forget("a")
    assert backoff.num_requeues("a") == 0
    assert backoff.when("a") == 1.0


def test_backoff_defaults_are_one_second_doubling_to_five_minutes_without_overflow() -> None:
    backoff = Backoff()
    delays = [backoff.when("a") for _ in range(2000)]
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(delays) == delays[-1] == 300.0


async def test_rate_limited_retries_wait_longer_each_time_until_forgotten(clock: FakeClock, started) -> None:
    recorder = Recorder(clock)
    queue = started(recorder, clock, rate_limiter=Backoff(base=1.0, cap=4.0))
    delays = []
    for _ in range(4):
        delays.append(queue.add_rate_limited("a"))
        await clock.advance(delays[-1])
    assert delays == [1.0, 2.0, 4.0, 4.0]
    assert [t for _, t in recorder.seen] == [101.0, 103.0, 107.0, 111.0]
    assert queue.num_requeues("a") == 4
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == 1.0


async def test_a_retry_never_postpones_an_earlier_requeue(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(Recorder(clock), 1, clock=clock, rate_limiter=Backoff(base=30.0))
    queue.add_after("a", 2)
    assert queue.add_rate_limited("a") == 30.0
    assert queue.pending("a") == clock.now + 2


# -- workers ----------------------------------------------------------------------------------------


class Gate:
    """A process function that blocks every key until released, counting concurrency per key."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.most_at_once: Counter[str] = Counter()
        self.total_at_once = 0
        self.max_total = 0
        self.done: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, key: str) -> None:
        self.running[key] += 1
        self.total_at_once += 1
        self.most_at_once[key] = max(self.most_at_once[key], self.running[key])
        self.max_total = max(self.max_total, self.total_at_once)
        try:
            await self.release.wait()
        finally:
            self.running[key] -= 1
            self.total_at_once -= 1
            self.done.append(key)


async def test_a_key_is_never_processed_by_two_workers_at_once(clock: FakeClock, started) -> None:
    gate = Gate()
    queue = started(gate, clock, workers=4)
    queue.add("a")
    await settle()
    assert gate.running["a"] == 1
    for _ in range(5):
        queue.add("a")
        queue.add_after("a", 0.5)
        await settle()
    await clock.advance(1)
    assert gate.most_at_once["a"] == 1
    assert queue.active() == 1 and queue.depth() == 0, "the re-add waits as dirty, not in the ready queue"
    gate.release.set()
    await settle()
    assert gate.done == ["a", "a"], "added while processing: processed exactly once more, afterwards"
    assert gate.most_at_once["a"] == 1


async def test_a_key_added_while_processing_is_processed_again_afterwards(clock: FakeClock, started) -> None:
    gate = Gate()
    queue = started(gate, clock, workers=1)
    queue.add("a")
    await settle()
    queue.add("a")
    gate.release.set()
    await settle()
    assert gate.done == ["a", "a"]
    assert queue.pending("a") is None


async def test_a_delay_ending_while_the_key_is_processed_reprocesses_it_afterwards(clock: FakeClock,
                                                                                   started) -> None:
    gate = Gate()
    queue = started(gate, clock, workers=2)
    queue.add("a")
    await settle()
    queue.add_after("a", 1)
    await clock.advance(2)
    assert gate.most_at_once["a"] == 1 and gate.done == []
    gate.release.set()
    await settle()
    assert gate.done == ["a", "a"]


async def test_workers_are_bounded(clock: FakeClock, started) -> None:
    gate = Gate()
    queue = started(gate, clock, workers=3)
    for index in range(10):
        queue.add(f"k{index}")
    await settle()
    assert (gate.total_at_once, queue.active(), queue.depth()) == (3, 3, 7)
    gate.release.set()
    await settle()
    assert sorted(gate.done) == sorted(f"k{index}" for index in range(10))
    assert gate.max_total == 3


async def test_a_failing_process_does_not_stop_the_worker(clock: FakeClock, started,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    async def process(key: str) -> None:
        seen.append(key)
        if key == "bad":
            raise RuntimeError("boom")

    queue = started(process, clock, workers=1)
    queue.add("bad")
    queue.add("good")
    await settle()
    assert seen == ["bad", "good"]
    assert "work item failed" in caplog.text


async def test_a_stopped_queue_takes_nothing_more(clock: FakeClock) -> None:
    recorder = Recorder(clock)
    queue: WorkQueue[str] = WorkQueue(recorder, 1, clock=clock)
    queue.start()
    queue.add_after("a", 1)
    await queue.stop()
    queue.add("b")
    queue.add_after("c", 1)
    await clock.advance(5)
    assert recorder.seen == [] and queue.depth() == 0
