"""The node agent's queue of things to sync, with client-go's workqueue guarantees.

A key is queued at most once however often it is added, and never handed to two workers at once: a key
added while a worker syncs it is queued again when that worker is done, so the latest state is always
synced once more. Failed syncs come back after a pause that doubles per consecutive failure of the key.
"""

from __future__ import annotations

import asyncio

Key = tuple[str, str, str]  # what to sync (pod, finish, claim, volume, node), namespace, name
FIRST_RETRY = 0.1
MAX_RETRY = 10.0


class WorkQueue:
    """Keys to sync: deduplicated, one worker per key, retries with a growing pause."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._active: set[Key] = set()
        self._again: set[Key] = set()
        self._failures: dict[Key, int] = {}

    def add(self, key: Key) -> None:
        if key in self._queued:
            return
        if key in self._active:
            self._again.add(key)
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    def later(self, delay: float, key: Key) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def get(self) -> Key:
        key = await self._queue.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: Key, failed: bool = False) -> None:
        """The worker is done with ``key``; after a failure it comes back later."""
        self._active.discard(key)
        if failed:
            count = self._failures[key] = self._failures.get(key, 0) + 1
            self.later(min(MAX_RETRY, FIRST_RETRY * 2 ** (count - 1)), key)
        else:
            self._failures.pop(key, None)
        if key in self._again:
            self._again.discard(key)
            self.add(key)
