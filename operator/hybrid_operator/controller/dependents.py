"""Dependent watches: a change to something an operator created brings its owner back.

For every child kind an owner kind is known to have (from the ownership proxy
for Ansible runs, from the release manifest for Helm, and persisted in a
ConfigMap of the operator's own -- :class:`KnownKinds`, never on the users'
objects -- so they come back at once after a restart), one watch per child kind
follows that kind cluster-wide (or in the watched namespaces).  Each event is
mapped to its owners — through ``ownerReferences`` or the SDK's
``operator-sdk/primary-resource*`` annotations — and passed through the SDK's
DependentPredicate: creations are ignored, updates count only when something
other than status, resourceVersion or managedFields changed, deletions always
count.  The owner's key is then enqueued: level-triggered, the reconcile reads
everything afresh.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import errors
from hybrid_operator.config.model import GroupVersionKind
from hybrid_operator.controller.reconcile import OwnWrites
from hybrid_operator.kube import informer, objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

#: The annotation earlier versions wrote on each owner (its child kinds). Not written any more: the
#: operator's bookkeeping lives in its own ConfigMap (:class:`KnownKinds`); event filters ignore it.
DEPENDENT_KINDS_ANNOTATION = "hybrid-operator.dev/dependent-kinds"
#: the SDK's link from a child to an owner it cannot reference (cluster-scoped or in another namespace)
PRIMARY_RESOURCE = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE = "operator-sdk/primary-resource-type"

OwnerKind = tuple[str, str]  # (group, kind) of an owner
Enqueue = Callable[[OwnerKind, str, str], None]  # owner kind, namespace, name


#: A watched dependent kind.
ChildKind = GroupVersionKind


def kind_text(kind: ChildKind) -> str:
    """``group/version/Kind`` (the core group is empty: ``/v1/Service``), as kept in the annotation."""
    return f"{kind.group}/{kind.version}/{kind.kind}"


def parse_kind(text: str) -> ChildKind | None:
    parts = text.strip().split("/")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return None
    return ChildKind(parts[0], parts[1], parts[2])


def parse_kinds(annotation: str | None) -> set[ChildKind]:
    found = set()
    for part in (annotation or "").split(","):
        kind = parse_kind(part)
        if kind is not None:
            found.add(kind)
    return found


def format_kinds(kinds: set[ChildKind]) -> str:
    return ",".join(sorted(kind_text(kind) for kind in kinds))


def essence(obj: dict[str, Any]) -> str:
    """What the DependentPredicate compares: everything but status, resourceVersion and managedFields."""
    meta = {k: v for k, v in objects.meta(obj).items()
            if k not in ("resourceVersion", "managedFields", "generation")}
    rest = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    rest["metadata"] = meta
    return hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()


HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"


class ReleaseOwners:
    """Which Helm kind made each release (namespace, release name), as its reconciler found out.

    Two Helm kinds may each have a resource named like one release; only the kind whose chart made
    it may be brought back by its objects (the other one's resource merely reports the collision).
    A release nobody claimed yet maps to no kind: every resource is reconciled once at startup, and
    its reconciler records the release before the dependent watches matter.
    """

    def __init__(self) -> None:
        self._owners: dict[tuple[str, str], OwnerKind] = {}

    def record(self, namespace: str, release: str, owner: OwnerKind) -> None:
        self._owners[(namespace, release)] = owner

    def forget(self, namespace: str, release: str, owner: OwnerKind) -> None:
        """``owner`` no longer has the release (uninstalled, or found to be someone else's)."""
        if self._owners.get((namespace, release)) == owner:
            del self._owners[(namespace, release)]

    def owner(self, namespace: str, release: str) -> OwnerKind | None:
        return self._owners.get((namespace, release))


def owners_of(obj: dict[str, Any], owner_kinds: set[OwnerKind], helm_kinds: Collection[OwnerKind] = (),
              releases: ReleaseOwners | None = None) -> list[tuple[OwnerKind, str, str]]:
    """The watched owners an object points at: (owner kind, namespace, name).

    Through ``ownerReferences``, the SDK's ``operator-sdk/primary-resource*`` annotations, and, for
    Helm kinds, the annotations helm puts on every object it applies (release name = resource name):
    with ``releases``, only to the kind that made the release; without, to every Helm kind.
    """
    meta = objects.meta(obj)
    found: list[tuple[OwnerKind, str, str]] = []
    helm_annotations = meta.get("annotations") or {}
    release = helm_annotations.get(HELM_RELEASE_NAME)
    if release:
        release_namespace = str(helm_annotations.get(HELM_RELEASE_NAMESPACE) or "")
        if releases is None:
            kinds = sorted(helm_kinds)
        else:
            made_by = releases.owner(release_namespace, str(release))
            kinds = [made_by] if made_by is not None and made_by in helm_kinds else []
        for owner_kind in kinds:
            found.append((owner_kind, release_namespace, str(release)))
    for ref in meta.get("ownerReferences") or []:
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        key = (group, str(ref.get("kind", "")))
        if key in owner_kinds:
            found.append((key, str(meta.get("namespace") or ""), str(ref.get("name", ""))))
    annotations = meta.get("annotations") or {}
    primary = annotations.get(PRIMARY_RESOURCE)
    primary_type = annotations.get(PRIMARY_RESOURCE_TYPE)
    if primary and primary_type:
        kind, _, group = str(primary_type).partition(".")
        namespace, _, name = str(primary).rpartition("/")
        if (group, kind) in owner_kinds:
            found.append(((group, kind), namespace, name))
    return found


@dataclass
class _Watch:
    """One dependent kind followed for the owner kinds that asked for it (an informer handler)."""

    child: ChildKind
    enqueue: Enqueue
    owners: set[OwnerKind] = field(default_factory=set)
    helm_owners: set[OwnerKind] = field(default_factory=set)
    releases: ReleaseOwners | None = None
    task: asyncio.Task[None] | None = None
    essences: dict[tuple[str, str], str] = field(default_factory=dict)
    #: the scopes ("" = every namespace) whose essences are complete: listed, and followed since
    synced_scopes: set[str] = field(default_factory=set)
    namespaced: bool = True

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        self.essences[objects.key(obj)] = essence(obj)

    def relisting(self, ref: ResourceRef, namespace: str) -> None:
        """A (re)list of ``namespace`` starts: what was known of it may be stale (deletions missed)."""
        self.namespaced = ref.namespaced
        self.synced_scopes.discard(namespace)
        for key in [k for k in self.essences if not namespace or k[0] == namespace]:
            del self.essences[key]

    def synced(self, ref: ResourceRef, namespace: str) -> None:
        self.synced_scopes.add(namespace)

    def interrupted(self) -> None:
        self.synced_scopes.clear()

    def seen(self, namespace: str, name: str) -> Seen:
        """What this watch knows of one object (see :meth:`DependentWatches.seen`)."""
        scope_known = "" in self.synced_scopes or (self.namespaced and namespace in self.synced_scopes)
        if not scope_known:
            return UNSEEN
        return Seen(True, self.essences.get((namespace if self.namespaced else "", name)))

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        """A change that is more than status or bookkeeping re-enqueues the child's owners."""
        key = objects.key(obj)
        current = essence(obj)
        previous = self.essences.get(key)
        if event_type == "DELETED":
            self.essences.pop(key, None)
        else:
            self.essences[key] = current
        if event_type == "ADDED" or (event_type == "MODIFIED" and previous == current):
            return
        for owner_kind, namespace, name in owners_of(obj, self.owners, self.helm_owners, self.releases):
            log.info("dependent changed", extra={"child": f"{self.child.kind}/{key[1]}", "event": event_type,
                                                 "owner": f"{owner_kind[1]}/{name}"})
            self.enqueue(owner_kind, namespace, name)


@dataclass(frozen=True)
class Seen:
    """What the dependent watches know of one object: ``known`` when its kind is followed in its
    namespace and listed since the last interruption; then ``essence`` is None when the object does
    not exist, else its :func:`essence` as last seen."""

    known: bool
    essence: str | None = None


UNSEEN = Seen(False)


class DependentWatches:
    """One watch per child kind; events re-enqueue the owners that asked for them."""

    def __init__(self, cluster: ClusterClient, enqueue: Enqueue, namespaces: tuple[str, ...] = (),
                 health: informer.Health | None = None) -> None:
        self.cluster = cluster
        self.enqueue = enqueue
        self.namespaces = namespaces
        self.health = health
        self._watches: dict[ChildKind, _Watch] = {}
        self._closed = False
        #: which Helm kind made each release (filled by the Helm reconcilers)
        self.releases = ReleaseOwners()

    def seen(self, child: ChildKind, namespace: str, name: str) -> Seen:
        """The object as the watch of its kind last saw it, without a request (helm's cheap resyncs).

        Not known (:data:`UNSEEN`) while the kind is not watched, not watched in that namespace, or
        not listed since the watch last failed: the caller then reads the object itself.
        """
        watch = self._watches.get(child)
        return UNSEEN if watch is None else watch.seen(namespace, name)

    def watched(self) -> dict[ChildKind, set[OwnerKind]]:
        return {kind: set(w.owners) for kind, w in self._watches.items()}

    def ensure(self, child: ChildKind, owner: OwnerKind, *, helm: bool = False) -> bool:
        """Watch ``child`` for ``owner``; True when this started a new watch."""
        if self._closed:
            return False
        existing = self._watches.get(child)
        if existing is not None:
            existing.owners.add(owner)
            if helm:
                existing.helm_owners.add(owner)
            return False
        watch = _Watch(child, self.enqueue, {owner}, {owner} if helm else set(), self.releases)
        self._watches[child] = watch
        watch.task = asyncio.get_running_loop().create_task(
            informer.follow(self.cluster, (child.group, child.version, child.kind), self.namespaces, watch,
                            what=f"dependents {kind_text(child)}", health=self.health))
        log.info("dependent watch started", extra={"child": kind_text(child), "owner": "/".join(owner)})
        return True

    async def close(self) -> None:
        self._closed = True
        for watch in self._watches.values():
            if watch.task is not None:
                watch.task.cancel()
        await asyncio.gather(*(w.task for w in self._watches.values() if w.task is not None),
                             return_exceptions=True)


FIELD_MANAGER = "hybrid-operator"


def owner_key(owner: OwnerKind) -> str:
    """The ConfigMap data key of an owner kind: ``<Kind>.<group>`` (``<Kind>`` for the core group)."""
    group, kind = owner
    return f"{kind}.{group}" if group else kind


class KnownKinds:
    """The child kinds of each owner kind, kept in a ConfigMap of the operator's own.

    One ConfigMap (``<leader election id>-dependents`` in the operator's namespace) whose data maps
    ``<Kind>.<group>`` of an owner kind to its child kinds, one ``group/version/Kind`` per line. It
    is read at start-up, so the dependent watches are back before any run (the SDK re-creates them
    lazily), and written when an owner kind gets a new child kind -- rarely. Nothing is written on
    the users' objects (a watched Secret, say), and the writes are recorded in ``own_writes``, so
    not even a watch of ConfigMaps is triggered by them. When the ConfigMap cannot be read or
    written (RBAC), the operator goes on without it (a warning): the watches then come back with
    the first run of each owner after a restart, as in the SDK.
    """

    def __init__(self, cluster: ClusterClient, namespace: str, name: str, own_writes: OwnWrites | None = None) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = name
        self.own_writes = own_writes if own_writes is not None else OwnWrites()
        self._kinds: dict[str, set[ChildKind]] = {}
        self._warned = False

    def load(self) -> dict[str, set[ChildKind]]:
        """Read the ConfigMap (blocking); owner key -> child kinds. Empty when absent or unreadable."""
        try:
            found = self.cluster.get(self._ref(), self.namespace, self.name)
        except errors.TemporaryError as exc:
            self._warn("read", exc)
            return {}
        data = (found or {}).get("data") or {}
        for key, value in data.items():
            kinds = {kind for line in str(value).splitlines() if (kind := parse_kind(line)) is not None}
            self._kinds.setdefault(str(key), set()).update(kinds)
        return {key: set(kinds) for key, kinds in self._kinds.items()}

    def add(self, owner: OwnerKind, kinds: set[ChildKind]) -> None:
        """Remember ``kinds`` for ``owner`` (blocking); writes only when something is new."""
        key = owner_key(owner)
        known = self._kinds.setdefault(key, set())
        if kinds <= known:
            return
        known |= kinds
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "hybrid-operator"}},
                "data": {entry: "\n".join(sorted(kind_text(kind) for kind in children))
                         for entry, children in sorted(self._kinds.items()) if children}}
        try:
            written, _ = self.cluster.apply(self._ref(), self.namespace, body, FIELD_MANAGER)
        except errors.TemporaryError as exc:
            self._warn("write", exc)
            return
        self.own_writes.record(written)

    def _ref(self) -> ResourceRef:
        return self.cluster.resolve("", "v1", "ConfigMap")

    def _warn(self, action: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            log.warning("dependent kinds not kept", extra={
                "configmap": f"{self.namespace}/{self.name}", "action": action, "error": str(exc),
                "effect": "after a restart, dependent watches come back with each owner's first run"})
