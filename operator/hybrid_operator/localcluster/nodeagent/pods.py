"""The node agent as scheduler and kubelet: Pods get bound through ``pods/binding``, run, finish and go.

As the scheduler it takes the Pods no node was given whose ``schedulerName`` is ``default-scheduler``
and that no scheduling gate holds: a ``nodeSelector`` the Node's labels do not satisfy, a missing
claim or an unbound ``Immediate`` claim leaves the Pod Pending with PodScheduled False
(Unschedulable, kube-scheduler's message), and it is tried again when the Pod, the Node or the claim
changes; otherwise the Pod is bound to the node with a ``Binding`` (a server that does not serve that
subresource, as the embedded one, gets ``spec.nodeName`` patched instead: kube-apiserver refuses that
patch, so it is never tried where ``pods/binding`` exists).

As the kubelet it runs the Pods bound to its node with :mod:`..simnode.podstatus`'s statuses, as the
embedded kubelet does (Running with an IP from the pod CIDR, Succeeded after
:data:`~..simnode.podstatus.RUN_SECONDS` for restartPolicy Never/OnFailure); ``qosClass`` stays what
the API server computed. A Pod marked for deletion is deleted for good (``gracePeriodSeconds: 0`` and
a uid precondition) as a kubelet confirms the end of a Pod whose containers stopped: without that no
Pod bound to a node ever goes, and no namespace holding one finishes terminating.
"""

from __future__ import annotations

import logging
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.nodeagent.client import ApiError
from hybrid_operator.localcluster.nodeagent.context import CONFLICT, GONE, AgentContext, pod_path, tolerating
from hybrid_operator.localcluster.nodeagent.storage import Provisioner
from hybrid_operator.localcluster.simnode.node import HOST_IP, NODE_NAME, POD_CIDR
from hybrid_operator.localcluster.simnode.podstatus import (
    FINISHED,
    RUN_SECONDS,
    SELECTOR_MISMATCH,
    AddressPool,
    fits,
    needs_unschedulable_report,
    phase,
    restart_policy,
    running_status,
    succeeded_status,
    unschedulable_status,
)

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
METHOD_NOT_ALLOWED = 405
RETRY_FINISH = 0.2


def _ours(pod: dict[str, Any]) -> bool:
    return bool(objects.dig(pod, "spec", "nodeName") == NODE_NAME)


def _schedulable(pod: dict[str, Any]) -> bool:
    """Whether this scheduler should place the Pod: no node yet, the default scheduler's, not gated, not going."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or spec.get("schedulingGates") or objects.deleting(pod):
        return False
    return (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER


class PodRunner:
    """Schedules Pods onto the node and runs the ones bound to it."""

    def __init__(self, context: AgentContext, storage: Provisioner) -> None:
        self.context = context
        self.storage = storage
        self.addresses = AddressPool(POD_CIDR)
        self._ips: dict[str, str] = {}  # pod uid -> its IP (the cache may not show a status just written)
        self._finishing: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid of a Pod that will exit

    # -- what the caches say -------------------------------------------------------------------

    def seen(self, pod: dict[str, Any]) -> None:
        """Note the IP a Pod of this node already has (at start: before any new Pod gets one)."""
        ip = objects.dig(pod, "status", "podIP")
        if _ours(pod) and isinstance(ip, str) and ip and not objects.dig(pod, "spec", "hostNetwork"):
            self.addresses.claim(ip, objects.uid(pod))
            self._ips.setdefault(objects.uid(pod), ip)

    def gone(self, pod: dict[str, Any]) -> None:
        uid = objects.uid(pod)
        ip = self._ips.pop(uid, None) or objects.dig(pod, "status", "podIP")
        if isinstance(ip, str) and ip:
            self.addresses.release(ip, uid)

    def unscheduled(self) -> list[dict[str, Any]]:
        return [pod for pod in self.context.pods.values() if _schedulable(pod)]

    # -- syncs ---------------------------------------------------------------------------------

    async def sync(self, namespace: str, name: str) -> None:
        pod = self.context.pods.get(namespace, name)
        if pod is None:
            return
        if _schedulable(pod):
            await self._schedule(pod)
        elif _ours(pod):
            await self._run(pod)

    async def _schedule(self, pod: dict[str, Any]) -> None:
        if not fits(pod, self.context.node_labels()):
            await self._unschedulable(pod, SELECTOR_MISMATCH)
            return
        verdict, message = await self.storage.verdict(pod)
        if verdict == "unschedulable":
            await self._unschedulable(pod, message)
        elif verdict == "ready":
            await self._bind(pod)

    async def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        if needs_unschedulable_report(pod, message):
            status = unschedulable_status(pod, clock.now_rfc3339(), message)
            await self._write_status(pod, status)

    async def _bind(self, pod: dict[str, Any]) -> None:
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": objects.name(pod), "namespace": objects.namespace(pod),
                                "uid": objects.uid(pod)},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME}}
        try:
            await self.context.client.create(pod_path(pod, "binding"), binding)
        except ApiError as refused:
            if refused.status == CONFLICT:  # bound meanwhile
                return
            if refused.status not in (GONE, METHOD_NOT_ALLOWED):
                raise
            if await tolerating((GONE,), self.context.client.get(pod_path(pod))) is None:
                return  # the Pod went
            # the Pod is there but pods/binding is not (the embedded cluster serves no such subresource)
            await tolerating((GONE, CONFLICT), self.context.client.merge_patch(pod_path(pod), {
                "metadata": {"uid": objects.uid(pod)}, "spec": {"nodeName": NODE_NAME}}))
        log.info("pod scheduled", extra={"namespace": objects.namespace(pod), "pod": objects.name(pod),
                                         "node": NODE_NAME})

    async def _run(self, pod: dict[str, Any]) -> None:
        if objects.deleting(pod):
            await self._confirm_deletion(pod)
            return
        current = phase(pod)
        if current in FINISHED:
            return
        if current != "Running":
            await self._write_status(pod, running_status(pod, self._ip(pod), clock.now_rfc3339()))
        key = (objects.namespace(pod), objects.name(pod))
        if restart_policy(pod) != "Always" and self._finishing.get(key) != objects.uid(pod):
            self._finishing[key] = objects.uid(pod)
            self.context.queue.later(RUN_SECONDS, ("finish", *key))

    def _ip(self, pod: dict[str, Any]) -> str:
        if objects.dig(pod, "spec", "hostNetwork"):
            return HOST_IP
        uid = objects.uid(pod)
        if uid not in self._ips:
            self._ips[uid] = self.addresses.take(uid)
        return self._ips[uid]

    async def finish(self, namespace: str, name: str) -> None:
        """RUN_SECONDS after a Never/OnFailure Pod started: its containers exit 0."""
        uid = self._finishing.get((namespace, name))
        pod = self.context.pods.get(namespace, name)
        if uid is None or pod is None or objects.uid(pod) != uid or objects.deleting(pod):
            self._finishing.pop((namespace, name), None)
            return
        if phase(pod) == "Pending":  # the Running status is written, not yet seen: a moment more
            self.context.queue.later(RETRY_FINISH, ("finish", namespace, name))
            return
        del self._finishing[(namespace, name)]
        if phase(pod) == "Running":
            await self._write_status(pod, succeeded_status(pod, clock.now_rfc3339()))

    async def _write_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        """Patch the Pod's status, for this Pod only (a uid precondition); qosClass as the server computed it."""
        stored = objects.dig(pod, "status", "qosClass")
        if stored:
            status["qosClass"] = stored
        await tolerating((GONE,), self.context.client.merge_patch(
            pod_path(pod, "status"), {"metadata": {"uid": objects.uid(pod)}, "status": status}))

    async def _confirm_deletion(self, pod: dict[str, Any]) -> None:
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "preconditions": {"uid": objects.uid(pod)}}
        if await tolerating((GONE, CONFLICT), self.context.client.delete(pod_path(pod), options)) is not None:
            log.info("pod deleted", extra={"namespace": objects.namespace(pod), "pod": objects.name(pod)})
