"""Services on the embedded cluster: cluster IPs and node ports from kube's ranges, endpoints of ready Pods.

Why this exists: charts read `spec.clusterIP` and NodePorts, operators and tests look up a
Service's Endpoints/EndpointSlices to find its Pods, and a taken IP or port must be refused as
kube refuses it.  These tests drive kubectl and the kubernetes Python client against the server.
"""

from __future__ import annotations

import ipaddress
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from support.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def ns(shared_cluster: Cluster) -> str:
    name = f"svc-{uuid.uuid4().hex[:8]}"
    shared_cluster.kubectl("create", "namespace", name)
    return name


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)
    return result


def apply(cluster: Cluster, namespace: str, *docs: dict[str, Any], check: bool = True) -> Any:
    return cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(docs), check=check)


def service(name: str, selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": "http"}], **spec}
    if selector is not None:
        body["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 8080}]}]}}}}


def test_cluster_ips_and_node_ports_come_from_kubes_ranges(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, service("plain"), service("headless", clusterIP="None"),
          service("exposed", type="NodePort"), service("balanced", type="LoadBalancer"))
    plain = shared_cluster.get_json("service", "plain", "-n", ns)["spec"]
    assert ipaddress.IPv4Address(plain["clusterIP"]) in ipaddress.IPv4Network("10.96.0.0/12")
    assert plain["clusterIPs"] == [plain["clusterIP"]]
    assert shared_cluster.get_json("service", "headless", "-n", ns)["spec"]["clusterIP"] == "None"
    exposed = shared_cluster.get_json("service", "exposed", "-n", ns)["spec"]
    assert 30000 <= exposed["ports"][0]["nodePort"] <= 32767
    balanced = shared_cluster.get_json("service", "balanced", "-n", ns)
    assert 30000 <= balanced["spec"]["ports"][0]["nodePort"] <= 32767
    wait_until("a load balancer address", lambda: shared_cluster.get_json("service", "balanced", "-n", ns)
               ["status"]["loadBalancer"].get("ingress"))

    apply(shared_cluster, ns, service("exposed", type="NodePort"))  # re-apply without the port: kept
    again = shared_cluster.get_json("service", "exposed", "-n", ns)["spec"]
    assert again["ports"][0]["nodePort"] == exposed["ports"][0]["nodePort"]
    assert again["clusterIP"] == exposed["clusterIP"]


def test_taken_addresses_and_ports_are_refused(shared_cluster: Cluster, ns: str) -> None:
    taken = shared_cluster.get_json("service", "kubernetes", "-n", "default")["spec"]["clusterIP"]
    refused = apply(shared_cluster, ns, service("copy", clusterIP=taken), check=False)
    assert refused.returncode != 0
    assert f"failed to allocate IP {taken}: provided IP is already allocated" in refused.stderr
    port = {"name": "http", "port": 80, "nodePort": 31234}
    apply(shared_cluster, ns, service("first", type="NodePort", ports=[port]))
    refused = apply(shared_cluster, ns, service("second", type="NodePort", ports=[port]), check=False)
    assert "spec.ports[0].nodePort: Invalid value: 31234: provided port is already allocated" in refused.stderr


def test_endpoints_follow_the_ready_pods(shared_cluster: Cluster, ns: str) -> None:
    apply(shared_cluster, ns, service("web", {"app": "web"}), deployment("web", 2))
    shared_cluster.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=30s")

    def addresses() -> list[str]:
        endpoints = shared_cluster.get_json("endpoints", "web", "-n", ns)
        return sorted(a["ip"] for subset in endpoints.get("subsets", []) for a in subset.get("addresses", []))

    pods = shared_cluster.get_json("pods", "-n", ns, "-l", "app=web")["items"]
    wait_until("two addresses", lambda: addresses() == sorted(p["status"]["podIP"] for p in pods))
    endpoints = shared_cluster.get_json("endpoints", "web", "-n", ns)
    assert endpoints["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert {a["targetRef"]["name"] for a in endpoints["subsets"][0]["addresses"]} == {
        p["metadata"]["name"] for p in pods}
    [endpoint_slice] = shared_cluster.get_json("endpointslices", "-n", ns, "-l",
                                               "kubernetes.io/service-name=web")["items"]
    assert endpoint_slice["addressType"] == "IPv4"
    assert all(e["conditions"]["ready"] for e in endpoint_slice["endpoints"])
    assert endpoint_slice["metadata"]["ownerReferences"][0]["kind"] == "Service"

    shared_cluster.kubectl("scale", "deployment/web", "--replicas=0", "-n", ns)
    wait_until("no address", lambda: addresses() == [])
    shared_cluster.kubectl("delete", "service", "web", "-n", ns)
    wait_until("the Endpoints to go", lambda: "(NotFound)" in shared_cluster.kubectl(
        "get", "endpoints", "web", "-n", ns, check=False).stderr)


def test_python_client_reads_endpoint_slices(shared_cluster: Cluster, ns: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    apply(shared_cluster, ns, service("api", {"app": "api"}), deployment("api", 1))
    shared_cluster.kubectl("rollout", "status", "deployment/api", "-n", ns, "--timeout=30s")
    client = kubernetes.config.new_client_from_config(config_file=str(shared_cluster.kubeconfig))
    discovery = kubernetes.client.DiscoveryV1Api(client)

    def ready_slices() -> list[Any]:
        found = discovery.list_namespaced_endpoint_slice(ns, label_selector="kubernetes.io/service-name=api").items
        return [s for s in found if s.endpoints and s.endpoints[0].conditions.ready]

    [endpoint_slice] = wait_until("a ready endpoint", ready_slices)
    assert endpoint_slice.ports[0].port == 8080
    assert endpoint_slice.endpoints[0].target_ref.kind == "Pod"
