"""Event aggregation, as client-go's ``EventCorrelator`` does it: a repeated Event is counted, not copied.

Why this module exists: every reconcile posts an Event ("run succeeded", a failure, a drift repair),
and a new Event object per post grows etcd by one object per reconcile forever (issue 13 item 5:
1,320 Events after an 18-minute soak). client-go's recorder instead:

* **deduplicates** (its ``EventLogger``): an Event with the same source, involved object, type,
  reason and message as one already posted updates that one -- ``count`` + 1, a new
  ``lastTimestamp`` -- with a PATCH, instead of creating a new object;
* **aggregates** (its ``EventAggregator``): once :data:`SIMILAR_EVENTS` Events of the same
  source, object, type and reason but *different* messages were seen within
  :data:`SIMILAR_WINDOW` seconds, the next ones are posted as one Event whose message reads
  ``(combined from similar events): <latest message>``, itself deduplicated;
* remembers the last :data:`MAX_ENTRIES` Events (an LRU cache), and creates a new Event when the
  remembered one is gone (expired by the API server's Event TTL, deleted).

:class:`EventCorrelator` is the bookkeeping only (thread-safe, no I/O);
:meth:`hybrid_operator.kube.client.ClusterClient.post_event` does the POST or the PATCH it says.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_ENTRIES = 4096
SIMILAR_EVENTS = 10
SIMILAR_WINDOW = 600.0
COMBINED_PREFIX = "(combined from similar events): "

Key = tuple[str, ...]


@dataclass
class Posted:
    """An Event object already in the API: where it is and how often it was counted."""

    namespace: str
    name: str
    count: int
    first_timestamp: str


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


def _object_key(event: dict[str, Any]) -> Key:
    """What client-go's ``getSpamKey``/aggregate key are built from: source, object, type, reason."""
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    return (str(source.get("component") or ""), str(source.get("host") or ""),
            str(involved.get("apiVersion") or ""), str(involved.get("kind") or ""),
            str(involved.get("namespace") or ""), str(involved.get("name") or ""), str(involved.get("uid") or ""),
            str(event.get("type") or ""), str(event.get("reason") or ""))


class EventCorrelator:
    """Decides whether an Event is new, a repeat of a posted one, or one of many similar ones."""

    def __init__(self, max_entries: int = MAX_ENTRIES, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._posted: collections.OrderedDict[Key, Posted] = collections.OrderedDict()
        self._similar: collections.OrderedDict[Key, _Similar] = collections.OrderedDict()
        self._lock = threading.Lock()

    def correlate(self, event: dict[str, Any]) -> tuple[Key, Posted | None]:
        """The dedup key of ``event`` (its message possibly replaced by the aggregate one, in place)
        and the posted Event it repeats, if any."""
        aggregate = _object_key(event)
        message = str(event.get("message") or "")
        now = self.clock()
        with self._lock:
            similar = self._similar.pop(aggregate, None)
            if similar is None or now - similar.last > SIMILAR_WINDOW:
                similar = _Similar()
            similar.messages.add(message)
            similar.last = now
            self._remember(self._similar, aggregate, similar)
            if len(similar.messages) >= SIMILAR_EVENTS:
                event["message"] = (COMBINED_PREFIX + message)[:1024]
                key = aggregate
            else:
                key = (*aggregate, message)
            posted = self._posted.get(key)
            if posted is not None:
                self._posted.move_to_end(key)
            return key, posted

    def posted(self, key: Key, posted: Posted) -> None:
        """``posted`` is now the Event for ``key`` (created, or counted once more)."""
        with self._lock:
            self._remember(self._posted, key, posted)

    def forget(self, key: Key) -> None:
        """The Event for ``key`` is gone from the API (the next one is created anew)."""
        with self._lock:
            self._posted.pop(key, None)

    def _remember(self, cache: collections.OrderedDict[Key, Any], key: Key, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.max_entries:
            cache.popitem(last=False)
