"""Endpoints and EndpointSlices of Services, and the ``default/kubernetes`` Service.

As kube-controller-manager's endpoints and endpointslice controllers do, a
Service with a selector gets an Endpoints object of its own name and one
EndpointSlice (``<service>-<random>``, labelled
``kubernetes.io/service-name``, owned by the Service) listing the Pods its
selector matches that have an IP: ready ones as ``addresses`` (slice
condition ready), the others as ``notReadyAddresses``, each with a
``targetRef`` to its Pod and the Service's ports resolved against the Pod's
container ports.  They follow the Pods as they come, become ready and go.
Services without a selector keep whatever Endpoints their users write.

Like kube-apiserver, the controllers also keep the ``kubernetes`` Service in
``default`` (ClusterIP :data:`KUBERNETES_IP`, port 443 named https) and its
Endpoints/EndpointSlice pointing at this server's own address and port.
With the simulated node, LoadBalancer Services get the node's address as
their load balancer ingress (as k3s's service load balancer does).
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.controllers import pods
from hybrid_operator.localcluster.controllers.index import Key
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import ENDPOINTS_KEY, ENDPOINTSLICES_KEY, PODS_KEY, SERVICES_KEY
from hybrid_operator.localcluster.simnode.node import HOST_IP

KUBERNETES_IP = "10.96.0.1"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"


def _selector(service: dict[str, Any]) -> dict[str, Any] | None:
    spec = service.get("spec") or {}
    selector = spec.get("selector")
    if spec.get("type") == "ExternalName" or not isinstance(selector, dict) or not selector:
        return None
    return selector


def _target_port(port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    """A Service port's targetPort on ``pod`` (a name resolves to the container port of that name)."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in objects.dig(pod, "spec", "containers") or []:
        for container_port in (container.get("ports") or []) if isinstance(container, dict) else []:
            if isinstance(container_port, dict) and container_port.get("name") == target:
                value = container_port.get("containerPort")
                return value if isinstance(value, int) else None
    return None


def _ports(service: dict[str, Any], pod: dict[str, Any]) -> list[dict[str, Any]]:
    ports = []
    for port in objects.dig(service, "spec", "ports") or []:
        if not isinstance(port, dict):
            continue
        number = _target_port(port, pod)
        if number is not None:
            entry: dict[str, Any] = {"name": port.get("name", ""), "port": number,
                                     "protocol": port.get("protocol", "TCP")}
            if port.get("appProtocol"):
                entry["appProtocol"] = port["appProtocol"]
            ports.append(entry)
    return ports


def _target_ref(pod: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Pod", "namespace": objects.namespace(pod), "name": objects.name(pod), "uid": objects.uid(pod)}


def _pod_ip(pod: dict[str, Any]) -> str:
    ip = objects.dig(pod, "status", "podIP")
    return ip if isinstance(ip, str) else ""


def endpoints_subsets(service: dict[str, Any], members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Endpoints subsets: Pods grouped by their resolved ports, addresses sorted by IP."""
    groups: dict[str, dict[str, Any]] = {}
    for pod in members:
        ports = [{k: v for k, v in p.items() if k != "name" or v} for p in _ports(service, pod)]
        subset = groups.setdefault(repr(ports), {"ports": ports})
        address: dict[str, Any] = {"ip": _pod_ip(pod), "targetRef": _target_ref(pod)}
        if objects.dig(pod, "spec", "nodeName"):
            address["nodeName"] = objects.dig(pod, "spec", "nodeName")
        subset.setdefault("addresses" if pods.ready(pod) else "notReadyAddresses", []).append(address)
    subsets = []
    for subset in groups.values():
        for field in ("addresses", "notReadyAddresses"):
            if field in subset:
                subset[field].sort(key=lambda a: tuple(int(part) for part in a["ip"].split(".")))
        if not subset["ports"]:
            del subset["ports"]
        subsets.append(dict(sorted(subset.items())))
    return subsets


def slice_endpoints(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for pod in sorted(members, key=objects.name):
        ready, deleting = pods.ready(pod), objects.deleting(pod)
        found.append({"addresses": [_pod_ip(pod)], "conditions": {"ready": ready, "serving": ready or (
            deleting and pods.phase(pod) == "Running"), "terminating": deleting},
            "nodeName": objects.dig(pod, "spec", "nodeName") or "", "targetRef": _target_ref(pod)})
    return found


def _member_facts(pod: dict[str, Any] | None) -> tuple[Any, ...]:
    """What about a Pod its Services' endpoints show (a change elsewhere needs no resync)."""
    if pod is None:
        return ()
    return (_pod_ip(pod), pods.ready(pod), objects.deleting(pod), pods.phase(pod),
            repr(objects.dig(pod, "spec", "containers")))


class EndpointsController:
    """Keeps each selecting Service's Endpoints and EndpointSlice in step with its Pods."""

    def __init__(self, view: ClusterView, load_balancers: bool) -> None:
        self.view = view
        self.load_balancers = load_balancers

    def sync(self, seen: dict[str, Any]) -> None:
        key = (SERVICES_KEY, objects.namespace(seen), objects.name(seen))
        service = self.view.peek(key)
        if service is None or objects.uid(service) != objects.uid(seen) or objects.deleting(service):
            return
        if self.load_balancers:
            self._load_balancer(key, service)
        selector = _selector(service)
        if selector is None or self.view.terminating(key[1]):
            return
        members = []
        for pod_key in self.view.index.of_kind(PODS_KEY, key[1]):
            pod = self.view.peek(pod_key)
            if pod is not None and _pod_ip(pod) and pods.phase(pod) not in pods.FINISHED \
                    and pods.labels_match(objects.labels(pod), selector):
                members.append(pod)
        self._write_endpoints(service, endpoints_subsets(service, members))
        ports = _ports(service, members[0]) if members else _ports(service, {})
        self._write_slice(service, slice_endpoints(members), ports)

    def _load_balancer(self, key: Key, service: dict[str, Any]) -> None:
        if objects.dig(service, "spec", "type") != "LoadBalancer":
            return
        wanted = {"ingress": [{"ip": HOST_IP, "ipMode": "VIP"}]}
        status = copy.deepcopy(service.get("status") or {})
        if status.get("loadBalancer") != wanted:
            status["loadBalancer"] = wanted
            self.view.set_status(key, status)

    def _write_endpoints(self, service: dict[str, Any], subsets: list[dict[str, Any]]) -> None:
        namespace, name = objects.namespace(service), objects.name(service)
        key = (ENDPOINTS_KEY, namespace, name)
        current = self.view.peek(key)
        labels = dict(objects.labels(service))
        if current is None:
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "Endpoints",
                                    "metadata": {"name": name, "namespace": namespace, "labels": labels}}
            if subsets:
                body["subsets"] = subsets
            self.view.create(ENDPOINTS_KEY, namespace, body)
        elif (current.get("subsets") or []) != subsets or objects.labels(current) != labels:
            def replace(fresh: dict[str, Any]) -> None:
                fresh["metadata"]["labels"] = labels
                if subsets:
                    fresh["subsets"] = subsets
                else:
                    fresh.pop("subsets", None)

            self.view.update(key, replace)

    def _write_slice(self, service: dict[str, Any], endpoints: list[dict[str, Any]],
                     ports: list[dict[str, Any]]) -> None:
        namespace, name = objects.namespace(service), objects.name(service)
        labels = {**objects.labels(service), SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY}
        owned = self.view.owned(ENDPOINTSLICES_KEY, objects.uid(service))
        if not owned:
            self.view.create(ENDPOINTSLICES_KEY, namespace, {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{name}-", "namespace": namespace, "labels": labels,
                             "ownerReferences": [pods.controller_ref(service)]},
                "addressType": "IPv4", "endpoints": endpoints, "ports": ports})
            return
        first = owned[0]
        if first.get("endpoints") != endpoints or first.get("ports") != ports or objects.labels(first) != labels:
            def replace(fresh: dict[str, Any]) -> None:
                fresh["metadata"]["labels"] = labels
                fresh.update(endpoints=endpoints, ports=ports)

            self.view.update((ENDPOINTSLICES_KEY, namespace, objects.name(first)), replace)
        for extra in owned[1:]:
            self.view.delete((ENDPOINTSLICES_KEY, namespace, objects.name(extra)))

    def service_gone(self, service: dict[str, Any]) -> None:
        """The Service went: so do its Endpoints (its EndpointSlices follow by garbage collection)."""
        if _selector(service) is not None:
            self.view.delete((ENDPOINTS_KEY, objects.namespace(service), objects.name(service)))

    def pod_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Resync the Services selecting the Pod before or after the change, if what they show changed."""
        if old is not None and new is not None and _member_facts(old) == _member_facts(new) \
                and objects.labels(old) == objects.labels(new):
            return
        namespace = objects.namespace(new or old or {})
        labels = [objects.labels(pod) for pod in (old, new) if pod is not None]
        for key in self.view.index.of_kind(SERVICES_KEY, namespace):
            service = self.view.peek(key)
            selector = _selector(service) if service is not None else None
            if service is not None and selector is not None \
                    and any(pods.labels_match(found, selector) for found in labels):
                self.view.soon("endpoints", key, self.sync, service)

    # -- the kubernetes Service ----------------------------------------------------------------

    def ensure_kubernetes(self, port: int) -> None:
        """The ``default/kubernetes`` Service and its endpoints, at this server's ``port``."""
        key = (SERVICES_KEY, "default", "kubernetes")
        if self.view.peek(key) is None:
            self.view.create(SERVICES_KEY, "default", {
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default",
                             "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"type": "ClusterIP", "clusterIP": KUBERNETES_IP, "clusterIPs": [KUBERNETES_IP],
                         "sessionAffinity": "None",
                         "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}})
        else:
            def retarget(service: dict[str, Any]) -> None:
                for entry in objects.dig(service, "spec", "ports") or []:
                    if isinstance(entry, dict) and entry.get("name") == "https":
                        entry["targetPort"] = port

            self.view.update(key, retarget)
        address = {"ip": HOST_IP}
        self._write_endpoints_for_server(address, port)

    def _write_endpoints_for_server(self, address: dict[str, Any], port: int) -> None:
        subsets = [{"addresses": [address], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
        service = self.view.peek((SERVICES_KEY, "default", "kubernetes"))
        if service is None:
            return
        self._write_endpoints(service, subsets)
        key = (ENDPOINTSLICES_KEY, "default", "kubernetes")
        body = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "kubernetes", "namespace": "default",
                             "labels": {SERVICE_NAME_LABEL: "kubernetes"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address["ip"]], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
        current = self.view.peek(key)
        if current is None:
            self.view.create(ENDPOINTSLICES_KEY, "default", body)
        elif current.get("ports") != body["ports"] or current.get("endpoints") != body["endpoints"]:
            def replace(fresh: dict[str, Any]) -> None:
                fresh.update(endpoints=body["endpoints"], ports=body["ports"])

            self.view.update(key, replace)
