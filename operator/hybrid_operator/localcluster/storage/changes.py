"""The change feed: every committed write as an event, kept for resume and fanned out live.

kube-apiserver's watch cache plays this role over etcd's revisions.  Each
write the :class:`~.store.Store` commits becomes one :class:`Change` (ADDED,
MODIFIED or DELETED, at its resourceVersion).  The feed keeps the most recent
ones, so a watch that resumes from a resourceVersion replays what it missed
(or learns with 410 Expired that it is older than the history), and puts every
new one on the queue of each live subscriber: watch streams and the
controllers.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One committed change, as delivered to watchers."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    skey: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


class ChangeFeed:
    """The latest ``history`` changes, and the queues of everyone following new ones."""

    def __init__(self, history: int) -> None:
        self.size = history
        self._history: collections.deque[Change] = collections.deque(maxlen=history)
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self.compacted_rv = 0
        """Changes at or below this resourceVersion are no longer kept."""

    def restore(self, changes: Iterable[Change], compacted_rv: int) -> None:
        """Start from the history a previous run persisted."""
        self._history.extend(changes)
        self.compacted_rv = compacted_rv
        if len(self._history) == self._history.maxlen:
            self.compacted_rv = max(self.compacted_rv, self._history[0].rv - 1)

    def publish(self, change: Change) -> None:
        if len(self._history) == self._history.maxlen:
            self.compacted_rv = max(self.compacted_rv, self._history[0].rv)
        self._history.append(change)
        for queue in self._subscribers:
            queue.put_nowait(change)

    def since(self, rv: int) -> list[Change] | None:
        """Changes after ``rv``, or None when ``rv`` is older than the retained history."""
        if rv < self.compacted_rv:
            return None
        return [change for change in self._history if change.rv > rv]

    def subscribe(self) -> asyncio.Queue[Change]:
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change]) -> None:
        self._subscribers.discard(queue)
