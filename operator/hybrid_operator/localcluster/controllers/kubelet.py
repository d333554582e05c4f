"""The scheduler and the kubelet of the simulated node: Pods get bound, run, and (some) finish.

No container runs, but a Pod goes through what clients watch for: the
scheduler binds it to the node (``spec.nodeName``; a ``nodeSelector`` the
node's labels do not satisfy leaves it Pending and Unschedulable, as kube
does), then the kubelet reports it Running with an IP from the pod CIDR
(the node's IP for ``hostNetwork``), the node's hostIP, init containers
completed, every container running, ready and started, and the conditions
PodReadyToStartContainers, Initialized, Ready, ContainersReady and
PodScheduled.  A Pod whose ``restartPolicy`` is Never or OnFailure (Job Pods,
``helm test`` and hook Pods) then exits 0 after :data:`RUN_SECONDS`: phase
Succeeded, containers terminated with reason Completed.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.node import HOST_IP, NODE_NAME, POD_CIDR, node_labels
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import PODS_KEY

RUN_SECONDS = 1.0


class AddressPool:
    """Pod IPs from the pod CIDR, handed out lowest-free-first from a moving cursor."""

    def __init__(self, cidr: str) -> None:
        network = ipaddress.IPv4Network(cidr)
        self._first = int(network.network_address) + 2  # .1 is the node's bridge
        self._size = network.num_addresses - 3
        self._cursor = 0
        self._owner: dict[str, str] = {}  # ip -> pod uid

    def claim(self, ip: str, uid: str) -> None:
        self._owner.setdefault(ip, uid)

    def take(self, uid: str) -> str:
        for step in range(self._size):
            candidate = str(ipaddress.IPv4Address(self._first + (self._cursor + step) % self._size))
            if candidate not in self._owner:
                self._cursor = (self._cursor + step + 1) % self._size
                self._owner[candidate] = uid
                return candidate
        raise RuntimeError("the pod CIDR is full")

    def release(self, ip: str, uid: str) -> None:
        if self._owner.get(ip) == uid:
            del self._owner[ip]


def _image(image: str) -> str:
    """An image reference as containerd reports it (``nginx`` -> ``docker.io/library/nginx:latest``)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and not digest:
        name += ":latest"
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return f"{name}@{digest}" if digest else name


def _container_id(pod: dict[str, Any], container: str) -> str:
    return "containerd://" + hashlib.sha256(f"{objects.uid(pod)}/{container}".encode()).hexdigest()


def _container_status(pod: dict[str, Any], container: dict[str, Any], state: dict[str, Any],
                      running: bool) -> dict[str, Any]:
    image = _image(str(container.get("image") or ""))
    repository = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    digest = "sha256:" + hashlib.sha256(image.encode()).hexdigest()
    return {"name": container.get("name", ""), "state": state, "lastState": {}, "ready": running,
            "restartCount": 0, "image": image, "imageID": f"{repository.split('@', 1)[0]}@{digest}",
            "containerID": _container_id(pod, str(container.get("name", ""))), "started": running}


def _containers(pod: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = objects.dig(pod, "spec", key)
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _qos(pod: dict[str, Any]) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits (roughly as kube)."""
    containers = _containers(pod, "containers") + _containers(pod, "initContainers")
    resources: list[dict[str, Any]] = [c["resources"] if isinstance(c.get("resources"), dict) else {}
                                       for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(isinstance(r.get("limits"), dict) and {"cpu", "memory"} <= set(r["limits"])
                     and all((r.get("requests") or {}).get(k, v) == v for k, v in r["limits"].items())
                     for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def _conditions(now: str, old: dict[str, Any], states: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """Pod conditions ``type -> (status, reason)``, keeping transition times that did not change."""
    previous = {str(c.get("type")): c for c in old.get("conditions") or [] if isinstance(c, dict)}
    result = []
    for kind, (status, reason) in states.items():
        before = previous.get(kind, {})
        since = before.get("lastTransitionTime") if before.get("status") == status else now
        condition = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since or now}
        if reason:
            condition["reason"] = reason
        result.append(condition)
    return result


def running_status(pod: dict[str, Any], ip: str, now: str) -> dict[str, Any]:
    """What the kubelet reports for a Pod whose containers all run and are ready."""
    old = pod.get("status") or {}
    started = str(old.get("startTime") or now)
    status: dict[str, Any] = {
        "phase": "Running", "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": started, "qosClass": _qos(pod),
        "conditions": _conditions(now, old, {
            "PodReadyToStartContainers": ("True", ""), "Initialized": ("True", ""), "Ready": ("True", ""),
            "ContainersReady": ("True", ""), "PodScheduled": ("True", "")}),
        "containerStatuses": sorted((_container_status(pod, c, {"running": {"startedAt": started}}, True)
                                     for c in _containers(pod, "containers")), key=lambda s: str(s["name"])),
    }
    inits = _containers(pod, "initContainers")
    if inits:
        status["initContainerStatuses"] = [
            _container_status(pod, c, {"terminated": _terminated(pod, c, started, started)}, False)
            for c in inits]
    return status


def _terminated(pod: dict[str, Any], container: dict[str, Any], started: str, finished: str) -> dict[str, Any]:
    return {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": finished,
            "containerID": _container_id(pod, str(container.get("name", "")))}


def succeeded_status(pod: dict[str, Any], now: str) -> dict[str, Any]:
    """What the kubelet reports once every container exited 0."""
    old = pod.get("status") or {}
    started = str(old.get("startTime") or now)
    status = copy.deepcopy(old)
    status["phase"] = "Succeeded"
    status["conditions"] = _conditions(now, old, {
        "PodReadyToStartContainers": ("False", ""), "Initialized": ("True", "PodCompleted"),
        "Ready": ("False", "PodCompleted"), "ContainersReady": ("False", "PodCompleted"),
        "PodScheduled": ("True", "")})
    status["containerStatuses"] = sorted(
        (_container_status(pod, c, {"terminated": _terminated(pod, c, started, now)}, False)
         for c in _containers(pod, "containers")), key=lambda s: str(s["name"]))
    return status


def unschedulable_status(pod: dict[str, Any], now: str) -> dict[str, Any]:
    old = pod.get("status") or {}
    conditions = _conditions(now, old, {"PodScheduled": ("False", "Unschedulable")})
    conditions[0]["message"] = ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
                                "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    return {"phase": "Pending", "conditions": conditions, "qosClass": _qos(pod)}


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
        selector = objects.dig(pod, "spec", "nodeSelector")
        if isinstance(selector, dict) and selector and not pods.labels_match(self._labels, selector):
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
