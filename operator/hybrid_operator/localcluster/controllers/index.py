"""The indexes the controllers keep from the change feed, so no reaction ever scans the store.

kube-controller-manager's informers keep the same: owner uid -> dependents
(the garbage collector's graph), uid -> where an object lives, namespace ->
its objects (namespace termination), and, per namespace, the ReplicaSets no
Deployment controls (adoption candidates).  Every reaction is then
O(what it touches).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.resources import REPLICASETS_KEY

Key = tuple[str, str, str]  # storage key, namespace, name


class ObjectIndex:
    """Stored objects by uid, by owner uid and by namespace."""

    def __init__(self) -> None:
        self._dependents: dict[str, set[Key]] = defaultdict(set)
        self._uids: dict[str, Key] = {}
        self._namespaced: dict[str, set[Key]] = defaultdict(set)
        self._unowned_replica_sets: dict[str, set[Key]] = defaultdict(set)

    def update(self, skey: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Follow one change: ``old`` leaves the indexes, ``new`` enters them."""
        if old is not None:
            self._remove(skey, old)
        if new is not None:
            self._add(skey, new)

    def _add(self, skey: str, obj: dict[str, Any]) -> None:
        key = _key(skey, obj)
        self._uids[objects.uid(obj)] = key
        self._namespaced[key[1]].add(key)
        if skey == REPLICASETS_KEY and not objects.controller_uid(obj):
            self._unowned_replica_sets[key[1]].add(key)
        for owner in {str(ref["uid"]) for ref in objects.owner_refs(obj)}:
            self._dependents[owner].add(key)

    def _remove(self, skey: str, obj: dict[str, Any]) -> None:
        key, uid = _key(skey, obj), objects.uid(obj)
        if self._uids.get(uid) == key:
            del self._uids[uid]
        _discard(self._namespaced, key[1], key)
        _discard(self._unowned_replica_sets, key[1], key)
        for owner in {str(ref["uid"]) for ref in objects.owner_refs(obj)}:
            _discard(self._dependents, owner, key)

    def where(self, uid: str) -> Key | None:
        """Where the object with this uid lives, as last seen."""
        return self._uids.get(uid)

    def dependents(self, uid: str) -> list[Key]:
        """The objects naming ``uid`` among their ownerReferences, in key order."""
        return sorted(self._dependents.get(uid, ()))

    def missing_owners(self) -> list[str]:
        """Owner uids that dependents name but no stored object has."""
        return [uid for uid in self._dependents if uid not in self._uids]

    def in_namespace(self, namespace: str) -> list[Key]:
        return sorted(self._namespaced.get(namespace, ()))

    def unowned_replica_sets(self, namespace: str) -> list[Key]:
        return sorted(self._unowned_replica_sets.get(namespace, ()))


def _key(skey: str, obj: dict[str, Any]) -> Key:
    return skey, objects.namespace(obj), objects.name(obj)


def _discard(index: dict[str, set[Key]], bucket: str, key: Key) -> None:
    members = index.get(bucket)
    if members is not None:
        members.discard(key)
        if not members:
            del index[bucket]
