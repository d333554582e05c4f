"""The reconcile contract between controllers and the Ansible and Helm reconcilers.

As in controller-runtime: a reconcile gets only a namespace and a name, reads the object as it is
now, and answers with an :class:`Outcome` saying when to look again. :class:`RunCancel` is how the
process cancels the automation in progress at the end of a graceful shutdown; :class:`OwnWrites` is
how a reconciler tells the controllers which watch events are its own writes (they trigger nothing).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hybrid_operator.config import bounds


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


WriteKey = tuple[str, str, str, str, str]  # group, kind, namespace, name, resourceVersion


def write_key(obj: Mapping[str, Any]) -> WriteKey | None:
    """What identifies one state of an object: its group, kind, namespace, name and resourceVersion."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("resourceVersion"):
        return None
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return (group, str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
            str(meta["resourceVersion"]))


class OwnWrites:
    """The object states the operator itself wrote (status, finalizers, its bookkeeping objects).

    A watch event carrying one of these states is the echo of our own write: it must not start a
    reconcile, whatever the kind (an object without a generation -- a Secret watched as a primary --
    otherwise reconciles on every write, the operator's own included). Remembers the last ``limit``
    writes; forgetting one only costs one reconcile.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._keys: OrderedDict[WriteKey, None] = OrderedDict()

    def record(self, obj: Mapping[str, Any] | None) -> None:
        """Remember the state a write of ours produced (the object the API answered with)."""
        key = write_key(obj) if obj is not None else None
        if key is None:
            return
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self._limit:
            self._keys.popitem(last=False)

    def is_own(self, obj: Mapping[str, Any]) -> bool:
        """True when ``obj`` (a watch event's object) is a state one of our writes produced."""
        key = write_key(obj)
        return key is not None and key in self._keys


class EventPoster(Protocol):
    """What :class:`OutOfRange` needs of the cluster client."""

    def post_event(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> None: ...


class OutOfRange:
    """Tells a resource's author that its annotations asked for values out of range (config.bounds).

    One Warning Event per resource and per set of such values: a resync with the same annotations says
    nothing again (the event would otherwise be posted on every reconcile). Remembers ``limit`` resources.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._told: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()

    async def tell(self, cluster: EventPoster, obj: dict[str, Any], notes: tuple[str, ...]) -> None:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not notes:
            self._told.pop(key, None)
            return
        if self._told.get(key) == notes:
            return
        self._told[key] = notes
        self._told.move_to_end(key)
        while len(self._told) > self._limit:
            self._told.popitem(last=False)
        await asyncio.to_thread(cluster.post_event, obj, "Warning", bounds.EVENT_REASON, "; ".join(notes))
