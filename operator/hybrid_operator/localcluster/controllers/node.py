"""The simulated node: one Node that is always Ready, as a healthy kubelet keeps it.

The Node carries what ``kubectl get/describe node`` and charts read: the
usual labels (hostname, os, arch, control-plane role), this machine's CPU and
memory as capacity and allocatable, room for 110 Pods, the pod CIDR, an
InternalIP and Hostname address, nodeInfo, and the kubelet's conditions
(Ready, no memory/disk/PID pressure).  Like the kubelet, it renews the node's
Lease in ``kube-node-lease`` every 10 seconds and the Ready heartbeat every
5 minutes.  It is created at start and recreated if deleted.
"""

from __future__ import annotations

import copy
import hashlib
import os
import platform
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import LEASES_KEY, NODES_KEY

NODE_NAME = "hybrid-node"
HOST_IP = "127.0.0.1"
POD_CIDR = "10.244.0.0/16"
KUBELET_VERSION = "v1.32.4"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
LEASE_RENEW = 10.0
HEARTBEAT = 300.0


def _memory_kib() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 8 * 1024 * 1024


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine or "amd64")


def node_labels() -> dict[str, str]:
    return {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": _arch(),
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": _arch(),
            "node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": ""}


def _resources() -> dict[str, str]:
    return {"cpu": str(os.cpu_count() or 2), "memory": f"{_memory_kib()}Ki", "pods": "110",
            "ephemeral-storage": "100Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}


def _node_info() -> dict[str, str]:
    machine_id = hashlib.sha256(NODE_NAME.encode()).hexdigest()[:32]
    return {"machineID": machine_id, "systemUUID": machine_id, "bootID": machine_id,
            "kernelVersion": platform.release(), "osImage": "hybrid-operator simulated node",
            "containerRuntimeVersion": "simulated://1.0.0", "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux", "architecture": _arch()}


def _conditions(heartbeat: str, since: dict[str, str]) -> list[dict[str, str]]:
    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": since.get(kind, heartbeat), "reason": reason, "message": message}

    return [
        condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]


def node_status(old: dict[str, Any], heartbeat: str) -> dict[str, Any]:
    """The Node's status, keeping the transition times already reported."""
    since = {str(c.get("type")): str(c.get("lastTransitionTime")) for c in old.get("conditions") or []
             if isinstance(c, dict) and c.get("status") == ("True" if c.get("type") == "Ready" else "False")}
    return {"capacity": _resources(), "allocatable": _resources(), "conditions": _conditions(heartbeat, since),
            "addresses": [{"type": "InternalIP", "address": HOST_IP}, {"type": "Hostname", "address": NODE_NAME}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}, "nodeInfo": _node_info(),
            "images": []}


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
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": NODE_NAME, "labels": node_labels(),
                                 "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                    "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]}}
            self.view.create(NODES_KEY, "", body)
        self._report(force=False)
        self._lease()

    def _report(self, force: bool) -> None:
        node = self.node()
        if node is None:
            return
        old = node.get("status") or {}
        status = node_status(old, clock.now_rfc3339())
        if not force and _without_heartbeats(old) == _without_heartbeats(status):
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
        now = clock.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
        key = (LEASES_KEY, LEASE_NAMESPACE, NODE_NAME)
        if self.view.peek(key) is None:
            self.view.create(LEASES_KEY, LEASE_NAMESPACE, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": NODE_NAME, "namespace": LEASE_NAMESPACE, "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Node", "name": NODE_NAME, "uid": objects.uid(node)}]},
                "spec": {"holderIdentity": NODE_NAME, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}})
            return

        def renew(lease: dict[str, Any]) -> None:
            lease.setdefault("spec", {}).update(holderIdentity=NODE_NAME, leaseDurationSeconds=LEASE_SECONDS,
                                                renewTime=now)

        self.view.update(key, renew)

    def gone(self, obj: dict[str, Any]) -> None:
        """The Node was deleted: a kubelet registers it again."""
        if objects.name(obj) == NODE_NAME:
            self.view.soon("node", (NODES_KEY, "", NODE_NAME), self.ensure)


def _without_heartbeats(status: dict[str, Any]) -> dict[str, Any]:
    trimmed = copy.deepcopy(status)
    for condition in trimmed.get("conditions") or []:
        if isinstance(condition, dict):
            condition.pop("lastHeartbeatTime", None)
    return trimmed

