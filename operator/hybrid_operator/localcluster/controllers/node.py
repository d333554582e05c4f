"""The simulated node in the embedded cluster: one Node that is always Ready, as a healthy kubelet keeps it.

The Node and its Lease are the ones :mod:`..simnode.node` describes (labels,
capacity, addresses, nodeInfo, conditions).  Like the kubelet, this renews the
node's Lease in ``kube-node-lease`` every 10 seconds and the Ready heartbeat
every 5 minutes.  It is created at start and recreated if deleted.  The node
agent (:mod:`..nodeagent`) does the same over HTTP for any other API server.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import LEASES_KEY, NODES_KEY
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


class NodeController:
    """Keeps the one simulated Node and its Lease."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def start(self) -> None:
        """Register the node (like a starting kubelet) and begin the heartbeats."""
        self.ensure()
        self.view.later(LEASE_RENEW, self._renew_lease)
        self.view.later(HEARTBEAT, self._heartbeat)

    def node(self) -> dict[str, Any] | None:
        return self.view.peek((NODES_KEY, "", NODE_NAME))

    def ensure(self) -> None:
        """Create the Node (and its Lease) when missing, and report it Ready."""
        if self.node() is None:
            self.view.create(NODES_KEY, "", node_body())
        self._report(force=False)
        self._lease()

    def _report(self, force: bool) -> None:
        node = self.node()
        if node is None:
            return
        old = node.get("status") or {}
        status = node_status(old, clock.now_rfc3339())
        if not force and without_heartbeats(old) == without_heartbeats(status):
            return
        self.view.set_status((NODES_KEY, "", NODE_NAME), status)

    def _heartbeat(self) -> None:
        self._report(force=True)
        self.view.later(HEARTBEAT, self._heartbeat)

    def _renew_lease(self) -> None:
        self._lease()
        self.view.later(LEASE_RENEW, self._renew_lease)

    def _lease(self) -> None:
        node = self.node()
        if node is None:
            return
        now = renew_time()
        key = (LEASES_KEY, LEASE_NAMESPACE, NODE_NAME)
        if self.view.peek(key) is None:
            self.view.create(LEASES_KEY, LEASE_NAMESPACE, lease_body(objects.uid(node), now))
            return

        def renew(lease: dict[str, Any]) -> None:
            lease.setdefault("spec", {}).update(lease_spec(now))

        self.view.update(key, renew)

    def gone(self, obj: dict[str, Any]) -> None:
        """The Node was deleted: a kubelet registers it again."""
        if objects.name(obj) == NODE_NAME:
            self.view.soon("node", (NODES_KEY, "", NODE_NAME), self.ensure)

