"""The node agent's Node: registered as a starting kubelet registers it, kept Ready by its heartbeats.

The Node, its status and its Lease are :mod:`..simnode.node`'s, as in the embedded cluster. At start
the agent creates the Node when it is missing and reports its status; then, like a kubelet, it renews
the Lease in ``kube-node-lease`` every :data:`~..simnode.node.LEASE_RENEW` seconds (what kube's
node-lifecycle controller watches: a node whose Lease goes stale for its grace period is marked
Unknown and tainted) and reports the status every :data:`~..simnode.node.HEARTBEAT` seconds, and at
once when what it reports differs from what is stored (a controller marked it otherwise). A deleted
Node is registered again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.nodeagent.client import ApiError
from hybrid_operator.localcluster.nodeagent.context import CONFLICT, GONE, AgentContext, tolerating
from hybrid_operator.localcluster.simnode.node import (
    HEARTBEAT,
    LEASE_NAMESPACE,
    LEASE_RENEW,
    NODE_NAME,
    lease_body,
    lease_spec,
    node_body,
    node_status,
    renew_time,
    without_heartbeats,
)

log = logging.getLogger(__name__)

NODE_PATH = f"/api/v1/nodes/{NODE_NAME}"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"


def _reported(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether the stored status already says what ``wanted`` says (heartbeat times aside; an empty list or map
    is what a server that omits empty fields stores as nothing)."""
    stored, wanted = without_heartbeats(stored), without_heartbeats(wanted)
    return all((stored.get(key) or None) == (value or None) for key, value in wanted.items())


class NodeKeeper:
    """Registers the Node, reports its status and renews its Lease."""

    def __init__(self, context: AgentContext) -> None:
        self.context = context
        self._uid = ""

    async def register(self) -> None:
        """Create the Node when missing (as a starting kubelet does) and report it Ready."""
        client = self.context.client
        try:
            node = await client.get(NODE_PATH)
        except ApiError as missing:
            if missing.status != GONE:
                raise
            node = await tolerating((CONFLICT,), client.create("/api/v1/nodes", node_body())) or \
                await client.get(NODE_PATH)
            log.info("node registered", extra={"node": NODE_NAME, "uid": objects.uid(node)})
        self._uid = objects.uid(node)
        await self.report(node, force=False)
        try:
            await self.renew_lease()
        except ApiError as failed:  # kube-node-lease may not exist yet on a server just started: renewed later
            log.warning("node lease not renewed", extra={"node": NODE_NAME, "error": str(failed)})

    async def report(self, node: dict[str, Any], force: bool) -> None:
        """Patch the Node's status when it differs from what a healthy kubelet reports (or always, as a heartbeat)."""
        old = node.get("status") or {}
        status = node_status(old, clock.now_rfc3339())
        if not force and _reported(old, status):
            return
        await tolerating((GONE,), self.context.client.merge_patch(
            f"{NODE_PATH}/status", {"metadata": {"uid": objects.uid(node)}, "status": status}))

    async def sync(self) -> None:
        """The Node changed or went: register it again, or correct its status."""
        node = self.context.node()
        if node is None:
            await self.register()
        else:
            await self.report(node, force=False)

    async def renew_lease(self) -> None:
        client = self.context.client
        now = renew_time()
        try:
            await client.merge_patch(f"{LEASE_PATH}/{NODE_NAME}", {"spec": lease_spec(now)})
        except ApiError as missing:
            if missing.status != GONE or not self._uid:
                raise
            await tolerating((CONFLICT,), client.create(LEASE_PATH, lease_body(self._uid, now)))

    async def keep_lease(self) -> None:
        """Renew the Lease every LEASE_RENEW seconds, until cancelled (failures are logged and retried)."""
        while True:
            await asyncio.sleep(LEASE_RENEW)
            try:
                await self.renew_lease()
            except ApiError as failed:
                log.warning("node lease not renewed", extra={"node": NODE_NAME, "error": str(failed)})

    async def heartbeat(self) -> None:
        """Report the status every HEARTBEAT seconds, until cancelled."""
        while True:
            await asyncio.sleep(HEARTBEAT)
            node = self.context.node()
            try:
                if node is not None:
                    await self.report(node, force=True)
            except ApiError as failed:
                log.warning("node status not reported", extra={"node": NODE_NAME, "error": str(failed)})
