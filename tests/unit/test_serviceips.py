"""Service cluster IP and node port allocation (semantics/serviceips.py)."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.localcluster.errors import ApiError
from hybrid_operator.localcluster.semantics.serviceips import (
    allocate_cluster_ip,
    allocate_on_create,
    keep_on_update,
)

pytestmark = pytest.mark.unit


def service(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}], **spec}}


def test_automatic_cluster_ips_come_from_above_the_static_band_in_order() -> None:
    used: set[str] = set()
    first = allocate_cluster_ip(used)
    used.add(first)
    assert (first, allocate_cluster_ip(used)) == ("10.96.1.0", "10.96.1.1")


def test_requested_cluster_ip_is_honoured_when_free() -> None:
    obj = service(clusterIP="10.96.0.10")
    allocate_on_create([], obj)
    assert obj["spec"]["clusterIP"] == "10.96.0.10"
    assert obj["spec"]["clusterIPs"] == ["10.96.0.10"]


@pytest.mark.parametrize(("ip", "message"), [
    ("10.96.0.10", "provided IP is already allocated"),
    ("192.168.1.1", "is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
])
def test_requested_cluster_ip_taken_or_out_of_range_is_invalid(ip: str, message: str) -> None:
    taken = service("dns", clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"])
    with pytest.raises(ApiError) as caught:
        allocate_on_create([taken], service(clusterIP=ip))
    assert caught.value.code == 422
    assert message in str(caught.value.details)


def test_headless_and_external_name_services_get_no_address() -> None:
    headless = service(clusterIP="None")
    allocate_on_create([], headless)
    assert headless["spec"]["clusterIPs"] == ["None"]
    external = service(type="ExternalName", externalName="example.com")
    allocate_on_create([], external)
    assert "clusterIP" not in external["spec"]


def test_node_ports_are_allocated_once_and_kept_on_update() -> None:
    obj = service(type="NodePort", ports=[{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}])
    allocate_on_create([], obj)
    ports = [p["nodePort"] for p in obj["spec"]["ports"]]
    assert all(30000 <= p <= 32767 for p in ports) and len(set(ports)) == 2
    new = service(type="NodePort", ports=[{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}])
    keep_on_update([obj], obj, new)
    assert [p["nodePort"] for p in new["spec"]["ports"]] == ports
    assert new["spec"]["clusterIP"] == obj["spec"]["clusterIP"]


def test_requested_node_port_in_use_is_invalid() -> None:
    first = service("a", type="NodePort", ports=[{"port": 80, "nodePort": 30080}])
    allocate_on_create([], first)
    with pytest.raises(ApiError) as caught:
        allocate_on_create([first], service("b", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert "provided port is already allocated" in str(caught.value.details)


def test_becoming_cluster_ip_drops_node_ports() -> None:
    obj = service(type="NodePort")
    allocate_on_create([], obj)
    new = service(ports=[{"port": 80, "protocol": "TCP", "nodePort": obj["spec"]["ports"][0]["nodePort"]}])
    keep_on_update([obj], obj, new)
    assert "nodePort" not in new["spec"]["ports"][0]
