"""The one list-then-watch loop: what dependents and triggers use to follow a kind.

client-go's informers list a kind, then watch from the list's resourceVersion, re-open the watch
from the last resourceVersion seen when the server ends it, and list again only when that version is
too old or the watch breaks. :func:`follow` does that for one kind, in every namespace it is scoped to, and
hands each listed object and each event to a :class:`Handler`. It ends only when its task is
cancelled: whatever goes wrong -- an API outage, a kind that does not exist yet, an event too large,
a bug in a handler -- is logged and retried with a backoff (1 s doubling to 60 s), never the silent
death of the task (issue 13 item 4). An expected trouble (:class:`errors.TemporaryError`) is logged
once per streak; anything else is a crash, logged with its traceback and reported to the
:class:`Health` sink (``/readyz``) until the kind is listed again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hybrid_operator import errors
from hybrid_operator.kube.client import ClusterClient, ResourceRef

log = logging.getLogger(__name__)

WATCH_TIMEOUT = 300
"""Seconds the server keeps one watch open before the loop re-opens it from where it was (as client-go's reflector)."""
MAX_BACKOFF = 60.0
SHORT_WATCH = 1.0
"""A watch the server ends sooner than this (seconds) without sending an event is a failure, retried with the
backoff: resuming at once would ask again in a tight loop (client-go's reflector calls it a "very short watch")."""

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
#: the code of the ERROR event for a resourceVersion older than the server keeps
HTTP_GONE = 410


class Handler(Protocol):
    """Receives what one follower sees."""

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        """An object of the initial list (no event: the follower is catching up)."""

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        """An ADDED, MODIFIED or DELETED event."""


@runtime_checkable
class SyncAware(Protocol):
    """A handler that also wants to know when its view of a scope is complete, and when it is not.

    ``relisting`` comes before the (re)list of one scope (``""``: every namespace), ``synced`` once
    every object of that list was handed over, ``interrupted`` when the follower failed and will list
    again later: until the next ``synced`` the handler's view may miss changes.
    """

    def relisting(self, ref: ResourceRef, namespace: str) -> None: ...

    def synced(self, ref: ResourceRef, namespace: str) -> None: ...

    def interrupted(self) -> None: ...


class Health(Protocol):
    """Told when a background task crashed, and when it works again (the readiness probe)."""

    def task_failed(self, name: str, error: str) -> None: ...

    def task_ok(self, name: str) -> None: ...


async def follow(cluster: ClusterClient, gvk: tuple[str, str, str], namespaces: Sequence[str], handler: Handler,
                 *, what: str, health: Health | None = None, shard: ShardRequest | None = None) -> None:
    """List then watch the kind ``gvk`` (group, version, kind) forever; ``what`` names it in logs.

    With ``shard`` (KEP-5866) the list and the watch ask the server for that slice only, and
    :class:`ShardRequest` finds out whether the server applied it (the handler may get everything and
    must filter either way). A server refusing the selector is a :class:`errors.ConfigurationError`,
    raised, not retried.
    """
    delay = 1.0
    streak = 0
    group, version, kind = gvk
    sharding = shard or ShardRequest()

    def listed() -> None:
        if health is not None:
            health.task_ok(what)

    def working() -> None:
        """An event arrived, or a watch ended as the server ends them: the trouble is over."""
        nonlocal streak, delay
        if streak:
            log.info("watch resumed", extra={"watch": what, "failures": streak})
        streak, delay = 0, 1.0

    while True:
        try:
            ref = await asyncio.to_thread(cluster.resolve, group, version, kind)
            scopes = tuple(namespaces) if (ref.namespaced and namespaces) else ("",)
            await _follow_scopes(cluster, ref, scopes, handler, listed, working, sharding)
            working()
            continue
        except (asyncio.CancelledError, errors.ConfigurationError):
            if isinstance(handler, SyncAware):
                handler.interrupted()
            raise
        except errors.TemporaryError as exc:
            if isinstance(handler, SyncAware):
                handler.interrupted()
            streak += 1
            if streak == 1 and not isinstance(exc, errors.Unreachable):
                log.warning("watch failed", extra={"watch": what, "error": str(exc), "retry_in": delay})
        except Exception as exc:  # a bug, or an answer nobody expected: restart, loudly
            if isinstance(handler, SyncAware):
                handler.interrupted()
            streak += 1
            log.exception("watch crashed", extra={"watch": what, "retry_in": delay})
            if health is not None:
                health.task_failed(what, f"crashed ({type(exc).__name__}: {exc}); restarting in {delay:g}s")
        await asyncio.sleep(delay)
        delay = min(MAX_BACKOFF, delay * 2)


@dataclass
class ShardRequest:
    """A KEP-5866 shard selector to follow with, and how the follower learns whether the server applied it.

    ``inside`` tells whether an object is in the slice the selector names (the client's own FNV-1a), and
    ``probe`` is a selector one hash value wide, which no object is in. ``shardInfo`` cannot be relied on
    alone (kube-apiserver echoes it for built-in kinds only), so after each list (:func:`shard_verdict`):

    * an object outside the slice in the answer (or later in a watch event): the server did not filter as
      asked (it ignored the selector): ``decided(False)``, and the follower lists and watches everything
      from then on (:attr:`selector` emptied), the handler filtering;
    * else ``shardInfo`` echoed: it filtered (``decided(True)``);
    * else (a custom resource, or a server that ignored it and holds only objects of the slice) one small
      list tells: when the answer was empty, the first object of an unfiltered ``limit=1`` list (there is
      one: the server filtered it out); otherwise the ``probe`` selector with ``limit=1`` (a filtering
      server answers nothing, an ignoring one an object). An empty collection leaves it undecided until
      the first watch event.
    """

    selector: str = ""
    inside: Callable[[dict[str, Any]], bool] | None = None
    probe: str = ""
    decided: Callable[[bool], None] | None = None
    verdict: bool | None = None

    def decide(self, applied: bool | None) -> None:
        if applied is None or applied == self.verdict:
            return
        self.verdict = applied
        if not applied:
            log.warning("shard selector not applied by the API server: following everything, filtering here",
                        extra={"selector": self.selector})
            self.selector = ""
        if self.decided is not None:
            self.decided(applied)

    def outside(self, obj: dict[str, Any]) -> bool:
        return bool(self.selector) and self.inside is not None and not self.inside(obj)


def shard_verdict(items: Sequence[dict[str, Any]], echoed: bool,
                  inside: Callable[[dict[str, Any]], bool] | None) -> bool | None:
    """From one sharded list's answer alone: False (not filtered as asked), True (filtered), None (cannot tell)."""
    if inside is not None and any(not inside(obj) for obj in items):
        return False
    return True if echoed else None


async def _probe(cluster: ClusterClient, ref: ResourceRef, namespace: str, shard: ShardRequest,
                 answered: bool) -> bool | None:
    """The small list that tells a filtering server from an ignoring one when the answer could not (see above)."""
    if not answered:  # nothing in our slice: is there anything at all?
        items, _, _ = await asyncio.to_thread(cluster.list_sharded, ref, namespace, "", 1)
        return True if items else None
    items, _, _ = await asyncio.to_thread(cluster.list_sharded, ref, namespace, shard.probe, 1)
    return not items


async def _follow_scopes(cluster: ClusterClient, ref: ResourceRef, scopes: Sequence[str], handler: Handler,
                         listed: Callable[[], None], working: Callable[[], None], shard: ShardRequest) -> None:
    """Follow every scope at once; when one fails, the others are stopped too (and all start over).

    Not an ``asyncio.TaskGroup``: when a scope fails while the follower is being cancelled, Python
    3.11's TaskGroup raises the scope's error and drops the cancellation, and the follower went on
    retrying after shutdown or a shard hand-over. Here a cancellation always wins.
    """
    tasks = [asyncio.create_task(_follow_scope(cluster, ref, scope, handler, listed, working, shard))
             for scope in scopes]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        failures = [task.exception() for task in tasks if not task.cancelled()]
    for failure in failures:
        if failure is not None:
            raise failure


async def _follow_scope(cluster: ClusterClient, ref: ResourceRef, namespace: str, handler: Handler,
                        listed: Callable[[], None], working: Callable[[], None], shard: ShardRequest) -> None:
    """List, then watch from the list's resourceVersion. When the server ends a watch (its timeout), watch
    again from the last resourceVersion seen (events and bookmarks), as client-go's reflector does; list
    again only when that version has left the server's history (an ERROR event with 410 Expired)."""
    aware = handler if isinstance(handler, SyncAware) else None
    version = ""
    while True:
        if not version:
            version = await _list(cluster, ref, namespace, handler, shard, aware)
            listed()
        events = cluster.watch(ref, namespace, version, timeout_seconds=WATCH_TIMEOUT, shard_selector=shard.selector)
        opened, seen = asyncio.get_running_loop().time(), 0
        async for event in events:
            seen += 1
            event_type = str(event.get("type"))
            obj = event.get("object") or {}
            if event_type == "ERROR":
                if obj.get("code") == HTTP_GONE:
                    version = ""  # too old (a long outage, a busy server): list again, no failure
                    break
                raise errors.TemporaryError(f"watch of {ref.kind} ended: {obj.get('message', '') or obj}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event_type in EVENT_TYPES:
                if shard.outside(obj):  # the server sends what it should have filtered out
                    shard.decide(False)
                    version = ""  # list again, everything
                    break
                handler.changed(ref, event_type, obj)
                if shard.selector and shard.verdict is None and shard.probe and event_type != "DELETED":
                    shard.decide(await _probe(cluster, ref, namespace, shard, answered=True))
            working()
        if not seen and asyncio.get_running_loop().time() - opened < SHORT_WATCH:
            raise errors.TemporaryError(f"the watch of {ref.kind} ended at once, without an event")
        working()  # ended as the server ends watches: resumed at once


async def _list(cluster: ClusterClient, ref: ResourceRef, namespace: str, handler: Handler, shard: ShardRequest,
                aware: SyncAware | None) -> str:
    """List the scope into the handler; the list's resourceVersion."""
    if aware is not None:
        aware.relisting(ref, namespace)
    items: list[dict[str, Any]] = []
    version = ""
    if shard.selector:
        items, version, echoed = await asyncio.to_thread(cluster.list_sharded, ref, namespace, shard.selector)
        verdict = shard_verdict(items, echoed, shard.inside)
        if verdict is None and shard.probe:
            verdict = await _probe(cluster, ref, namespace, shard, answered=bool(items))
        shard.decide(verdict)
    if not shard.selector:  # never sharded, or the server did not filter as asked: everything
        items, version = await asyncio.to_thread(cluster.list_with_version, ref, namespace)
    for obj in items:
        handler.listed(ref, obj)
    if aware is not None:
        aware.synced(ref, namespace)
    return str(version)
