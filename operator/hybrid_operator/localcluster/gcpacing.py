"""Short, planned garbage collections for a server whose heap is almost all long-lived objects.

Why this module exists: the embedded cluster keeps its watch history (every change with its object
and old copy), caches and indexes as Python containers. CPython examines all of them in each full
(generation 2) collection, which comes whenever a quarter more containers survived: with 10,000
ConfigMaps stored, every few thousand writes the event loop stops for 50-250 ms on a 2-core machine,
and every request and watch delivery in flight waits that long (issue 15: watch delivery p99).

Those containers are freed by reference counting when their object is replaced or their change
leaves the history (they are JSON trees: no cycles), so the cycle collector never needs to look at
them. :class:`HeapPacing` therefore freezes (:func:`gc.freeze`) everything alive once a second:
automatic collections then examine only what was made in the last second, and stay short.

A container frozen while alive that later becomes part of a garbage *cycle* is not freed while
frozen (a few hundred objects in a 10,000-write run here). To keep that bounded, every
``thaw_seconds`` (ten minutes) everything is thawed and one full collection runs, at a moment the
server chose, and the survivors are frozen again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from hybrid_operator.localcluster.periodic import Periodic

#: how often everything alive is frozen
FREEZE_SECONDS = 1.0
#: how often everything is thawed and examined by one full collection
THAW_SECONDS = 600.0


class HeapPacing:
    """Freezes the heap every ``freeze_seconds``; thaws it and collects it fully every ``thaw_seconds``."""

    def __init__(self, freeze_seconds: float = FREEZE_SECONDS, thaw_seconds: float = THAW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.freeze_seconds = freeze_seconds
        self.thaw_seconds = thaw_seconds
        self._clock = clock
        self._thawed = clock()
        self.freezes = 0
        self.full_collections = 0

    def step(self) -> None:
        """Freeze what is alive now; first thaw and collect everything when ``thaw_seconds`` have passed."""
        now = self._clock()
        if now - self._thawed >= self.thaw_seconds:
            gc.unfreeze()
            gc.collect()
            self._thawed = now
            self.full_collections += 1
        gc.freeze()
        self.freezes += 1


class PacingTask:
    """:class:`HeapPacing` stepped by a :class:`Periodic` of the running loop; everything is thawed when it stops."""

    def __init__(self, pacing: HeapPacing | None = None) -> None:
        self.pacing = pacing or HeapPacing()
        self._ticker = Periodic("heap-pacing", self.pacing.step, self.pacing.freeze_seconds)

    def start(self) -> None:
        self._ticker.start()

    async def stop(self) -> None:
        await self._ticker.stop()
        gc.unfreeze()
