"""Event TTL: an Event goes once it was not written for ``--event-ttl`` (kube-apiserver's default: 1 h).

kube-apiserver stores every Event under an etcd lease of ``--event-ttl``, renewed by each write, so
Events disappear an hour after their last update whatever wrote them; without that, every client
that posts Events grows the store forever (issue 13 item 5). The embedded cluster has no leases, so
:class:`EventExpiry` does the same from what is stored: an Event's last write is the newest of its
``creationTimestamp`` and its managedFields times (both written by the server, never by the
client), and an Event whose last write is older than the TTL is deleted, like any client would, every
few seconds (a tenth of the TTL, at most a minute). It runs with ``--no-controllers`` too: the TTL
belongs to the API server, not to kube-controller-manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hybrid_operator.localcluster import clock, errors
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions

log = logging.getLogger(__name__)

#: storage keys of core v1 Events and events.k8s.io Events (stored apart)
EVENT_KEYS = ("/events", "events.k8s.io/events")
DEFAULT_TTL = 3600.0
MANAGER = "hybrid-cluster-event-ttl"


def last_write(event: dict[str, Any]) -> datetime | None:
    """When the server last wrote ``event``: its creation or the newest managedFields entry."""
    meta = event.get("metadata") or {}
    stamps = [clock.parse_timestamp(meta.get("creationTimestamp"))]
    stamps += [clock.parse_timestamp(entry.get("time")) for entry in meta.get("managedFields") or []
               if isinstance(entry, dict)]
    known = [stamp for stamp in stamps if stamp is not None]
    return max(known) if known else None


class EventExpiry:
    """Deletes Events not written for ``ttl`` seconds (0 or less: never)."""

    def __init__(self, api: ObjectApi, ttl: float = DEFAULT_TTL, *, now: Callable[[], datetime] = clock.now,
                 interval: float | None = None) -> None:
        self.api = api
        self.ttl = ttl
        self.now = now
        self.interval = interval if interval is not None else min(60.0, max(0.5, ttl / 10))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.ttl > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                self.sweep()
            except Exception:  # never the silent death of the task: log, and try again next time
                log.exception("event expiry failed")
            await asyncio.sleep(max(self.interval, (time.monotonic() - started) * 4))

    def sweep(self) -> int:
        """Delete every expired Event now; how many were deleted."""
        now = self.now()
        deleted = 0
        for skey in EVENT_KEYS:
            versions = self.api.registry.versions_of(skey)
            if not versions:
                continue
            info = versions[0]
            expired = []
            for event in self.api.store.list(skey):
                written = last_write(event)
                if written is None or (now - written).total_seconds() > self.ttl:
                    meta = event["metadata"]
                    expired.append((str(meta.get("namespace") or ""), str(meta["name"])))
            for namespace, name in expired:
                try:
                    self.api.delete(info, namespace, name, WriteOptions(field_manager=MANAGER))
                    deleted += 1
                except errors.ApiError as exc:
                    if exc.code != 404:
                        log.warning("expired event not deleted", extra={"event": name, "error": exc.message})
        if deleted:
            log.info("expired events deleted", extra={"count": deleted, "ttl_seconds": self.ttl})
        return deleted
