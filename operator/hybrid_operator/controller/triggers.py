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
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.config.model import GroupVersionKind, Trigger
from hybrid_operator.controller import dependents
from hybrid_operator.kube import informer, objects
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
    """One related kind, feeding every trigger index that refers to it (an informer handler)."""

    gvk: GroupVersionKind
    indexes: list[TriggerIndex] = field(default_factory=list)
    last: dict[tuple[str, str], tuple[str, list[Values]]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        self._remember(obj)

    def _remember(self, obj: dict[str, Any]) -> tuple[str, list[Values]] | None:
        key = objects.key(obj)
        previous = self.last.get(key)
        self.last[key] = (dependents.essence(obj), [related_values(obj, i.trigger) for i in self.indexes])
        return previous

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        """Enqueue the CRs the object matched before or matches now (all of them when it was deleted)."""
        key = objects.key(obj)
        if event_type == "DELETED":
            previous = self.last.pop(key, None)
            current: tuple[str, list[Values]] | None = None
        else:
            previous = self._remember(obj)
            current = self.last[key]
        if event_type == "MODIFIED" and previous is not None and current is not None and previous[0] == current[0]:
            return
        namespace = key[0] if ref.namespaced else None
        for position, index in enumerate(self.indexes):
            affected: set[Key] = set()
            for state in (previous, current):
                if state is not None:
                    affected.update(index.matching(namespace, state[1][position]))
            if event_type == "DELETED":
                affected.update(index.matching(namespace, related_values(obj, index.trigger)))
            for cr_key in sorted(affected):
                log.info("related object changed", extra={"related": f"{self.gvk.kind}/{key[1]}",
                                                          "event": event_type, "cr": cr_key[1]})
                index.enqueue(cr_key)


class RelatedWatches:
    """One watch per related kind, feeding every trigger index that refers to it."""

    def __init__(self, cluster: ClusterClient, namespaces: tuple[str, ...] = (),
                 health: informer.Health | None = None) -> None:
        self.cluster = cluster
        self.namespaces = namespaces
        self.health = health
        self._followers: dict[GroupVersionKind, _Follower] = {}

    def add(self, index: TriggerIndex) -> None:
        follower = self._followers.setdefault(index.trigger.gvk, _Follower(index.trigger.gvk))
        follower.indexes.append(index)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for follower in self._followers.values():
            gvk = follower.gvk
            follower.task = loop.create_task(informer.follow(
                self.cluster, (gvk.group, gvk.version, gvk.kind), self.namespaces, follower, what=f"related {gvk}",
                health=self.health))

    async def close(self) -> None:
        for follower in self._followers.values():
            if follower.task is not None:
                follower.task.cancel()
        await asyncio.gather(*(f.task for f in self._followers.values() if f.task is not None),
                             return_exceptions=True)


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
