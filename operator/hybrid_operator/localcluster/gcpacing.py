"""Short full garbage collections for a server whose heap is almost all long-lived objects.

Why this module exists: the embedded cluster keeps every stored object, its watch history and its
indexes as Python containers. With 10,000 ConfigMaps stored, a full (generation 2) collection
examines millions of them and holds the event loop for 150-250 ms on a 2-core machine, and every
request and watch delivery in flight waits that long (issue 15: watch delivery p99). Almost all of
those containers live until their object is replaced, and a replaced object is freed by reference
counting (stored objects are JSON trees, without cycles). So, after each full collection, the
survivors are frozen (:func:`gc.freeze`): later full collections examine only what was made since,
and their pause follows recent allocation instead of the size of the store.

A frozen container that later becomes part of a garbage cycle is not freed while frozen. To keep
that bounded, once every ``thaw_seconds`` the frozen set is released (:func:`gc.unfreeze`), so the
next full collection examines, and frees, everything again: one long pause every ten minutes
instead of one every few thousand writes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

#: the oldest generation: a collection of it is a full collection
OLDEST = 2
#: how often the frozen survivors are released so that a full collection examines them again
THAW_SECONDS = 600.0


class FullCollectionPacing:
    """Freezes the survivors of each full collection; thaws them every ``thaw_seconds``.

    Install it once per process (the server does, when it starts) and uninstall it when done; it
    keeps counts for tests and logs.
    """

    def __init__(self, thaw_seconds: float = THAW_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.thaw_seconds = thaw_seconds
        self._clock = clock
        self._thawed = clock()
        self.freezes = 0
        self.thaws = 0

    def install(self) -> None:
        if self._after_collection not in gc.callbacks:
            gc.callbacks.append(self._after_collection)

    def uninstall(self) -> None:
        """Stop pacing and give every frozen container back to the collector."""
        if self._after_collection in gc.callbacks:
            gc.callbacks.remove(self._after_collection)
        gc.unfreeze()

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != OLDEST:
            return
        now = self._clock()
        if now - self._thawed >= self.thaw_seconds:
            gc.unfreeze()
            self._thawed = now
            self.thaws += 1
        else:
            gc.freeze()
            self.freezes += 1
