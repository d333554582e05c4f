"""One shape for the embedded cluster's housekeeping: a step repeated on a timer while the server runs.

Why this module exists: the server repeats small jobs in the background (freezing the heap, copying
SQLite's write-ahead log into the database file). Each needs the same lifecycle -- start with the
server, tick at a fixed interval, survive a failing step, and on stop finish the step in flight before
the server closes what the step uses -- and that lifecycle is written here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    """``step`` now and then every ``interval`` seconds on the running loop, until :meth:`stop`.

    With ``in_thread`` the step runs in a worker thread (for blocking I/O). A step raising one of
    ``failures`` is logged and the next tick comes as usual; anything else ends the task loudly.
    """

    def __init__(self, name: str, step: Callable[[], object], interval: float, *, in_thread: bool = False,
                 failures: tuple[type[Exception], ...] = ()) -> None:
        self.name = name
        self.step = step
        self.interval = interval
        self.in_thread = in_thread
        self.failures = failures
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Stop ticking; returns once the step in flight, if any, has finished."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping.set()
            await task

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.in_thread:
                    await asyncio.to_thread(self.step)
                else:
                    self.step()
            except self.failures as exc:
                log.warning("periodic step failed", extra={"task": self.name, "error": str(exc)})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)
