"""`kubectl get` columns of the kinds the simulated node brings to life (localcluster/apiserver/clusterprinters.py):
volumes, storage classes, endpoints and endpoint slices, cell by cell, as kube-apiserver prints them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hybrid_operator.localcluster.apiserver.clusterprinters import printer_for

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
CREATED = {"name": "x", "creationTimestamp": "2026-12-02T11:58:00Z"}


def cells(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    columns, cell = printer_for(kind)
    row = cell(obj, NOW)
    assert len(row) == len(columns)
    return {column.name: value for column, value in zip(columns, row, strict=True)}


def test_a_bound_volume_shows_its_claim_modes_and_policy() -> None:
    volume = {"metadata": CREATED, "spec": {"capacity": {"storage": "1Gi"},
                                            "accessModes": ["ReadWriteOnce", "ReadOnlyMany", "Custom"],
                                            "persistentVolumeReclaimPolicy": "Retain",
                                            "claimRef": {"namespace": "db", "name": "data"},
                                            "storageClassName": "standard"},
              "status": {"phase": "Bound"}}

    assert cells("PersistentVolume", volume) == {
        "Name": "x", "Capacity": "1Gi", "Access Modes": "RWO,ROX,Custom", "Reclaim Policy": "Retain",
        "Status": "Bound", "Claim": "db/data", "StorageClass": "standard", "VolumeAttributesClass": "<unset>",
        "Reason": "", "Age": "2m", "VolumeMode": "Filesystem"}


def test_an_unbound_volume_has_no_claim() -> None:
    assert cells("PersistentVolume", {"metadata": CREATED, "spec": {"volumeMode": "Block"}})["Claim"] == ""


@pytest.mark.parametrize(("annotations", "expansion", "name", "expanded"), [
    ({"storageclass.kubernetes.io/is-default-class": "true"}, True, "x (default)", "true"),
    ({}, None, "x", "false"),
])
def test_a_storage_class_marks_the_default_and_fills_kubernetes_defaults(
        annotations: dict[str, str], expansion: bool | None, name: str, expanded: str) -> None:
    klass: dict[str, Any] = {"metadata": {**CREATED, "annotations": annotations}, "provisioner": "local"}
    if expansion is not None:
        klass["allowVolumeExpansion"] = expansion

    assert cells("StorageClass", klass) == {"Name": name, "Provisioner": "local", "ReclaimPolicy": "Delete",
                                            "VolumeBindingMode": "Immediate", "AllowVolumeExpansion": expanded,
                                            "Age": "2m"}


def test_endpoints_list_address_port_pairs_and_shorten_after_three() -> None:
    endpoints = {"metadata": CREATED, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
        {"addresses": [{"ip": "10.0.0.3"}]},  # no ports: the address alone
        "not a subset",
    ]}

    assert cells("Endpoints", endpoints)["Endpoints"] == "10.0.0.1:80,10.0.0.1:443,10.0.0.2:80 + 2 more..."
    assert cells("Endpoints", {"metadata": CREATED})["Endpoints"] == "<none>"


def test_an_endpoint_slice_shows_its_type_ports_and_addresses() -> None:
    slice_ = {"metadata": CREATED, "addressType": "IPv4", "ports": [{"port": 8080}, {"name": "no-port"}],
              "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}]}

    assert cells("EndpointSlice", slice_) == {"Name": "x", "AddressType": "IPv4", "Ports": "8080",
                                              "Endpoints": "10.0.0.1,10.0.0.2,10.0.0.3", "Age": "2m"}
    assert cells("EndpointSlice", {"metadata": CREATED})["Ports"] == "<unset>"


def test_a_kind_without_its_own_printer_falls_back_to_the_builtin_ones() -> None:
    columns, _ = printer_for("ConfigMap")
    assert [column.name for column in columns][:1] == ["Name"]
