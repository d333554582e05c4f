"""The embedded cluster's scheduler and kubelet of the simulated node: Pods get bound, run, and (some) finish.

What a Pod goes through, and every status written, is :mod:`..simnode.podstatus`'s: bound to the node
unless its ``nodeSelector`` does not match (Pending and Unschedulable), then Running with an IP from
the pod CIDR, and, for ``restartPolicy`` Never or OnFailure, Succeeded after
:data:`~..simnode.podstatus.RUN_SECONDS`.  The node agent (:mod:`..nodeagent`) does the same over HTTP
for any other API server.
"""

from __future__ import annotations

from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import PODS_KEY
from hybrid_operator.localcluster.simnode.node import HOST_IP, NODE_NAME, POD_CIDR, node_labels
from hybrid_operator.localcluster.simnode.podstatus import (
    RUN_SECONDS,
    AddressPool,
    fits,
    running_status,
    succeeded_status,
    unschedulable_status,
)


class Kubelet:
    """Binds Pods to the simulated node and reports them running (or finished)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.addresses = AddressPool(POD_CIDR)
        self._labels = node_labels()
        self._finishing: set[str] = set()

    def prime(self) -> None:
        """Start-up: take note of the IPs the stored Pods already have, before any new one gets one."""
        for key in self.view.index.of_kind(PODS_KEY):
            pod = self.view.peek(key)
            ip = objects.dig(pod, "status", "podIP") if pod is not None else None
            if pod is not None and isinstance(ip, str) and ip and not objects.dig(pod, "spec", "hostNetwork"):
                self.addresses.claim(ip, objects.uid(pod))

    def sync(self, seen: dict[str, Any]) -> None:
        key = (PODS_KEY, objects.namespace(seen), objects.name(seen))
        pod = self.view.peek(key)
        if pod is None or objects.uid(pod) != objects.uid(seen) or objects.deleting(pod):
            return
        node = objects.dig(pod, "spec", "nodeName")
        if not node:
            self._schedule(key, pod)
        elif node == NODE_NAME:
            self._run(key, pod)

    def _schedule(self, key: Key, pod: dict[str, Any]) -> None:
        if not fits(pod, self._labels):
            if pods.condition(pod, "PodScheduled") or objects.dig(pod, "status", "conditions") is None:
                self.view.set_status(key, unschedulable_status(pod, clock.now_rfc3339()))
            return

        def bind(current: dict[str, Any]) -> None:
            current.setdefault("spec", {})["nodeName"] = NODE_NAME

        self.view.update(key, bind)
        bound = self.view.peek(key)
        if bound is not None and objects.dig(bound, "spec", "nodeName") == NODE_NAME:
            self._run(key, bound)

    def _run(self, key: Key, pod: dict[str, Any]) -> None:
        phase = pods.phase(pod)
        if phase in pods.FINISHED:
            return
        if phase != "Running":
            ip = HOST_IP if objects.dig(pod, "spec", "hostNetwork") else self.addresses.take(objects.uid(pod))
            self.view.set_status(key, running_status(pod, ip, clock.now_rfc3339()))
        if pods.restart_policy(pod) != "Always" and objects.uid(pod) not in self._finishing:
            self._finishing.add(objects.uid(pod))
            self.view.later(RUN_SECONDS, self._finish, key, objects.uid(pod))

    def _finish(self, key: Key, uid: str) -> None:
        self._finishing.discard(uid)
        pod = self.view.peek(key)
        if pod is None or objects.uid(pod) != uid or objects.deleting(pod) or pods.phase(pod) != "Running":
            return
        self.view.set_status(key, succeeded_status(pod, clock.now_rfc3339()))

    def gone(self, pod: dict[str, Any]) -> None:
        ip = objects.dig(pod, "status", "podIP")
        if isinstance(ip, str) and ip:
            self.addresses.release(ip, objects.uid(pod))
