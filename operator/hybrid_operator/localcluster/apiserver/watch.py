"""Watch streams: newline-delimited JSON events, flushed one by one.

Implements kube-apiserver's watch contract as kopf, kubectl, helm (kstatus)
and the Python client rely on it: synthetic ADDED events when no
resourceVersion is given, replay from a resourceVersion, 410 ``Expired`` for
one older than the retained history, ``sendInitialEvents`` with the
``k8s.io/initial-events-end`` bookmark, periodic BOOKMARKs on idle streams,
label/field selector filtering (objects moving in or out of a selector appear
as ADDED/DELETED), and closing at ``timeoutSeconds``.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import tables
from hybrid_operator.localcluster.resources import ResourceInfo
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.fieldselectors import FieldSelector
from hybrid_operator.localcluster.semantics.labelselectors import LabelSelector
from hybrid_operator.localcluster.storage.changes import Change


def _matches(obj: dict[str, Any] | None, namespace: str | None, labels: LabelSelector,
             fields: FieldSelector) -> bool:
    if obj is None:
        return False
    meta = obj.get("metadata", {})
    if namespace is not None and meta.get("namespace", "") != namespace:
        return False
    return labels.matches(meta.get("labels") or {}) and fields.matches(obj)


def translate(change: Change, namespace: str | None, labels: LabelSelector,
              fields: FieldSelector) -> tuple[str, dict[str, Any]] | None:
    """The event a watcher with these filters sees for ``change``, if any."""
    now_in = _matches(change.obj, namespace, labels, fields)
    was_in = _matches(change.old, namespace, labels, fields)
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


class _Stream:
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
                                 now=datetime.now(UTC))
        line = json.dumps({"type": kind, "object": shown}, separators=(",", ":")) + "\n"
        await self.response.write(line.encode())

    async def bookmark(self, rv: int, initial_end: bool = False) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.info.kind, "apiVersion": self.info.group_version, "metadata": meta}
        line = json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")) + "\n"
        await self.response.write(line.encode())


def _parse_rv(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be a non-negative integer')
    return int(text)


def _flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "")
    return value in ("1", "t", "T", "true", "True", "TRUE")


async def serve(
    request: web.Request,
    api: ObjectApi,
    info: ResourceInfo,
    namespace: str | None,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmark_interval: float,
    *,
    table: bool = False,
) -> web.StreamResponse:
    rv = _parse_rv(request.query.get("resourceVersion"))
    send_initial = _flag(request, "sendInitialEvents")
    bookmarks = _flag(request, "allowWatchBookmarks")
    timeout_text = request.query.get("timeoutSeconds", "")
    deadline = time.monotonic() + float(timeout_text) if timeout_text.isdigit() else None
    if send_initial and request.query.get("resourceVersionMatch") != "NotOlderThan":
        raise errors.invalid("ListOptions", "meta.k8s.io", "", [{
            "reason": "FieldValueForbidden", "field": "sendInitialEvents",
            "message": "Forbidden: sendInitialEvents is forbidden for watch unless "
                       "resourceVersionMatch is set to NotOlderThan"}])
    backlog: list[Change] | None = None
    if rv and not send_initial:
        backlog = api.store.changes.since(rv)
        if backlog is None:
            expired = errors.expired(f"too old resource version: {rv} ({api.store.changes.compacted_rv + 1})")
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            line = json.dumps({"type": "ERROR", "object": expired.status()}) + "\n"
            await response.write(line.encode())
            await response.write_eof()
            return response

    queue = api.store.changes.subscribe()
    seen = api.store.rv
    snapshot: list[dict[str, Any]] = []
    if backlog is None:
        snapshot = [obj for obj in api.store.list(info.storage_key, namespace)
                    if _matches(obj, namespace, labels, fields)]
    response = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        stream = _Stream(response, api, info, table)
        if backlog is None:
            for obj in snapshot:
                await stream.send("ADDED", obj)
            if send_initial and bookmarks:
                await stream.bookmark(seen, initial_end=True)
        else:
            for change in backlog:
                if change.skey == info.storage_key:
                    event = translate(change, namespace, labels, fields)
                    if event:
                        await stream.send(*event)
        await _follow(stream, queue, info, namespace, labels, fields, seen, bookmarks, bookmark_interval, deadline)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        api.store.changes.unsubscribe(queue)
    return response


async def _follow(
    stream: _Stream,
    queue: asyncio.Queue[Change],
    info: ResourceInfo,
    namespace: str | None,
    labels: LabelSelector,
    fields: FieldSelector,
    seen: int,
    bookmarks: bool,
    bookmark_interval: float,
    deadline: float | None,
) -> None:
    last = seen
    while True:
        wait = bookmark_interval
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            wait = min(wait, remaining)
        try:
            change = await asyncio.wait_for(queue.get(), timeout=wait)
        except TimeoutError:
            if bookmarks and (deadline is None or deadline - time.monotonic() > 0):
                await stream.bookmark(max(last, stream.api.store.rv))
            continue
        if change.rv <= seen or change.skey != info.storage_key:
            continue
        last = change.rv
        event = translate(change, namespace, labels, fields)
        if event:
            await stream.send(*event)
