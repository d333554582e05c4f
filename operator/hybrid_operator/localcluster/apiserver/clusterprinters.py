"""Printers of the kinds the simulated node brings to life: Nodes, volumes, storage classes, endpoints.

Same shape as :mod:`.printers` (columns plus a cell function, as
kube-apiserver's printers): ``kubectl get nodes`` shows STATUS Ready, ROLES
and VERSION, ``get pv`` the claim and reclaim policy, ``get sc`` the default
class, ``get endpoints``/``endpointslices`` the addresses.  Kinds not here
fall back to :func:`.printers.builtin_printer`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.apiserver.printers import AGE, NAME, Cells, Column, Obj, Printer, builtin_printer

ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
SHOWN_ADDRESSES = 3


def _text(obj: Any, *path: str) -> str:
    value = objects.dig(obj, *path)
    return "" if value is None or isinstance(value, (dict, list)) else str(value)


def _items(obj: Any, *path: str) -> list[Any]:
    value = objects.dig(obj, *path)
    return value if isinstance(value, list) else []


def _age(obj: Obj, now: datetime) -> str:
    return clock.since(objects.dig(obj, "metadata", "creationTimestamp"), now)


def _shortened(entries: list[str]) -> str:
    if not entries:
        return "<none>"
    shown = ",".join(entries[:SHOWN_ADDRESSES])
    more = len(entries) - SHOWN_ADDRESSES
    return f"{shown} + {more} more..." if more > 0 else shown


def _node(obj: Obj, now: datetime) -> Cells:
    ready = next((c for c in _items(obj, "status", "conditions") if isinstance(c, dict) and c.get("type") == "Ready"),
                 {})
    status = "Ready" if ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if objects.dig(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(key.split("/", 1)[1] for key in objects.labels(obj) if key.startswith("node-role.kubernetes.io/"))
    addresses = {str(a.get("type")): str(a.get("address")) for a in _items(obj, "status", "addresses")
                 if isinstance(a, dict)}
    info = objects.dig(obj, "status", "nodeInfo") or {}
    return [objects.name(obj), status, ",".join(roles) or "<none>", _age(obj, now), _text(info, "kubeletVersion"),
            addresses.get("InternalIP", "<none>"), addresses.get("ExternalIP", "<none>"), _text(info, "osImage"),
            _text(info, "kernelVersion"), _text(info, "containerRuntimeVersion")]


def _volume(obj: Obj, now: datetime) -> Cells:
    modes = ",".join(ACCESS_MODES.get(str(m), str(m)) for m in _items(obj, "spec", "accessModes"))
    ref = objects.dig(obj, "spec", "claimRef")
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if isinstance(ref, dict) else ""
    return [objects.name(obj), _text(obj, "spec", "capacity", "storage"), modes,
            _text(obj, "spec", "persistentVolumeReclaimPolicy"), _text(obj, "status", "phase"), claim,
            _text(obj, "spec", "storageClassName"), _text(obj, "spec", "volumeAttributesClassName") or "<unset>",
            _text(obj, "status", "reason"), _age(obj, now), _text(obj, "spec", "volumeMode") or "Filesystem"]


def _storage_class(obj: Obj, now: datetime) -> Cells:
    default = (objects.meta(obj).get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class")
    name = f"{objects.name(obj)} (default)" if default == "true" else objects.name(obj)
    expansion = obj.get("allowVolumeExpansion") is True
    return [name, _text(obj, "provisioner"), _text(obj, "reclaimPolicy") or "Delete",
            _text(obj, "volumeBindingMode") or "Immediate", str(expansion).lower(), _age(obj, now)]


def _endpoints(obj: Obj, now: datetime) -> Cells:
    entries: list[str] = []
    for subset in _items(obj, "subsets"):
        if not isinstance(subset, dict):
            continue
        ports = [p["port"] for p in subset.get("ports") or [] if isinstance(p, dict) and p.get("port") is not None]
        for address in subset.get("addresses") or []:
            ip = str(address.get("ip", "")) if isinstance(address, dict) else ""
            entries.extend([f"{ip}:{port}" for port in ports] or [ip])
    return [objects.name(obj), _shortened(entries), _age(obj, now)]


def _endpoint_slice(obj: Obj, now: datetime) -> Cells:
    ports = [str(p.get("port")) for p in _items(obj, "ports") if isinstance(p, dict) and p.get("port") is not None]
    addresses = [str(a) for e in _items(obj, "endpoints") if isinstance(e, dict) for a in e.get("addresses") or []]
    return [objects.name(obj), _text(obj, "addressType"), ",".join(ports) or "<unset>", _shortened(addresses),
            _age(obj, now)]


def _column(name: str, description: str, priority: int = 0) -> Column:
    return Column(name, description=description, priority=priority)


_PRINTERS: dict[str, Printer] = {
    "Node": ([NAME, _column("Status", "The status of the node"), _column("Roles", "The roles of the node"), AGE,
              _column("Version", "Kubelet Version reported by the node."),
              _column("Internal-IP", "List of internal IPs for the node.", 1),
              _column("External-IP", "List of external IPs for the node.", 1),
              _column("OS-Image", "OS Image reported by the node.", 1),
              _column("Kernel-Version", "Kernel Version reported by the node.", 1),
              _column("Container-Runtime", "Container Runtime Version reported by the node.", 1)], _node),
    "PersistentVolume": ([NAME, _column("Capacity", "Capacity of the volume."),
                          _column("Access Modes", "Access modes of the volume."),
                          _column("Reclaim Policy", "What happens to the volume when its claim goes."),
                          _column("Status", "Phase of the volume."), _column("Claim", "The bound claim."),
                          _column("StorageClass", "Storage class of the volume."),
                          _column("VolumeAttributesClass", "Volume attributes class of the volume."),
                          _column("Reason", "Why the volume is in its phase."), AGE,
                          _column("VolumeMode", "Volume mode of the volume.", 1)], _volume),
    "StorageClass": ([NAME, _column("Provisioner", "Provisioner of the class."),
                      _column("ReclaimPolicy", "Reclaim policy of its volumes."),
                      _column("VolumeBindingMode", "When claims are bound."),
                      _column("AllowVolumeExpansion", "Whether claims may grow."), AGE], _storage_class),
    "Endpoints": ([NAME, _column("Endpoints", "Endpoints of the service."), AGE], _endpoints),
    "EndpointSlice": ([NAME, _column("AddressType", "Type of the addresses."), _column("Ports", "Ports."),
                       _column("Endpoints", "Addresses of the endpoints."), AGE], _endpoint_slice),
}


def printer_for(kind: str) -> Printer:
    """The printer of a built-in kind: one of these, or one of :mod:`.printers`."""
    return _PRINTERS.get(kind) or builtin_printer(kind)
