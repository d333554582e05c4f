"""The wiring of kopf: the ONLY module that imports kopf.

kopf lists and watches every kind of ``watches.yaml`` (reconnecting, re-listing
on 410, discovering CRDs) and hands each raw event to :func:`register`'s
callback.  We use only ``kopf.on.event``: no kopf finalizers, no progress or
diff-base annotations on the user's objects, no kopf retries.  Queueing,
backoff, finalizers and status are ours (see :mod:`app`, :mod:`reconciler`),
so reconciles stay level-triggered: an event only says "look again".
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import kopf

from hybrid_operator.config.model import Watch
from hybrid_operator.kube.connection import Connection

log = logging.getLogger(__name__)

EventCallback = Callable[[Watch, str, dict[str, Any]], Awaitable[None]]


def build_registry(watches: Sequence[Watch], on_event: EventCallback, connection: Connection) -> kopf.OperatorRegistry:
    """A kopf registry with one event handler per watch and a login from ``connection``."""
    registry = kopf.OperatorRegistry()

    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=connection.server,
            ca_data=connection.ca_data,
            token=connection.token,
            insecure=connection.insecure,
            certificate_path=connection.cert_file,
            private_key_path=connection.key_file,
        )

    kopf.on.login(registry=registry)(login)

    async def handle(*, event: Any, param: Any = None, **_: Any) -> None:
        kind = str(event.get("type") or "ADDED")
        body = dict(event.get("object") or {})
        await on_event(param, kind, body)

    for index, watch in enumerate(watches):
        gvk = watch.gvk
        kopf.on.event(group=gvk.group, version=gvk.version, kind=gvk.kind, id=f"watch-{index}-{gvk.kind}",
                      param=watch, registry=registry)(handle)
    return registry


class RetryForever:
    """kopf's API retry delays, never exhausted: 1, 1, 2, 3, then every ``cap`` seconds.

    kopf gives up on a request after its last backoff, and a watch whose request gave up ends for
    good; with this the watches wait out an API server outage of any length and resume when it is back.
    Iterable again for every request (kopf calls ``iter`` per request).
    """

    def __init__(self, cap: float = 5.0) -> None:
        self.cap = cap

    def __iter__(self) -> Iterator[float]:
        yield from (1.0, 1.0, 2.0, 3.0)
        yield from itertools.repeat(self.cap)


def operator_settings() -> kopf.OperatorSettings:
    """kopf's settings: no peering or posting, and watches that recover by themselves.

    * the server closes every watch after ``server_timeout`` (300 s) and kopf re-opens it; a stream
      silent for ``client_timeout`` (330 s) is dropped client-side;
    * a stream with no event and no bookmark for ``inactivity_timeout`` (70 s, kopf's default; the
      API server sends bookmarks about once a minute, the embedded one every 30 s) is re-opened: the
      fix for watches that stall without a TCP error;
    * failed requests (API server down, 5xx, timeouts) are retried forever (:class:`RetryForever`).
    """
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.watching.reconnect_backoff = 1.0
    settings.watching.inactivity_timeout = 70.0
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = RetryForever()
    settings.scanning.disabled = False
    return settings


async def run(registry: kopf.OperatorRegistry, namespaces: Sequence[str], stop: asyncio.Event,
              ready: asyncio.Event | None = None, on_signal: Callable[[int], None] | None = None) -> None:
    """Run kopf until ``stop`` is set.

    kopf takes SIGINT/SIGTERM for itself when it starts in the main thread; with ``on_signal`` they
    are handed back to the caller, whose shutdown sets ``stop`` when it is ready for kopf to end.
    """
    ignored = asyncio.all_tasks()
    tasks = await kopf.spawn_tasks(
        registry=registry,
        settings=operator_settings(),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=list(namespaces),
        stop_flag=stop,
        ready_flag=ready,
    )
    if on_signal is not None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
    await kopf.run_tasks(tasks, ignored=ignored)
