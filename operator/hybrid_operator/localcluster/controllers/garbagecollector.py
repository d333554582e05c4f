"""Garbage collection by ownerReferences, as kube-controller-manager's garbage collector does it.

A dependent whose owners are all gone is deleted (in the background, or in
the foreground when an owner waits for it); a dependent that still has a
live owner only loses its references to the dead ones.  Deleting an owner
with ``propagationPolicy=Orphan`` strips its uid from the dependents, then
removes the ``orphan`` finalizer; with ``Foreground`` it deletes them and
removes ``foregroundDeletion`` once no dependent with ``blockOwnerDeletion``
is left.  A namespaced owner must live in its dependent's namespace; an
ownership cycle in foreground deletion is broken by unblocking.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.view import ClusterView, as_manager
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics.deletion import FOREGROUND, ORPHAN
from hybrid_operator.localcluster.storage.changes import Change

SOLID, WAITING, DANGLING = "solid", "waiting", "dangling"


class GarbageCollector:
    """Deletes dependents whose owners are gone, and finishes orphan and foreground deletions."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def collect(self, uid: str) -> None:
        """Background GC: an owner is gone, so are dependents owned only by gone owners."""
        for key in self.view.index.dependents(uid):
            self.attempt_delete(key)

    def attempt_delete(self, key: Key) -> None:
        """Delete a dependent that has no solid owner left; drop dead references from one that has."""
        current = self.view.peek(key)
        if current is None or objects.deleting(current):
            return
        refs = objects.owner_refs(current)
        if not refs:
            return
        states = {str(ref["uid"]): self._owner_state(ref, key[1]) for ref in refs}
        if SOLID in states.values():
            stale = {uid for uid, state in states.items() if state != SOLID}
            if stale:
                self._strip_owners(key, stale)
            return
        self._delete_dependent(key, current, owner_waits=WAITING in states.values())

    def _delete_dependent(self, key: Key, current: dict[str, Any], owner_waits: bool) -> None:
        """A dependent whose owners are gone goes in the foreground when an owner waits for it and it has
        dependents of its own, else in the background."""
        dependents = self._dependent_objects(objects.uid(current)) if owner_waits else []
        if not dependents:
            self.view.delete(key, "Background")
            return
        if any(_foreground_deleting(dep) for dep in dependents):
            self._unblock(key)  # an ownership cycle: let the owner go first
        self.view.delete(key, "Foreground")

    def finalize(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """An owner being deleted with the ``orphan`` or ``foregroundDeletion`` finalizer."""
        finalizers = objects.finalizers(obj)
        if ORPHAN in finalizers:
            self._orphan(info, obj)
        elif FOREGROUND in finalizers:
            self._foreground(info, obj)

    def wake_owners(self, change: Change) -> None:
        """A dependent changed or went: its foreground-deleting owners may now be done."""
        uids: set[str] = set()
        for obj in (change.old, change.obj):
            if obj is not None:
                uids.update(str(ref["uid"]) for ref in objects.owner_refs(obj))
        for uid in sorted(uids):
            owner = self.view.live(uid)
            key = self.view.index.where(uid)
            info = self.view.info(key[0]) if key is not None else None
            if owner is not None and info is not None and _foreground_deleting(owner):
                self._foreground(info, owner)

    def _owner_state(self, ref: dict[str, Any], namespace: str) -> str:
        """solid (keeps the dependent), waiting (foreground-deleting) or dangling (absent)."""
        owner = self.view.live(str(ref["uid"]))
        if owner is None:
            return DANGLING
        owner_namespace = objects.namespace(owner)
        if owner_namespace and owner_namespace != namespace:
            return DANGLING  # a namespaced owner must live in the dependent's namespace
        if _foreground_deleting(owner):
            return WAITING
        return SOLID

    def _dependent_objects(self, uid: str) -> list[dict[str, Any]]:
        found = (self.view.peek(key) for key in self.view.index.dependents(uid))
        return [obj for obj in found if obj is not None]

    def _orphan(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        uid = objects.uid(obj)
        for key in self.view.index.dependents(uid):
            self._strip_owners(key, {uid})
        self._remove_finalizer(info, obj, ORPHAN)

    def _foreground(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """Delete the dependents; drop ``foregroundDeletion`` once no blocking one is left."""
        uid = objects.uid(obj)
        for key in self.view.index.dependents(uid):
            self.attempt_delete(key)
        if not any(_blocks(dep, uid) for dep in self._dependent_objects(uid)):
            self._remove_finalizer(info, obj, FOREGROUND)

    def _strip_owners(self, key: Key, uids: set[str]) -> None:
        def strip(current: dict[str, Any]) -> None:
            refs = [r for r in current["metadata"].get("ownerReferences") or [] if str(r.get("uid")) not in uids]
            if refs:
                current["metadata"]["ownerReferences"] = refs
            else:
                current["metadata"].pop("ownerReferences", None)

        self.view.update(key, strip)

    def _unblock(self, key: Key) -> None:
        def unblock(current: dict[str, Any]) -> None:
            for ref in objects.owner_refs(current):
                if ref.get("blockOwnerDeletion") is True:
                    ref["blockOwnerDeletion"] = False

        self.view.update(key, unblock)

    def _remove_finalizer(self, info: ResourceInfo, obj: dict[str, Any], finalizer: str) -> None:
        namespace, name = objects.namespace(obj), objects.name(obj)
        fresh = self.view.api.store.get(info.storage_key, namespace, name)
        if fresh is None or objects.uid(fresh) != objects.uid(obj) or finalizer not in objects.finalizers(fresh):
            return
        fresh["metadata"]["finalizers"] = [f for f in objects.finalizers(fresh) if f != finalizer]
        self.view.api.update(info, namespace, name, fresh, as_manager())


def _foreground_deleting(obj: dict[str, Any]) -> bool:
    return objects.deleting(obj) and FOREGROUND in objects.finalizers(obj)


def _blocks(dependent: dict[str, Any], uid: str) -> bool:
    """Whether ``dependent`` holds back its owner ``uid``'s foreground deletion."""
    return any(str(ref["uid"]) == uid and ref.get("blockOwnerDeletion") is True
               for ref in objects.owner_refs(dependent))

