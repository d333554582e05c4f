"""The change feed: every committed write as an event, kept for resume and fanned out live.

kube-apiserver's watch cache plays this role over etcd's revisions.  Each
write the :class:`~.store.Store` commits becomes one :class:`Change` (ADDED,
MODIFIED or DELETED, at its resourceVersion).  The feed keeps the most recent
ones, so a watch that resumes from a resourceVersion replays what it missed
(or learns with 410 Expired that it is older than the history), and puts every
new one on the queue of each live subscriber: watch streams and the
controllers.

The history is bounded by count *and* by bytes (the JSON size of the new and
old copies each change holds): a count alone let 20,000 changes of big objects
hold 1.17 GB for 2.7 MB of live objects (issue 13 item 5).  The oldest changes
go first; the newest one always stays.
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
    #: bytes of JSON this change stands for (its object and its old copy), for the history's budget
    size: int = 0


class ChangeFeed:
    """The latest ``history`` changes, and the queues of everyone following new ones."""

    def __init__(self, history: int, max_bytes: int | None = None) -> None:
        self.size = history
        self.max_bytes = max_bytes
        self.bytes = 0
        self._history: collections.deque[Change] = collections.deque()
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self.compacted_rv = 0
        """Changes at or below this resourceVersion are no longer kept."""

    def restore(self, changes: Iterable[Change], compacted_rv: int) -> None:
        """Start from the history a previous run persisted."""
        self.compacted_rv = compacted_rv
        for change in changes:
            self._keep(change)

    def publish(self, change: Change) -> None:
        self._keep(change)
        for queue in self._subscribers:
            queue.put_nowait(change)

    def _keep(self, change: Change) -> None:
        self._history.append(change)
        self.bytes += change.size
        while len(self._history) > 1 and (len(self._history) > self.size or
                                           (self.max_bytes is not None and self.bytes > self.max_bytes)):
            dropped = self._history.popleft()
            self.bytes -= dropped.size
            self.compacted_rv = max(self.compacted_rv, dropped.rv)

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
