"""Cheap no-change resyncs of a Helm release: no render, no helm process, only the objects that drifted.

Why this module exists: a resync of a release whose inputs did not change used to cost three helm
processes (``get metadata``, a dry-run upgrade, ``get manifest``) and one server-side apply per
object, although nothing could come out of it but drift repair: with unchanged inputs the
reconciler never upgrades (:func:`hybrid_operator.helm.release.release_state`). Here such a resync
costs two reads and a look at the dependent watches' view of the objects:

1. The last full reconcile that ended in drift repair left a :class:`Verified` record (in memory):
   the revision, the uid of helm's storage object of that revision, the inputs label it carries, the
   deployed manifest (as the objects drift repair applies) and its NOTES, whether the render was
   nondeterministic, and for each object the :func:`~hybrid_operator.controller.dependents.essence`
   it had when it was last found or made in sync.
2. A resync may use it only when the chart cannot read the cluster while rendering
   (:mod:`hybrid_operator.helm.chartscan`), and when helm's own record in the cluster says the
   release is still exactly that: :func:`current` reads the storage object of the revision (its
   labels: ``status=deployed``, our owner label, ``hybrid-operator.dev/inputs`` equal to the digest
   of today's chart and values for that revision, same uid: not uninstalled and made again) and the
   one of the next revision (it must not exist: nothing newer, pending or failed). Anything else is
   a full reconcile, as is a restart (the record is rebuilt by the first full reconcile).
3. Each object is compared with the live one (:func:`plan`): the dependent watches already follow
   its kind, so an essence equal to the verified one costs nothing; a missing object is applied
   (created); a changed one is read and applied only when it lost something of the manifest
   (:func:`contains`). Objects of kinds not watched (``watchDependentResources: false``, another
   namespace) are read.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hybrid_operator import errors
from hybrid_operator.controller.dependents import UNSEEN, ChildKind, Seen, essence
from hybrid_operator.helm.chartscan import ChartScan
from hybrid_operator.helm.manifests import FIELD_MANAGER, child_kinds, manifest_objects, with_helm_ownership
from hybrid_operator.helm.ownership import OWNER_LABEL
from hybrid_operator.helm.release import INPUTS_LABEL, inputs_label
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

STORAGE_PREFIX = "sh.helm.release.v1."
#: ``$HELM_DRIVER`` values whose records this module can read, and the kind that holds them
_DRIVERS = {"": "Secret", "secret": "Secret", "secrets": "Secret", "configmap": "ConfigMap",
            "configmaps": "ConfigMap"}


class LiveView(Protocol):
    """What the dependent watches know of an object (:meth:`DependentWatches.seen`)."""

    def seen(self, child: ChildKind, namespace: str, name: str) -> Seen: ...


@dataclass
class Desired:
    """One object of the deployed manifest, as drift repair applies it."""

    kind: ChildKind
    namespace: str
    name: str
    body: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.kind.group, self.kind.kind, self.namespace, self.name


@dataclass
class Verified:
    """A deployed revision a full reconcile rendered again and found unchanged (see the module docstring)."""

    revision: int
    uid: str
    inputs: str
    manifest: str
    notes: str
    nondeterministic: bool
    desired: list[Desired]
    kinds: frozenset[ChildKind]
    #: per object (:attr:`Desired.key`): its essence when it was last found or made in sync
    essences: dict[tuple[str, str, str, str], str] = field(default_factory=dict)


def storage_kind(environ: Mapping[str, str] | None = None) -> str | None:
    """The kind of helm's release records under ``$HELM_DRIVER``; None for drivers outside the cluster."""
    driver = (os.environ if environ is None else environ).get("HELM_DRIVER", "").strip().lower()
    return _DRIVERS.get(driver)


def storage_name(release: str, revision: int) -> str:
    return f"{STORAGE_PREFIX}{release}.v{revision}"


async def current(cluster: ClusterClient, storage: ResourceRef, namespace: str, release: str, record: Verified,
                  inputs: str, owner: str) -> bool:
    """True when helm's record of the release in the cluster is still the verified revision (two reads)."""
    found, newer = await asyncio.gather(
        asyncio.to_thread(cluster.get, storage, namespace, storage_name(release, record.revision)),
        asyncio.to_thread(cluster.get, storage, namespace, storage_name(release, record.revision + 1)))
    if found is None or newer is not None:
        return False
    labels = objects.labels(found)
    return (objects.uid(found) == record.uid and labels.get("status") == "deployed"
            and labels.get("owner") == "helm" and labels.get(OWNER_LABEL) == owner
            and labels.get(INPUTS_LABEL) == inputs_label(inputs, record.revision) == record.inputs)


def desired_objects(manifest: str, release: str, namespace: str,
                    resolve: Mapping[ChildKind, ResourceRef]) -> list[Desired]:
    """The manifest's objects with helm's ownership marks, where drift repair applies them."""
    found = []
    for item in manifest_objects(manifest):
        group, version = objects.group_version(str(item.get("apiVersion") or ""))
        kind = ChildKind(group, version, str(item.get("kind") or ""))
        ref = resolve.get(kind)
        if ref is None:  # no kind: nothing helm could have applied
            continue
        meta = objects.meta(item)
        object_namespace = str(meta.get("namespace") or namespace) if ref.namespaced else ""
        body = with_helm_ownership(item, release, namespace)
        if ref.namespaced:
            body["metadata"]["namespace"] = object_namespace
        found.append(Desired(kind, object_namespace, str(meta.get("name") or ""), body))
    return found


def contains(desired: Any, live: Any) -> bool:
    """True when every field ``desired`` sets has that value in ``live`` (what an apply would change).

    Maps: each key of ``desired`` compared (a null or empty value matches an absent key); lists: the
    same length, item by item; numbers by value; anything else must be equal. ``status`` at the top
    is not compared (helm does not apply it). In doubt (a defaulted or normalised value) this says
    False, and the object is applied once more.
    """
    if isinstance(desired, dict):
        if live is None:
            return not any(v not in (None, {}, []) for v in desired.values())
        return isinstance(live, dict) and all(contains(v, live.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if live is None:
            return not desired
        return isinstance(live, list) and len(live) == len(desired) and \
            all(contains(d, v) for d, v in zip(desired, live, strict=True))
    if desired is None:
        return live is None
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return desired == live
    return bool(desired == live)


def in_sync(item: Desired, live: dict[str, Any]) -> bool:
    return contains({k: v for k, v in item.body.items() if k != "status"}, live)


@dataclass
class Plan:
    """What one cheap resync must do: the objects to apply, and to read first."""

    apply: list[Desired] = field(default_factory=list)
    read: list[Desired] = field(default_factory=list)


def plan(record: Verified, live: LiveView | None) -> Plan:
    """Sort the verified objects by what the dependent watches saw: unchanged ones need nothing."""
    todo = Plan()
    for item in record.desired:
        seen = live.seen(item.kind, item.namespace, item.name) if live is not None else UNSEEN
        if not seen.known:
            todo.read.append(item)
        elif seen.essence is None:
            todo.apply.append(item)
        elif seen.essence != record.essences.get(item.key):
            todo.read.append(item)
    return todo


def settle_read(record: Verified, item: Desired, found: dict[str, Any] | None) -> bool:
    """Decide about an object read from the API: True when it must be applied (missing or changed)."""
    if found is None:
        return True
    current_essence = essence(found)
    if current_essence == record.essences.get(item.key) or in_sync(item, found):
        record.essences[item.key] = current_essence
        return False
    return True


@dataclass(frozen=True)
class Repaired:
    """A cheap resync done: the verified revision, and the objects it had to create."""

    record: Verified
    created: list[str]


class Resyncer:
    """The :class:`Verified` records of one Helm kind's releases, and the cheap resyncs they allow."""

    def __init__(self, cluster: ClusterClient, scan: ChartScan, owner: str, storage: str | None) -> None:
        self.cluster = cluster
        self.scan = scan
        self.owner = owner
        #: the kind of helm's release records (None: a driver outside the cluster, never cheap)
        self.storage = storage
        #: the dependent watches (None: every object is read)
        self.live: LiveView | None = None
        self._records: dict[tuple[str, str], Verified] = {}

    def forget(self, namespace: str, release: str) -> None:
        self._records.pop((namespace, release), None)

    async def resync(self, namespace: str, release: str, values: Mapping[str, Any], inputs: str) -> Repaired | None:
        """Repair drift of the verified revision without helm; None when a full reconcile is needed.

        Raises :class:`errors.TemporaryError` when an object cannot be read or applied.
        """
        record = self._records.get((namespace, release))
        if record is None or self.storage is None:
            return None
        if self.scan.renders_live(values):
            self.forget(namespace, release)
            return None
        try:
            storage = await asyncio.to_thread(self.cluster.resolve, "", "v1", self.storage)
            still = await current(self.cluster, storage, namespace, release, record, inputs, self.owner)
        except errors.TemporaryError as exc:
            log.info("release record not read, full resync", extra={"namespace": namespace, "cr": release,
                                                                     "error": str(exc)})
            return None
        if not still:
            self.forget(namespace, release)
            return None
        todo = plan(record, self.live)
        found = await asyncio.gather(*(self._get(item) for item in todo.read))
        todo.apply += [item for item, obj in zip(todo.read, found, strict=True) if settle_read(record, item, obj)]
        created = []
        for item in todo.apply:
            if await self.apply(record, item):
                created.append(f"{item.kind.kind} {item.name}")
        return Repaired(record, created)

    async def remember(self, namespace: str, release: str, revision: int, inputs: str, manifest: str, notes: str,
                       nondeterministic: bool, applied: list[tuple[Desired, dict[str, Any]]]) -> None:
        """Keep what a full drift repair of ``revision`` found, if helm's record says it is ours and current."""
        if self.storage is None or self.scan.lookup:
            return
        try:
            storage = await asyncio.to_thread(self.cluster.resolve, "", "v1", self.storage)
            found = await asyncio.to_thread(self.cluster.get, storage, namespace, storage_name(release, revision))
        except errors.TemporaryError:
            return
        labels = objects.labels(found or {})
        if found is None or labels.get("status") != "deployed" or labels.get(OWNER_LABEL) != self.owner \
                or labels.get(INPUTS_LABEL) != inputs_label(inputs, revision):
            return
        record = Verified(revision, objects.uid(found), inputs_label(inputs, revision), manifest, notes,
                          nondeterministic, [item for item, _ in applied], frozenset(child_kinds(manifest)),
                          {item.key: essence(written) for item, written in applied})
        self._records[(namespace, release)] = record

    async def apply(self, record: Verified | None, item: Desired) -> bool:
        """Server-side apply one object as helm; True when it had to be created."""
        written, created = await self.apply_object(item)
        if record is not None:
            record.essences[item.key] = essence(written)
        return created

    async def apply_object(self, item: Desired) -> tuple[dict[str, Any], bool]:
        """Server-side apply one object as field manager ``helm``: the object written, and whether it was new."""
        ref = await asyncio.to_thread(self.cluster.resolve, item.kind.group, item.kind.version, item.kind.kind)
        written, created = await asyncio.to_thread(self.cluster.apply, ref, item.namespace, item.body,
                                                   FIELD_MANAGER, True)
        return written, bool(created)

    async def desired(self, manifest: str, release: str, namespace: str) -> list[Desired]:
        """The manifest's objects as drift repair applies them (their kinds resolved through discovery)."""
        kinds = child_kinds(manifest)
        refs = {kind: await asyncio.to_thread(self.cluster.resolve, kind.group, kind.version, kind.kind)
                for kind in kinds}
        return desired_objects(manifest, release, namespace, refs)

    async def _get(self, item: Desired) -> dict[str, Any] | None:
        ref = await asyncio.to_thread(self.cluster.resolve, item.kind.group, item.kind.version, item.kind.kind)
        return await asyncio.to_thread(self.cluster.get, ref, item.namespace, item.name)
