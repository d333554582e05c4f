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
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import kopf

from hybrid_operator.cluster import Connection
from hybrid_operator.watches import Watch

log = logging.getLogger("hybrid_operator.handlers")

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


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.watching.reconnect_backoff = 1.0
    settings.networking.request_timeout = 60
    settings.scanning.disabled = False
    return settings


async def run(registry: kopf.OperatorRegistry, namespaces: Sequence[str], stop: asyncio.Event,
              ready: asyncio.Event | None = None) -> None:
    """Run kopf until ``stop`` is set."""
    await kopf.operator(
        registry=registry,
        settings=operator_settings(),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=list(namespaces),
        stop_flag=stop,
        ready_flag=ready,
    )
