"""The indexes the controllers keep from the change feed, so no reaction ever scans the store.

kube-controller-manager's informers keep the same: owner uid -> dependents
(the garbage collector's graph), uid -> where an object lives, namespace ->
its objects (namespace termination), per namespace the ReplicaSets no
Deployment controls (adoption candidates), the objects of the few kinds the
simulated node's controllers look up by namespace (Pods, Services,
PersistentVolumeClaims, ...), and which Pods use which claim.  Every reaction
is then O(what it touches).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.resources import (
    CRONJOBS_KEY,
    NODES_KEY,
    PERSISTENTVOLUMECLAIMS_KEY,
    PERSISTENTVOLUMES_KEY,
    PODS_KEY,
    REPLICASETS_KEY,
    SERVICES_KEY,
    STORAGECLASSES_KEY,
)
from hybrid_operator.localcluster.simnode.podstatus import claim_names

Key = tuple[str, str, str]  # storage key, namespace, name

# Kinds whose objects are also indexed by namespace on their own.
BY_KIND = frozenset({PODS_KEY, SERVICES_KEY, PERSISTENTVOLUMECLAIMS_KEY, PERSISTENTVOLUMES_KEY,
                     STORAGECLASSES_KEY, CRONJOBS_KEY, NODES_KEY})


class ObjectIndex:
    """Stored objects by uid, by owner uid and by namespace."""

    def __init__(self) -> None:
        self._dependents: dict[str, set[Key]] = defaultdict(set)
        self._uids: dict[str, Key] = {}
        self._namespaced: dict[str, set[Key]] = defaultdict(set)
        self._unowned_replica_sets: dict[str, set[Key]] = defaultdict(set)
        self._kinds: dict[str, dict[str, set[Key]]] = {skey: defaultdict(set) for skey in BY_KIND}
        self._claim_users: dict[str, set[Key]] = defaultdict(set)

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
        if skey in BY_KIND:
            self._kinds[skey][key[1]].add(key)
            if skey == PODS_KEY:
                for claim in claim_names(obj):
                    self._claim_users[f"{key[1]}/{claim}"].add(key)

    def _remove(self, skey: str, obj: dict[str, Any]) -> None:
        key, uid = _key(skey, obj), objects.uid(obj)
        if self._uids.get(uid) == key:
            del self._uids[uid]
        _discard(self._namespaced, key[1], key)
        _discard(self._unowned_replica_sets, key[1], key)
        for owner in {str(ref["uid"]) for ref in objects.owner_refs(obj)}:
            _discard(self._dependents, owner, key)
        if skey in BY_KIND:
            _discard(self._kinds[skey], key[1], key)
            if skey == PODS_KEY:
                for claim in claim_names(obj):
                    _discard(self._claim_users, f"{key[1]}/{claim}", key)

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

    def of_kind(self, skey: str, namespace: str | None = None) -> list[Key]:
        """The objects of one of the :data:`BY_KIND` kinds, in one namespace or in all, in key order."""
        buckets = self._kinds[skey]
        if namespace is not None:
            return sorted(buckets.get(namespace, ()))
        return sorted(key for keys in buckets.values() for key in keys)

    def claim_users(self, namespace: str, claim: str) -> list[Key]:
        """The Pods whose volumes name the claim ``namespace/claim``."""
        return sorted(self._claim_users.get(f"{namespace}/{claim}", ()))


def _key(skey: str, obj: dict[str, Any]) -> Key:
    return skey, objects.namespace(obj), objects.name(obj)


def _discard(index: dict[str, set[Key]], bucket: str, key: Key) -> None:
    members = index.get(bucket)
    if members is not None:
        members.discard(key)
        if not members:
            del index[bucket]
