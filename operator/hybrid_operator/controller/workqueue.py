"""A deduplicating, delaying, rate-limited work queue of object keys, as client-go's workqueue has.

Watch events only say "look at this object again", so the queue holds keys, never objects (the
reconciler always reads the object as it is now), with client-go's semantics:

* **One pending entry per key.** A key is either ready (waiting for a worker), dirty (being
  processed, to be processed again afterwards), waiting for a ready time, or not pending at all;
  never two of these at once, however many events, requeues and retries arrive.
* **The earliest ready time wins.** :meth:`WorkQueue.add_after` for a key that is already due
  earlier (ready, dirty, or waiting for an earlier time) changes nothing; one due later moves its
  waiting entry forward. :meth:`WorkQueue.add` makes the key ready at once and drops its waiting
  entry. So a resync chain never forks: each processing schedules at most one next time.
* **Never the same key to two workers at once.** A key added while it is being processed is
  processed again once, afterwards.
* **Per-item exponential rate limiting** for retries (client-go's ``ItemExponentialFailureRateLimiter``):
  :meth:`WorkQueue.add_rate_limited` delays a key by ``base * 2**failures`` (capped) and counts a
  failure; :meth:`WorkQueue.forget` resets the count once the key succeeds.
* At most ``workers`` keys are processed at once.

Time comes from a :class:`Clock` (monotonic seconds and a sleep), so tests can move it by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

log = logging.getLogger(__name__)

#: beyond this many failures ``base * 2**failures`` is past any sensible cap (and would overflow)
_MAX_EXPONENT = 62


class Clock(Protocol):
    """Monotonic time in seconds, and a way to wait for it to pass."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` and :func:`asyncio.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass
class Backoff:
    """The per-item rate limiter of retries: ``base * 2**failures`` seconds, capped at ``cap``.

    client-go's ``ItemExponentialFailureRateLimiter``: :meth:`when` counts a failure of ``key`` and
    says how long to wait before retrying it; :meth:`forget` clears the count (after a success).
    """

    base: float = 1.0
    cap: float = 300.0
    _failures: dict[Hashable, int] = field(default_factory=dict)

    def when(self, key: Hashable) -> float:
        """The delay before the next retry of ``key`` (and one more failure counted)."""
        count = self._failures.get(key, 0)
        self._failures[key] = count + 1
        if count > _MAX_EXPONENT:
            return float(self.cap)
        return float(min(self.cap, self.base * (2.0**count)))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        """Failures counted for ``key`` since it was last forgotten."""
        return self._failures.get(key, 0)


class WorkQueue(Generic[K]):
    """Keys in, one worker call per key at a time, at most ``workers`` at once (see the module doc)."""

    def __init__(self, process: Callable[[K], Awaitable[None]], workers: int, *,
                 rate_limiter: Backoff | None = None, clock: Clock | None = None) -> None:
        self._process = process
        self._workers = max(1, workers)
        self.rate_limiter = rate_limiter if rate_limiter is not None else Backoff()
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        #: the one waiting entry of each key: its ready time
        self._waiting: dict[K, float] = {}
        #: (ready time, tie-breaker, key); entries that no longer match ``_waiting`` are stale
        self._timers: list[tuple[float, int, K]] = []
        self._counter = itertools.count()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    # -- adding --------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Process ``key`` as soon as a worker is free (once, however often added).

        A waiting entry of the key is dropped: this add is earlier.
        """
        if self._closing:
            return
        self._waiting.pop(key, None)
        if key in self._active:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Process ``key`` after ``delay`` seconds, unless it is already due earlier."""
        if self._closing:
            return
        if delay <= 0:
            self.add(key)
            return
        if key in self._queued or key in self._dirty:
            return
        at = self._clock.monotonic() + delay
        current = self._waiting.get(key)
        if current is not None and current <= at:
            return
        self._waiting[key] = at
        heapq.heappush(self._timers, (at, next(self._counter), key))
        self._wakeup.set()

    def add_rate_limited(self, key: K) -> float:
        """Retry ``key`` after its rate limiter's delay (one more failure counted); returns the delay."""
        delay = self.rate_limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts the backoff from the base delay again."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    # -- introspection -------------------------------------------------------------------------

    def depth(self) -> int:
        """Keys ready and waiting for a worker (client-go's ``workqueue_depth``)."""
        return len(self._queued)

    def active(self) -> int:
        return len(self._active)

    def waiting(self) -> int:
        """Keys waiting for their ready time."""
        return len(self._waiting)

    def pending(self, key: K) -> float | None:
        """When ``key`` is next due: its ready time, now when it is ready or dirty, None when not pending."""
        if key in self._queued or key in self._dirty:
            return self._clock.monotonic()
        return self._waiting.get(key)

    # -- running -------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker()) for _ in range(self._workers)]
        self._tasks.append(loop.create_task(self._timer()))

    async def stop(self) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _fire(self, now: float) -> float | None:
        """Make every key whose ready time has come ready; the next ready time, if any."""
        while self._timers:
            at, _, key = self._timers[0]
            if self._waiting.get(key) != at:
                heapq.heappop(self._timers)  # superseded by an add or an earlier time
                continue
            if at > now:
                return at
            heapq.heappop(self._timers)
            self.add(key)
        return None

    async def _timer(self) -> None:
        slept_until: float | None = None
        while True:
            self._wakeup.clear()
            now = self._clock.monotonic()
            if slept_until is not None:
                now = max(now, slept_until)  # the sleep ended: its time has come, whatever float rounding says
            next_at = self._fire(now)
            if next_at is None:
                await self._wakeup.wait()
                slept_until = None
            else:
                slept = await self._sleep_or_wakeup(next_at - now)
                slept_until = next_at if slept else None

    async def _sleep_or_wakeup(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless woken first (a new, possibly earlier, ready time); True if slept."""
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)
        return sleeper.done() and not sleeper.cancelled()

    async def _worker(self) -> None:
        while True:
            key = await self._ready.get()
            self._queued.discard(key)
            self._active.add(key)
            try:
                await self._process(key)
            except Exception:
                log.exception("work item failed", extra={"key": str(key)})
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.add(key)
