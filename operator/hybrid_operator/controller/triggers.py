"""Triggers from related kinds: objects a resource does not own but depends on.

A ``watches.yaml`` entry may list ``triggers`` (our extension; the Operator
SDK's Ansible operator has no equivalent): a related kind plus ``match`` pairs
mapping a field of the related object to a field of the custom resource
(``metadata.name: spec.name``).  One watch per related kind follows its
objects; when one appears, changes (outside status, resourceVersion and
managedFields) or goes, every resource it matched before or matches now is
enqueued.  At reconcile time :func:`related_objects` gives the playbook the
current matching objects as the ``_related`` extra var, so it needs no API
call of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import errors
from hybrid_operator.config.watches import GroupVersionKind, Trigger
from hybrid_operator.controller import dependents
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

Key = tuple[str, str]  # namespace, name of a custom resource
Values = tuple[str, ...]


def field_value(obj: dict[str, Any], path: str) -> str:
    """The value at a dotted path (``metadata.labels.app`` understands dotted label keys), as text."""
    current: Any = obj
    parts = path.split(".")
    index = 0
    while index < len(parts):
        if not isinstance(current, dict):
            return ""
        # a map key may itself contain dots (labels like app.kubernetes.io/name): take the longest match
        for end in range(len(parts), index, -1):
            candidate = ".".join(parts[index:end])
            if candidate in current:
                current = current[candidate]
                index = end
                break
        else:
            return ""
    if current is None:
        return ""
    return current if isinstance(current, str) else str(current)


def related_values(obj: dict[str, Any], trigger: Trigger) -> Values:
    return tuple(field_value(obj, related) for related, _ in trigger.match)


def own_values(cr: dict[str, Any], trigger: Trigger) -> Values:
    return tuple(field_value(cr, own) for _, own in trigger.match)


def matches(related: dict[str, Any], cr: dict[str, Any], trigger: Trigger, namespaced: bool) -> bool:
    if namespaced and objects.meta(related).get("namespace") != objects.meta(cr).get("namespace"):
        return False
    values = own_values(cr, trigger)
    return all(values) and related_values(related, trigger) == values


@dataclass
class TriggerIndex:
    """For one trigger of one watch: each resource's own values, and how to enqueue it."""

    trigger: Trigger
    enqueue: Callable[[Key], None]
    values: dict[Key, Values] = field(default_factory=dict)

    def update(self, key: Key, cr: dict[str, Any] | None) -> None:
        if cr is None:
            self.values.pop(key, None)
        else:
            self.values[key] = own_values(cr, self.trigger)

    def matching(self, namespace: str | None, values: Values) -> list[Key]:
        if not all(values):
            return []
        return [key for key, own in self.values.items()
                if own == values and (namespace is None or key[0] == namespace)]


@dataclass
class _Follower:
    gvk: GroupVersionKind
    indexes: list[TriggerIndex] = field(default_factory=list)
    last: dict[tuple[str, str], tuple[str, list[Values]]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class RelatedWatches:
    """One watch per related kind, feeding every trigger index that refers to it."""

    def __init__(self, cluster: ClusterClient, namespaces: tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.namespaces = namespaces
        self._followers: dict[GroupVersionKind, _Follower] = {}

    def add(self, index: TriggerIndex) -> None:
        follower = self._followers.setdefault(index.trigger.gvk, _Follower(index.trigger.gvk))
        follower.indexes.append(index)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for follower in self._followers.values():
            follower.task = loop.create_task(self._follow(follower))

    async def close(self) -> None:
        for follower in self._followers.values():
            if follower.task is not None:
                follower.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower.task

    async def _follow(self, follower: _Follower) -> None:
        delay = 1.0
        gvk = follower.gvk
        while True:
            try:
                ref = await asyncio.to_thread(self.cluster.resolve, gvk.group, gvk.version, gvk.kind)
                scopes = self.namespaces if (ref.namespaced and self.namespaces) else ("",)
                await asyncio.gather(*(self._scope(follower, ref, scope) for scope in scopes))
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except (errors.TemporaryError, OSError, ValueError) as exc:
                log.warning("related watch failed", extra={"related": str(gvk), "error": str(exc), "retry_in": delay})
                await asyncio.sleep(delay)
                delay = min(60.0, delay * 2)

    async def _scope(self, follower: _Follower, ref: ResourceRef, namespace: str) -> None:
        items, version = await asyncio.to_thread(self.cluster.list_with_version, ref, namespace)
        for obj in items:
            self._remember(follower, obj)
        async for event in self.cluster.watch(ref, namespace, version, timeout_seconds=300):
            kind = event.get("type")
            if kind == "ERROR":
                raise errors.TemporaryError(f"watch of {follower.gvk} ended: {event.get('object')}")
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._changed(follower, ref, str(kind), event.get("object") or {})

    def _remember(self, follower: _Follower, obj: dict[str, Any]) -> tuple[str, list[Values]] | None:
        meta = objects.meta(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        previous = follower.last.get(key)
        follower.last[key] = (dependents.essence(obj), [related_values(obj, i.trigger) for i in follower.indexes])
        return previous

    def _changed(self, follower: _Follower, ref: ResourceRef, kind: str, obj: dict[str, Any]) -> None:
        meta = objects.meta(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        if kind == "DELETED":
            previous = follower.last.pop(key, None)
            current: tuple[str, list[Values]] | None = None
        else:
            previous = self._remember(follower, obj)
            current = follower.last[key]
        if kind == "MODIFIED" and previous is not None and current is not None and previous[0] == current[0]:
            return
        namespace = key[0] if ref.namespaced else None
        for position, index in enumerate(follower.indexes):
            affected: set[Key] = set()
            for state in (previous, current):
                if state is not None:
                    affected.update(index.matching(namespace, state[1][position]))
            if kind == "DELETED":
                affected.update(index.matching(namespace, related_values(obj, index.trigger)))
            for cr_key in sorted(affected):
                log.info("related object changed", extra={"related": f"{follower.gvk.kind}/{key[1]}",
                                                          "event": kind, "cr": cr_key[1]})
                index.enqueue(cr_key)


def related_objects(cluster: ClusterClient, cr: dict[str, Any], triggers: Iterable[Trigger]) -> dict[str, Any]:
    """The ``_related`` extra var: per related kind, the objects matching ``cr`` right now."""
    result: dict[str, list[dict[str, Any]]] = {}
    namespace = objects.namespace(cr)
    for trigger in triggers:
        ref = cluster.resolve(trigger.gvk.group, trigger.gvk.version, trigger.gvk.kind)
        items = cluster.list(ref, namespace if ref.namespaced else "")
        result.setdefault(trigger.gvk.kind, []).extend(
            obj for obj in items if matches(obj, cr, trigger, ref.namespaced))
    return result
