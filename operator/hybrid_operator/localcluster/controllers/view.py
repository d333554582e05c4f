"""What every controller shares: the object API, the index, and the moves they all make.

Controllers write through :class:`~..semantics.crud.ObjectApi` as the field
manager ``hybrid-cluster-controller``, like any client, and read through the
store's shared objects and :class:`~.index.ObjectIndex`.  A write that fails
with 404 or 409 lost a race with another writer and is dropped (the change
that follows brings the controller back); any other failure is logged, and
the controllers carry on with the next change.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import errors, objects
from hybrid_operator.localcluster.controllers.index import Key, ObjectIndex
from hybrid_operator.localcluster.resources import NAMESPACES_KEY, ResourceInfo
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions

log = logging.getLogger(__name__)

MANAGER = "hybrid-cluster-controller"


def safely(func: Callable[..., Any], *args: Any) -> None:
    """Run one step of a reaction; a failure is logged (404 and 409 quietly dropped), never raised."""
    try:
        func(*args)
    except errors.ApiError as exc:
        if exc.code not in (404, 409):
            log.warning("controller write failed", extra={"reason": exc.reason, "error": exc.message})
    except Exception:
        log.exception("controller failed")


def as_manager(policy: str | None = None) -> WriteOptions:
    """The options of a controller's write."""
    return WriteOptions(field_manager=MANAGER, propagation_policy=policy)


class ClusterView:
    """The object API and the index, as the controllers see them.

    Besides reading and writing, a controller can ask for work *soon* (once
    the change feed is drained, so the index has caught up with every write:
    many changes to one owner's Pods then cost one sync of the owner) or
    *later* (after a delay: a Pod's short run, a CronJob's next minute, a
    Lease's renewal).  :attr:`settle` is what runs that work: the controller
    manager sets it to drain its change queue first, then :meth:`flush`.
    """

    def __init__(self, api: ObjectApi) -> None:
        self.api = api
        self.index = ObjectIndex()
        self.pending: dict[tuple[str, Key], Callable[[], None]] = {}
        self.settle: Callable[[], None] = self.flush
        self._timers: set[asyncio.TimerHandle] = set()

    def soon(self, what: str, key: Key, func: Callable[..., Any], *args: Any) -> None:
        """Run ``func(*args)`` once the current changes are handled; one run per ``(what, key)``."""
        self.pending.pop((what, key), None)  # re-queued at the end: keeps causes before effects
        self.pending[(what, key)] = lambda: safely(func, *args)

    def flush(self) -> None:
        """Run the work asked for with :meth:`soon` so far (what that asks for waits for the next flush)."""
        batch, self.pending = self.pending, {}
        for work in batch.values():
            work()

    def later(self, delay: float, func: Callable[..., Any], *args: Any) -> None:
        """Run ``func(*args)`` after ``delay`` seconds (dropped when the controllers stop)."""
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            safely(func, *args)
            self.settle()

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers.add(handle)

    def cancel_timers(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    def info(self, skey: str) -> ResourceInfo | None:
        """One resource that serves the storage key (its first served version)."""
        versions = self.api.registry.versions_of(skey)
        return versions[0] if versions else None

    def peek(self, key: Key) -> dict[str, Any] | None:
        """The stored object (shared, read-only), or None."""
        return self.api.store.peek(*key)

    def live(self, uid: str) -> dict[str, Any] | None:
        """The stored object with this uid (shared, read-only), or None."""
        key = self.index.where(uid)
        obj = self.peek(key) if key is not None else None
        return obj if obj is not None and objects.uid(obj) == uid else None

    def terminating(self, namespace: str) -> bool:
        """Whether the namespace is being deleted (nothing new may live in it)."""
        ns = self.api.store.peek(NAMESPACES_KEY, "", namespace)
        return ns is not None and objects.deleting(ns)

    def delete(self, key: Key, policy: str = "Background") -> None:
        """Delete the object at ``key`` unless it is gone or already being deleted."""
        info = self.info(key[0])
        current = self.peek(key)
        if info is None or current is None or objects.deleting(current):
            return
        safely(self.api.delete, info, key[1], key[2], as_manager(policy))

    def update(self, key: Key, change: Callable[[dict[str, Any]], None]) -> None:
        """Write back a private copy of the object at ``key`` after ``change`` edited it."""
        info = self.info(key[0])
        current = self.api.store.get(*key)
        if info is None or current is None:
            return
        change(current)
        safely(self.api.update, info, key[1], key[2], current, as_manager())

    def create(self, skey: str, namespace: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Create an object of the kind stored at ``skey``; the stored object, or None when that failed."""
        info = self.info(skey)
        if info is None or (namespace and self.terminating(namespace)):
            return None
        try:
            created = self.api.create(info, namespace, body, as_manager()).obj
        except errors.ApiError as exc:
            if exc.code not in (404, 409, 403):
                log.warning("controller create failed", extra={"reason": exc.reason, "error": exc.message})
            return None
        return self.peek((skey, namespace, objects.name(created)))

    def set_status(self, key: Key, status: dict[str, Any]) -> None:
        """Write ``status`` as the object's status, unless it already is."""
        info = self.info(key[0])
        current = self.peek(key)
        if info is None or current is None or current.get("status") == status:
            return
        updated = copy.deepcopy(current)
        updated["status"] = status
        subresource = "status" if "status" in info.subresources else ""
        safely(self.api.update, info, key[1], key[2], updated, as_manager(), subresource)

    def owned(self, skey: str, uid: str) -> list[dict[str, Any]]:
        """The live objects of kind ``skey`` whose controller is ``uid`` (being deleted or not)."""
        found = (self.peek(key) for key in self.index.dependents(uid) if key[0] == skey)
        return [obj for obj in found if obj is not None and objects.controller_uid(obj) == uid]
