"""The one list-then-watch loop: what dependents and triggers use to follow a kind.

client-go's informers list a kind, then watch from the list's resourceVersion, and start over when
the watch breaks. :func:`follow` does that for one kind, in every namespace it is scoped to, and
hands each listed object and each event to a :class:`Handler`. A failed list or watch is retried
with a backoff (1 s doubling to 60 s), so a follower survives API outages and kinds that do not
exist yet; it ends only when its task is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from hybrid_operator import errors
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

WATCH_TIMEOUT = 300
"""Seconds the server keeps one watch open before the loop re-opens it (as client-go's reflector)."""

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class Handler(Protocol):
    """Receives what one follower sees."""

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        """An object of the initial list (no event: the follower is catching up)."""

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        """An ADDED, MODIFIED or DELETED event."""


async def follow(cluster: ClusterClient, gvk: tuple[str, str, str], namespaces: Sequence[str], handler: Handler,
                 *, what: str) -> None:
    """List then watch the kind ``gvk`` (group, version, kind) forever; ``what`` names it in logs."""
    delay = 1.0
    group, version, kind = gvk
    while True:
        try:
            ref = await asyncio.to_thread(cluster.resolve, group, version, kind)
            scopes = tuple(namespaces) if (ref.namespaced and namespaces) else ("",)
            await asyncio.gather(*(_follow_scope(cluster, ref, scope, handler) for scope in scopes))
            delay = 1.0
        except asyncio.CancelledError:
            raise
        except (errors.TemporaryError, OSError, ValueError) as exc:
            log.warning("watch failed", extra={"watch": what, "error": str(exc), "retry_in": delay})
            await asyncio.sleep(delay)
            delay = min(60.0, delay * 2)


async def _follow_scope(cluster: ClusterClient, ref: ResourceRef, namespace: str, handler: Handler) -> None:
    items, version = await asyncio.to_thread(cluster.list_with_version, ref, namespace)
    for obj in items:
        handler.listed(ref, obj)
    async for event in cluster.watch(ref, namespace, version, timeout_seconds=WATCH_TIMEOUT):
        event_type = str(event.get("type"))
        obj = event.get("object") or {}
        if event_type == "ERROR":
            raise errors.TemporaryError(f"watch of {ref.kind} ended: {obj.get('message', '') or obj}")
        if event_type in EVENT_TYPES:
            handler.changed(ref, event_type, obj)
