"""The reconcile contract between controllers and the Ansible and Helm reconcilers.

As in controller-runtime: a reconcile gets only a namespace and a name, reads the object as it is
now, and answers with an :class:`Outcome` saying when to look again. :class:`RunCancel` is how the
process cancels the automation in progress at the end of a graceful shutdown.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Outcome:
    """When to look at the object again."""

    requeue_after: float | None = None
    failed: bool = False
    retry_after: float | None = None


class RunCancel:
    """Cancels the automation in progress (graceful shutdown timeout): runners poll :meth:`is_set` from
    their threads, Helm reconciles await :meth:`wait`; ``reason`` ends up in the object's condition."""

    def __init__(self) -> None:
        self._flag = threading.Event()
        self._event = asyncio.Event()
        self.reason = ""

    def cancel(self, reason: str) -> None:
        """Cancel every run now and from now on (call from the event loop)."""
        self.reason = reason
        self._flag.set()
        self._event.set()

    def is_set(self) -> bool:
        return self._flag.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    def message(self) -> str:
        return f"the run was cancelled: {self.reason}"


class Reconciler(Protocol):
    """Reconciles one object of one watch, by key."""

    async def reconcile(self, namespace: str, name: str) -> Outcome: ...
