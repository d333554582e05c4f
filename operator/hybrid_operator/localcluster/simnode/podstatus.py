"""What the simulated node's scheduler and kubelet write on a Pod, and the facts about a Pod they read.

No container runs, but a Pod goes through what clients watch for: bound to the node (a
``nodeSelector`` the node's labels do not satisfy leaves it Pending and Unschedulable, as kube does),
then Running with an IP from the pod CIDR (the node's IP for ``hostNetwork``), the node's hostIP, init
containers completed, every container running, ready and started, and the conditions
PodReadyToStartContainers, Initialized, Ready, ContainersReady and PodScheduled. A Pod whose
``restartPolicy`` is Never or OnFailure (Job Pods, ``helm test`` and hook Pods) then exits 0 after
:data:`RUN_SECONDS`: phase Succeeded, containers terminated with reason Completed.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.simnode.node import HOST_IP

RUN_SECONDS = 1.0
FINISHED = ("Succeeded", "Failed")
#: kube-scheduler's message when the one node does not match a Pod's nodeSelector
SELECTOR_MISMATCH = ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
                     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


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


def phase(pod: dict[str, Any]) -> str:
    return str(objects.dig(pod, "status", "phase") or "Pending")


def condition(pod: dict[str, Any], kind: str) -> bool:
    """Whether the Pod's condition ``kind`` is True."""
    conditions = objects.dig(pod, "status", "conditions")
    if not isinstance(conditions, list):
        return False
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True" for c in conditions)


def labels_match(labels: dict[str, Any], wanted: Any) -> bool:
    """Whether ``labels`` carry every key/value of the map ``wanted`` (a Service's selector)."""
    return isinstance(wanted, dict) and all(labels.get(key) == value for key, value in wanted.items())


def restart_policy(pod: dict[str, Any]) -> str:
    return str(objects.dig(pod, "spec", "restartPolicy") or "Always")


def fits(pod: dict[str, Any], node_labels: dict[str, Any]) -> bool:
    """Whether the Pod's ``nodeSelector`` lets it run on a node with ``node_labels`` (all the scheduler checks)."""
    selector = objects.dig(pod, "spec", "nodeSelector")
    return not (isinstance(selector, dict) and selector and not labels_match(node_labels, selector))


def claim_names(pod: dict[str, Any]) -> set[str]:
    """The PersistentVolumeClaims a Pod's volumes name (generic ephemeral volumes included)."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    names: set[str] = set()
    for volume in volumes if isinstance(volumes, list) else []:
        if not isinstance(volume, dict):
            continue
        claim = objects.dig(volume, "persistentVolumeClaim", "claimName")
        if isinstance(claim, str) and claim:
            names.add(claim)
        elif isinstance(volume.get("ephemeral"), dict):
            names.add(f"{objects.name(pod)}-{volume.get('name', '')}")
    return names


def normalised_image(image: str) -> str:
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
    image = normalised_image(str(container.get("image") or ""))
    repository = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    digest = "sha256:" + hashlib.sha256(image.encode()).hexdigest()
    return {"name": container.get("name", ""), "state": state, "lastState": {}, "ready": running,
            "restartCount": 0, "image": image, "imageID": f"{repository.split('@', 1)[0]}@{digest}",
            "containerID": _container_id(pod, str(container.get("name", ""))), "started": running}


def _containers(pod: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = objects.dig(pod, "spec", key)
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def qos_class(pod: dict[str, Any]) -> str:
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
        entry = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since or now}
        if reason:
            entry["reason"] = reason
        result.append(entry)
    return result


def running_status(pod: dict[str, Any], ip: str, now: str) -> dict[str, Any]:
    """What the kubelet reports for a Pod whose containers all run and are ready."""
    old = pod.get("status") or {}
    started = str(old.get("startTime") or now)
    status: dict[str, Any] = {
        "phase": "Running", "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": started, "qosClass": qos_class(pod),
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


def unschedulable_status(pod: dict[str, Any], now: str, message: str = SELECTOR_MISMATCH) -> dict[str, Any]:
    """Pending, with the PodScheduled condition False (Unschedulable) saying why."""
    old = pod.get("status") or {}
    conditions = _conditions(now, old, {"PodScheduled": ("False", "Unschedulable")})
    conditions[0]["message"] = message
    return {"phase": "Pending", "conditions": conditions, "qosClass": qos_class(pod)}


def needs_unschedulable_report(pod: dict[str, Any], message: str = SELECTOR_MISMATCH) -> bool:
    """Whether the Pod does not yet say it is Unschedulable for ``message``."""
    conditions = objects.dig(pod, "status", "conditions")
    if not isinstance(conditions, list):
        return True
    scheduled = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "PodScheduled"), None)
    return scheduled is None or scheduled.get("status") != "False" or scheduled.get("message") != message
