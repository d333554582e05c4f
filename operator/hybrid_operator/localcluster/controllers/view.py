"""What every controller shares: the object API, the index, and the moves they all make.

Controllers write through :class:`~..semantics.crud.ObjectApi` as the field
manager ``hybrid-cluster-controller``, like any client, and read through the
store's shared objects and :class:`~.index.ObjectIndex`.  A write that fails
with 404 or 409 lost a race with another writer and is dropped (the change
that follows brings the controller back); any other failure is logged, and
the controllers carry on with the next change.
"""

from __future__ import annotations

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
    """The object API and the index, as the controllers see them."""

    def __init__(self, api: ObjectApi) -> None:
        self.api = api
        self.index = ObjectIndex()

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
