"""The simulated Node as a kubelet registers and reports it, and its Lease in ``kube-node-lease``.

The Node carries what ``kubectl get/describe node`` and charts read: the usual labels (hostname, os,
arch, control-plane role), this machine's CPU and memory as capacity and allocatable, room for 110
Pods, the pod CIDR, an InternalIP and Hostname address, nodeInfo, and the kubelet's conditions (Ready,
no memory/disk/PID pressure). Like the kubelet, its owner renews the Lease every
:data:`LEASE_RENEW` seconds and the Ready heartbeat every :data:`HEARTBEAT` seconds.
"""

from __future__ import annotations

import copy
import hashlib
import os
import platform
from typing import Any

from hybrid_operator.localcluster import clock

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


def node_body() -> dict[str, Any]:
    """The Node a starting kubelet registers (its status is reported after, by :func:`node_status`)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE_NAME, "labels": node_labels(),
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]}}


def without_heartbeats(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` less its heartbeat times: what tells a change worth reporting from a mere heartbeat."""
    trimmed = copy.deepcopy(status)
    for condition in trimmed.get("conditions") or []:
        if isinstance(condition, dict):
            condition.pop("lastHeartbeatTime", None)
    return trimmed


def renew_time() -> str:
    """Now as a Lease's ``renewTime`` (a MicroTime: microseconds, ``Z``)."""
    return clock.now().isoformat(timespec="microseconds").replace("+00:00", "Z")


def lease_spec(now: str) -> dict[str, Any]:
    return {"holderIdentity": NODE_NAME, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}


def lease_body(node_uid: str, now: str) -> dict[str, Any]:
    """The node's Lease, owned by the Node (so it goes with it)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NODE_NAME, "namespace": LEASE_NAMESPACE, "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": NODE_NAME, "uid": node_uid}]},
            "spec": lease_spec(now)}
