"""A deduplicating, delaying work queue of object keys, as controller-runtime has.

Watch events only say "look at this object again": the queue keeps each key
once however many events arrive, never hands the same key to two workers at
once (a key added while it is being processed is processed again afterwards),
delays keys (requeue after a period, exponential backoff after failures), and
caps how many keys are processed at once.  It holds keys only, never objects:
the reconciler always reads the object as it is now.
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
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

log = logging.getLogger(__name__)


@dataclass
class Backoff:
    """Per-key exponential backoff: ``base * 2**failures``, capped."""

    base: float = 1.0
    cap: float = 300.0
    _failures: dict[Hashable, int] = field(default_factory=dict)

    def next_delay(self, key: Hashable) -> float:
        count = self._failures.get(key, 0)
        self._failures[key] = count + 1
        return float(min(self.cap, self.base * (2.0**count)))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class WorkQueue(Generic[K]):
    """Keys in, one worker call per key at a time, at most ``workers`` at once."""

    def __init__(self, process: Callable[[K], Awaitable[None]], workers: int) -> None:
        self._process = process
        self._workers = max(1, workers)
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: list[tuple[float, int, K]] = []
        self._counter = itertools.count()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    def add(self, key: K) -> None:
        """Process ``key`` as soon as a worker is free (once, however often added)."""
        if self._closing:
            return
        if key in self._active:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Process ``key`` after ``delay`` seconds (an earlier add still wins)."""
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._counter), key))
        self._wakeup.set()

    def depth(self) -> int:
        return len(self._queued)

    def active(self) -> int:
        return len(self._active)

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

    async def _timer(self) -> None:
        while True:
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                _, _, key = heapq.heappop(self._timers)
                self.add(key)
            timeout = self._timers[0][0] - now if self._timers else None
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=timeout)

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
