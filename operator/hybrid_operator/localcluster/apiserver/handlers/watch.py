"""WATCH of a collection (kube-apiserver's watch handler): newline-delimited JSON events, flushed one by one.

Implements kube-apiserver's watch contract as kopf, kubectl, helm (kstatus)
and the Python client rely on it: synthetic ADDED events when no
resourceVersion is given, replay from a resourceVersion, 410 ``Expired`` for
one older than the retained history, ``sendInitialEvents`` with the
``k8s.io/initial-events-end`` bookmark, periodic BOOKMARKs on idle streams,
label/field selector filtering (objects moving in or out of a selector appear
as ADDED/DELETED), KEP-5866 ``shardSelector`` filtering (never echoed: the
``initial-events-end`` bookmark carries only its annotation and a
resourceVersion, as kube-apiserver v1.36's does), and closing at ``timeoutSeconds``.

``timeoutSeconds`` is read as kube-apiserver reads it: not an int64 (``abc``,
``1e20``): 400 BadRequest with Go's ``strconv.ParseInt`` error; absent or 0: a
deadline drawn between ``--min-request-timeout`` and twice that (so no watch
lasts for ever unless that flag is 0); negative: a deadline already passed, so
the stream ends at once (kube-apiserver allows negative values and times the
watch out immediately).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from hybrid_operator.localcluster import clock, errors, objects
from hybrid_operator.localcluster.apiserver import decoding, tables
from hybrid_operator.localcluster.apiserver.context import api_of, config_of
from hybrid_operator.localcluster.apiserver.urls import Target
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics import listing
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector
from hybrid_operator.localcluster.semantics.shardselectors import ShardSelector
from hybrid_operator.localcluster.storage.changes import Change


@dataclass(frozen=True)
class Filter:
    """Which objects one watch sees: a namespace (None: all) and its selectors."""

    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    shard: ShardSelector | None = None

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and objects.namespace(obj) != self.namespace:
            return False
        if self.shard is not None and not self.shard.matches(obj):
            return False
        return listing.matches(obj, self.labels, self.fields)

    def translate(self, change: Change) -> tuple[str, dict[str, Any]] | None:
        """The event this watcher sees for ``change``, if any."""
        now_in = self.matches(change.obj)
        was_in = self.matches(change.old)
        if change.type == "DELETED":
            return ("DELETED", change.obj) if was_in or now_in else None
        if now_in and was_in:
            return "MODIFIED", change.obj
        if now_in:
            return "ADDED", change.obj
        if was_in and change.old is not None:
            # like kube's cacher: the previous content (what the watcher knew), at the event's resourceVersion
            meta = dict(change.old.get("metadata", {}), resourceVersion=str(change.rv))
            return "DELETED", {**change.old, "metadata": meta}
        return None


@dataclass(frozen=True)
class WatchOptions:
    """The watch's query parameters."""

    rv: int | None
    send_initial: bool
    bookmarks: bool
    deadline: float | None  # time.monotonic() at which to close the stream (timeoutSeconds)

    @classmethod
    def of(cls, request: web.Request) -> WatchOptions:
        query = request.query
        options = cls(
            rv=_parse_rv(query.get("resourceVersion")),
            send_initial=decoding.is_true(query.get("sendInitialEvents", "")),
            bookmarks=decoding.is_true(query.get("allowWatchBookmarks", "")),
            deadline=_deadline(decoding.timeout_seconds(request), config_of(request).min_request_timeout),
        )
        if options.send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise errors.invalid("ListOptions", "meta.k8s.io", "", [{
                "reason": "FieldValueForbidden", "field": "sendInitialEvents",
                "message": "Forbidden: sendInitialEvents is forbidden for watch unless "
                           "resourceVersionMatch is set to NotOlderThan"}])
        return options

    def expired(self) -> bool:
        return self.deadline is not None and self.deadline <= time.monotonic()

    def wait(self, interval: float) -> float | None:
        """How long to wait for the next change before a bookmark; None once the deadline passed."""
        if self.deadline is None:
            return interval
        remaining = self.deadline - time.monotonic()
        return min(interval, remaining) if remaining > 0 else None


def _parse_rv(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be a non-negative integer')
    return int(text)


def _deadline(timeout: int | None, min_request_timeout: float) -> float | None:
    """When the watch ends: ``timeoutSeconds`` from now, or (absent or 0) a random time between
    ``min_request_timeout`` and twice that, as kube-apiserver spreads reconnections; None: never
    (only with ``--min-request-timeout 0``)."""
    if timeout:
        return time.monotonic() + timeout
    if min_request_timeout <= 0:
        return None
    return time.monotonic() + min_request_timeout * (1.0 + random.random())


class _Stream:
    """One open watch response: events and bookmarks as JSON lines."""

    def __init__(self, response: web.StreamResponse, api: ObjectApi, info: ResourceInfo, table: bool) -> None:
        self.response = response
        self.api = api
        self.info = info
        self.table = table

    async def send(self, kind: str, obj: dict[str, Any]) -> None:
        shown = self.api.as_version(self.info, obj, share=True)
        if self.table and kind in ("ADDED", "MODIFIED", "DELETED"):
            shown = tables.table([shown], kind=self.info.kind,
                                 printer_columns=list(self.info.printer_columns) or None,
                                 include_object="Object", resource_version=str(
                                     shown["metadata"].get("resourceVersion", "")),
                                 now=clock.now())
        await self._line({"type": kind, "object": shown})

    async def bookmark(self, rv: int, initial_end: bool = False) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        await self._line({"type": "BOOKMARK",
                          "object": {"kind": self.info.kind, "apiVersion": self.info.group_version, "metadata": meta}})

    async def _line(self, event: dict[str, Any]) -> None:
        await self.response.write((json.dumps(event, separators=(",", ":")) + "\n").encode())

    async def replay(self, backlog: list[Change], events: Filter) -> None:
        """What a watcher resuming from a resourceVersion missed."""
        for change in backlog:
            if change.skey == self.info.storage_key:
                event = events.translate(change)
                if event:
                    await self.send(*event)

    async def follow(self, queue: asyncio.Queue[Change], events: Filter, seen: int, options: WatchOptions,
                     bookmark_interval: float) -> None:
        """New changes as they come, bookmarks when idle, until the deadline."""
        last = seen
        while (wait := options.wait(bookmark_interval)) is not None:
            try:
                change = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                if options.bookmarks and options.wait(bookmark_interval) is not None:
                    await self.bookmark(max(last, self.api.store.rv))
                continue
            if change.rv <= seen or change.skey != self.info.storage_key:
                continue
            last = change.rv
            event = events.translate(change)
            if event:
                await self.send(*event)


async def watch_resources(request: web.Request, target: Target, labels: LabelSelector,
                          fields: FieldSelector, shard: ShardSelector | None = None) -> web.StreamResponse:
    api, info = api_of(request), target.info
    options = WatchOptions.of(request)
    if options.expired():  # a negative timeoutSeconds: the watch is over before it began
        return await _ended(request)
    events = Filter(target.namespace, labels, fields, shard)
    backlog: list[Change] | None = None
    if options.rv and not options.send_initial:
        backlog = api.store.changes.since(options.rv)
        if backlog is None:
            return await _expired(request, api, options.rv)
    queue = api.store.changes.subscribe()
    seen = api.store.rv
    snapshot: list[dict[str, Any]] = []
    if backlog is None:
        snapshot = [obj for obj in api.store.list(info.storage_key, target.namespace) if events.matches(obj)]
    response = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    stream = _Stream(response, api, info, decoding.wants_table(request))
    try:
        await response.prepare(request)
        if backlog is None:
            for obj in snapshot:
                await stream.send("ADDED", obj)
            if options.send_initial and options.bookmarks:
                await stream.bookmark(seen, initial_end=True)
        else:
            await stream.replay(backlog, events)
        await stream.follow(queue, events, seen, options, config_of(request).bookmark_interval)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        api.store.changes.unsubscribe(queue)
    return response


async def _ended(request: web.Request) -> web.StreamResponse:
    """A watch stream without any event: its deadline had passed already."""
    response = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write_eof()
    return response


async def _expired(request: web.Request, api: ObjectApi, rv: int) -> web.StreamResponse:
    """A one-event stream saying the resourceVersion is older than the retained history (410)."""
    expired = errors.expired(f"too old resource version: {rv} ({api.store.changes.compacted_rv + 1})")
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    line = json.dumps({"type": "ERROR", "object": expired.status()}) + "\n"
    await response.write(line.encode())
    await response.write_eof()
    return response
