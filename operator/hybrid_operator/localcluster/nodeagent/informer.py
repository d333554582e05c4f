"""A cache of one collection kept by LIST then WATCH, as client-go's reflector keeps an informer's store.

The node agent reads every object it acts on from such caches and is told of each change (the object
and what the cache held before). A LIST replaces the cache (objects that went meanwhile are reported
deleted), a WATCH from the list's resourceVersion follows it, and a new WATCH from the last
resourceVersion seen (bookmarks included) when the server ends one; an expired resourceVersion (410)
or a broken connection starts a new LIST after a short, growing pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.nodeagent.client import ApiClient, ApiError

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: (event type: ADDED, MODIFIED or DELETED; the object; what the cache held before, or None)
Handler = Callable[[str, Obj, Obj | None], None]
WATCH_SECONDS = 300
MAX_PAUSE = 5.0


def key_of(obj: Obj) -> tuple[str, str]:
    return objects.namespace(obj), objects.name(obj)


class Informer:
    """The objects of one collection (``path``, e.g. ``/api/v1/pods``), kept current."""

    def __init__(self, client: ApiClient, path: str, handler: Handler, params: dict[str, str] | None = None) -> None:
        self.client = client
        self.path = path
        self.handler = handler
        self.params = params or {}
        self.cache: dict[tuple[str, str], Obj] = {}
        self.synced = asyncio.Event()
        self._pause = 0.0

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get((namespace, name))

    def values(self) -> list[Obj]:
        return list(self.cache.values())

    async def run(self) -> None:
        """LIST, then WATCH (again from where the last one ended) until cancelled; LIST again after a failure."""
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._list()
                version = await self._watch(version)
                self._pause = 0.0
            except (ApiError, ValueError) as failed:  # refused, unreachable, or a malformed answer
                version = None
                self._pause = min(MAX_PAUSE, self._pause * 2 or 0.2)
                log.info("node agent watch restarting", extra={"path": self.path, "error": str(failed),
                                                               "pause": self._pause})
                await asyncio.sleep(self._pause)

    async def _list(self) -> str:
        answer = await self.client.get(self.path, self.params)
        fresh = {key_of(item): item for item in answer.get("items") or [] if isinstance(item, dict)}
        old = self.cache
        self.cache = fresh
        for key, item in fresh.items():
            before = old.get(key)
            if before is None or objects.meta(before).get("resourceVersion") != objects.meta(item).get(
                    "resourceVersion"):
                self.handler("ADDED" if before is None else "MODIFIED", item, before)
        for key, item in old.items():
            if key not in fresh:
                self.handler("DELETED", item, item)
        self.synced.set()
        return str(objects.dig(answer, "metadata", "resourceVersion") or "")

    async def _watch(self, version: str) -> str:
        """Follow a WATCH until the server ends it: the last resourceVersion seen."""
        params = {**self.params, "resourceVersion": version, "timeoutSeconds": str(WATCH_SECONDS)}
        async for event in self.client.watch(self.path, params):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                raise ApiError(int(obj.get("code") or 0), str(obj.get("reason") or ""), str(obj.get("message") or ""))
            version = str(objects.meta(obj).get("resourceVersion") or version)
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                continue  # BOOKMARK: only its resourceVersion counts
            key = key_of(obj)
            before = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
            else:
                self.cache[key] = obj
            self.handler(str(kind), obj, before)
        return version
