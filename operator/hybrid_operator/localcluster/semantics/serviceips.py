"""Service cluster IPs and node ports, allocated as kube-apiserver's Service REST storage does.

Cluster IPs come from :data:`SERVICE_CIDR` (10.96.0.0/12, kubeadm's and
kind's default); automatic ones from above the range's lower band (the
first 256 addresses are left to Services that ask for an address, as kube
does), so ``10.96.0.1`` (the ``kubernetes`` Service) and ``10.96.0.10``
(cluster DNS, by convention) stay free for them.  A requested ``clusterIP``
is honoured if it is in the range and free, else the create is 422 Invalid;
``None`` makes a headless Service; ExternalName Services get none.
NodePort and LoadBalancer Services get a ``nodePort`` per port from
30000-32767 (and a ``healthCheckNodePort`` with ``externalTrafficPolicy:
Local``); a requested one must be in range and free.  An update keeps the
addresses and ports already allocated when the client leaves them out.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable
from typing import Any

from hybrid_operator.localcluster import errors, objects

SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
STATIC_BAND = 256
NODE_PORTS = range(30000, 32768)
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def _invalid(obj: dict[str, Any], field: str, message: str) -> errors.ApiError:
    return errors.invalid("Service", "", objects.name(obj), [
        {"reason": "FieldValueInvalid", "field": field, "message": message}])


def _used(services: Iterable[dict[str, Any]], skip_uid: str = "") -> tuple[set[str], set[int]]:
    """Cluster IPs and node ports taken by ``services`` (except the one with ``skip_uid``)."""
    ips: set[str] = set()
    ports: set[int] = set()
    for service in services:
        if skip_uid and objects.uid(service) == skip_uid:
            continue
        spec = service.get("spec") or {}
        ips.update(str(ip) for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip)
        ports.update(p["nodePort"] for p in spec.get("ports") or [] if isinstance(p, dict)
                     and isinstance(p.get("nodePort"), int))
        if isinstance(spec.get("healthCheckNodePort"), int):
            ports.add(spec["healthCheckNodePort"])
    return ips, ports


def allocate_cluster_ip(used: set[str]) -> str:
    """The lowest free address above the static band (a 500 ``ApiError`` when the range is full)."""
    first = int(SERVICE_CIDR.network_address) + STATIC_BAND
    last = int(SERVICE_CIDR.broadcast_address) - 1
    for number in range(first, last + 1):
        candidate = str(ipaddress.IPv4Address(number))
        if candidate not in used:
            return candidate
    raise errors.internal("failed to allocate a serviceIP: range is full")


def _requested_ip(obj: dict[str, Any], ip: str, used: set[str]) -> None:
    field = "spec.clusterIPs"
    try:
        address = ipaddress.IPv4Address(ip)
    except ValueError as exc:
        raise _invalid(obj, field, f'Invalid value: ["{ip}"]: must be a valid IP address') from exc
    if address not in SERVICE_CIDR or address in (SERVICE_CIDR.network_address, SERVICE_CIDR.broadcast_address):
        raise _invalid(obj, field, f'Invalid value: ["{ip}"]: failed to allocate IP {ip}: the provided IP ({ip}) '
                                   f"is not in the valid range. The range of valid IPs is {SERVICE_CIDR}")
    if ip in used:
        raise _invalid(obj, field, f'Invalid value: ["{ip}"]: failed to allocate IP {ip}: '
                                   "provided IP is already allocated")


def _node_port(obj: dict[str, Any], field: str, value: Any, used: set[int]) -> int:
    if value in (None, 0):
        free = [port for port in NODE_PORTS if port not in used]
        if not free:
            raise errors.internal("failed to allocate a nodePort: range is full")
        return random.choice(free)
    if not isinstance(value, int) or value not in NODE_PORTS:
        raise _invalid(obj, field, f"Invalid value: {value}: provided port is not in the valid range. "
                                   f"The range of valid ports is {NODE_PORTS.start}-{NODE_PORTS.stop - 1}")
    if value in used:
        raise _invalid(obj, field, f"Invalid value: {value}: provided port is already allocated")
    return value


def _allocate_ports(obj: dict[str, Any], spec: dict[str, Any], used: set[int], keep: list[Any]) -> None:
    """Node ports for each port (``keep``: the ports the stored Service had, to reuse)."""
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in keep if isinstance(p, dict)}
    for index, port in enumerate(spec.get("ports") or []):
        if not isinstance(port, dict):
            continue
        previous = old_ports.get((port.get("port"), port.get("protocol", "TCP")))
        if port.get("nodePort") in (None, 0) and previous:
            port["nodePort"] = previous
            continue
        if port.get("nodePort") == previous and previous:
            continue
        port["nodePort"] = _node_port(obj, f"spec.ports[{index}].nodePort", port.get("nodePort"), used)
        used.add(port["nodePort"])
    local = spec.get("externalTrafficPolicy") == "Local" and spec.get("type") == "LoadBalancer"
    if local and spec.get("healthCheckNodePort") in (None, 0):
        spec["healthCheckNodePort"] = _node_port(obj, "spec.healthCheckNodePort", None, used)


def _drop_node_ports(spec: dict[str, Any]) -> None:
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.pop("nodePort", None)
    spec.pop("healthCheckNodePort", None)


def allocate_on_create(services: Iterable[dict[str, Any]], obj: dict[str, Any]) -> None:
    """Give a new Service its cluster IP and node ports (422 for a requested one that is taken)."""
    spec = obj.setdefault("spec", {})
    service_type = spec.get("type", "ClusterIP")
    used_ips, used_ports = _used(services)
    if service_type == "ExternalName":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
        return
    requested = spec.get("clusterIP") or next(iter(spec.get("clusterIPs") or []), "")
    if requested == "None":
        spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
    else:
        if requested:
            _requested_ip(obj, str(requested), used_ips)
        ip = str(requested) if requested else allocate_cluster_ip(used_ips)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
    if service_type in NODE_PORT_TYPES:
        _allocate_ports(obj, spec, used_ports, [])
    else:
        _drop_node_ports(spec)


def keep_on_update(services: Iterable[dict[str, Any]], old: dict[str, Any], new: dict[str, Any]) -> None:
    """An updated Service keeps its allocations when the client left them out, and gets new node ports
    when it becomes a NodePort or LoadBalancer Service."""
    spec = new.setdefault("spec", {})
    old_spec = old.get("spec") or {}
    if spec.get("type", "ClusterIP") != "ExternalName" and not spec.get("clusterIP") and old_spec.get("clusterIP"):
        spec["clusterIP"] = old_spec["clusterIP"]
        spec["clusterIPs"] = old_spec.get("clusterIPs", [old_spec["clusterIP"]])
    if spec.get("type", "ClusterIP") in NODE_PORT_TYPES:
        _, used_ports = _used(services, skip_uid=objects.uid(old))
        keep = old_spec.get("ports") or [] if old_spec.get("type") in NODE_PORT_TYPES else []
        if not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
        _allocate_ports(new, spec, used_ports, keep)
    elif old_spec.get("type") in NODE_PORT_TYPES:
        _drop_node_ports(spec)
