"""The ownership rules of the Ansible proxy: which writes get a link, which link, and the rewritten bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from hybrid_operator.ansible import ownership
from hybrid_operator.ansible.ownership import Owner, Target

pytestmark = pytest.mark.unit

NAMESPACED = Owner("example.com/v1", "Database", "orders", "uid-1", "shop")
CLUSTER = Owner("example.com/v1", "Tenant", "acme", "uid-2")
CORE_OWNER = Owner("v1", "ConfigMap", "settings", "uid-3", "shop")


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/v1/namespaces/shop/configmaps", Target("", "v1", "configmaps", "shop")),
    ("/api/v1/namespaces/shop/configmaps/cm", Target("", "v1", "configmaps", "shop", "cm")),
    ("/api/v1/namespaces/shop/serviceaccounts/sa/token", Target("", "v1", "serviceaccounts", "shop", "sa", "token")),
    ("/api/v1/namespaces", Target("", "v1", "namespaces")),
    ("/api/v1/namespaces/shop", Target("", "v1", "namespaces", None, "shop")),
    ("/api/v1/namespaces/shop/status", Target("", "v1", "namespaces", None, "shop", "status")),
    ("/api/v1/namespaces/shop/finalize", Target("", "v1", "namespaces", None, "shop", "finalize")),
    ("/apis/apps/v1/namespaces/shop/deployments/web/scale",
     Target("apps", "v1", "deployments", "shop", "web", "scale")),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", Target("rbac.authorization.k8s.io", "v1", "clusterroles")),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles/reader/",
     Target("rbac.authorization.k8s.io", "v1", "clusterroles", None, "reader")),
    ("/apis/example.com/v1/namespaces/shop/databases/orders/status",
     Target("example.com", "v1", "databases", "shop", "orders", "status")),
    ("/api/v1/watch/namespaces/shop/configmaps", None),
    ("/apis/apps/v1", None),
    ("/api/v1", None),
    ("/apis", None),
    ("/version", None),
    ("/openapi/v3", None),
])
def test_parse_path(path: str, expected: Target | None) -> None:
    assert ownership.parse_path(path) == expected


COLLECTION = Target("", "v1", "configmaps", "shop")
OBJECT = Target("", "v1", "configmaps", "shop", "cm")
SUBRESOURCE = Target("apps", "v1", "deployments", "shop", "web", "status")


@pytest.mark.parametrize(("method", "content_type", "target", "expected"), [
    ("POST", "application/json", COLLECTION, "create"),
    ("POST", "application/json; charset=utf-8", COLLECTION, "create"),
    ("POST", "application/yaml", COLLECTION, "create"),
    ("post", "application/json", COLLECTION, "create"),
    ("POST", None, COLLECTION, "create"),  # the Python client sends no Content-Type
    ("PUT", "", OBJECT, "replace"),
    ("POST", "application/vnd.kubernetes.protobuf", COLLECTION, None),
    ("POST", "application/json", OBJECT, None),
    ("POST", "application/json", SUBRESOURCE, None),
    ("POST", "application/json", None, None),
    ("PATCH", "application/apply-patch+yaml", OBJECT, "apply"),
    ("PATCH", "application/apply-patch+yaml", SUBRESOURCE, None),
    ("PATCH", "application/apply-patch+cbor", OBJECT, None),
    ("PATCH", "application/merge-patch+json", OBJECT, None),
    ("PATCH", "application/strategic-merge-patch+json", OBJECT, None),
    ("PATCH", "application/json-patch+json", OBJECT, None),
    ("PUT", "application/json", OBJECT, "replace"),
    ("PUT", "application/json", SUBRESOURCE, None),
    ("PUT", "application/vnd.kubernetes.protobuf", OBJECT, None),
    ("GET", "application/json", OBJECT, None),
    ("DELETE", "application/json", OBJECT, None),
])
def test_plan_write(method: str, content_type: str | None, target: Target | None, expected: str | None) -> None:
    assert ownership.plan_write(method, content_type, target) == expected


@pytest.mark.parametrize(("owner", "child_namespace", "expected"), [
    (NAMESPACED, "shop", "ownerReference"),
    (NAMESPACED, "other", "annotations"),
    (NAMESPACED, None, "annotations"),
    (CLUSTER, "shop", "ownerReference"),
    (CLUSTER, None, "ownerReference"),
])
def test_choose_link(owner: Owner, child_namespace: str | None, expected: str) -> None:
    assert ownership.choose_link(owner, child_namespace) == expected


def test_owner_reference_has_no_controller_flags() -> None:
    assert ownership.owner_reference(NAMESPACED) == {
        "apiVersion": "example.com/v1", "kind": "Database", "name": "orders", "uid": "uid-1"}


@pytest.mark.parametrize(("owner", "expected_type"), [(NAMESPACED, "Database.example.com"), (CORE_OWNER, "ConfigMap")])
def test_owner_annotations(owner: Owner, expected_type: str) -> None:
    assert ownership.owner_annotations(owner) == {
        "operator-sdk/primary-resource": f"shop/{owner.name}", "operator-sdk/primary-resource-type": expected_type}


def test_owner_from_object() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Database",
           "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "labels": {"a": "b"}}}
    owner = Owner.from_object(obj)
    assert owner == NAMESPACED
    assert owner.group == "example.com"
    assert owner.key == ownership.OwnerKey("example.com/v1", "Database", "shop", "orders")
    namespace = Owner.from_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "uid": "u"}})
    assert (namespace.group, namespace.namespace) == ("", "")


def test_owner_from_object_names_missing_fields() -> None:
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        Owner.from_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


def test_link_object_appends_reference_and_keeps_others() -> None:
    other = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-9", "controller": True}
    body: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": "cm", "ownerReferences": [other]}}
    linked = ownership.link_object(body, NAMESPACED, "ownerReference")
    assert linked["metadata"]["ownerReferences"] == [other, ownership.owner_reference(NAMESPACED)]
    assert body["metadata"]["ownerReferences"] == [other], "the input must not be modified"


def test_link_object_is_idempotent() -> None:
    once = ownership.link_object({"metadata": {"name": "cm"}}, NAMESPACED, "ownerReference")
    twice = ownership.link_object(once, NAMESPACED, "ownerReference")
    assert twice["metadata"]["ownerReferences"] == [ownership.owner_reference(NAMESPACED)]


def test_link_object_annotations_merge_with_existing() -> None:
    linked = ownership.link_object({"metadata": {"annotations": {"keep": "me"}}, "rules": []}, NAMESPACED,
                                   "annotations")
    assert linked["metadata"]["annotations"] == {
        "keep": "me", "operator-sdk/primary-resource": "shop/orders",
        "operator-sdk/primary-resource-type": "Database.example.com"}
    assert "ownerReferences" not in linked["metadata"]
    assert linked["rules"] == []


def test_link_object_without_metadata() -> None:
    linked = ownership.link_object({"kind": "ConfigMap"}, CLUSTER, "ownerReference")
    assert linked["metadata"] == {"ownerReferences": [ownership.owner_reference(CLUSTER)]}


@pytest.mark.parametrize(("content_type", "data"), [
    ("application/json", json.dumps({"kind": "ConfigMap", "metadata": {"name": "cm"}}).encode()),
    ("application/apply-patch+yaml", b"kind: ConfigMap\nmetadata:\n  name: cm\n"),
    ("application/apply-patch+yaml", json.dumps({"kind": "ConfigMap", "metadata": {"name": "cm"}}).encode()),
    ("application/yaml", b"kind: ConfigMap\nmetadata: {name: cm}\n"),
    (None, b'{"kind": "ConfigMap", "metadata": {"name": "cm"}}'),
])
def test_inject_body_round_trips_json_and_yaml(content_type: str | None, data: bytes) -> None:
    injected = ownership.inject_body(content_type, data, NAMESPACED, "ownerReference")
    assert injected is not None
    assert yaml.safe_load(injected) == json.loads(injected) == {
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "ownerReferences": [ownership.owner_reference(NAMESPACED)]}}


@pytest.mark.parametrize(("content_type", "data"), [
    ("application/json", b"{not json"),
    ("application/json", b"[1, 2]"),
    ("application/yaml", b"key: [unclosed"),
    ("application/vnd.kubernetes.protobuf", b"k8s\x00\x0a"),
    ("application/json", b"\xff\xfe"),
])
def test_inject_body_leaves_undecodable_bodies(content_type: str, data: bytes) -> None:
    assert ownership.inject_body(content_type, data, NAMESPACED, "ownerReference") is None


@pytest.mark.parametrize(("target", "body", "expected"), [
    (Target("example.com", "v1", "databases", "shop", "orders"), {"kind": "Database"}, True),
    (Target("example.com", "v1", "databases", "shop"), {"kind": "Database", "metadata": {"name": "orders"}}, True),
    (Target("example.com", "v1", "databases", "shop"), {"kind": "Database", "metadata": {"name": "other"}}, False),
    (Target("example.com", "v1", "databases", "other", "orders"), {"kind": "Database"}, False),
    (Target("example.com", "v2", "databases", "shop", "orders"), {"kind": "Database"}, False),
    (Target("", "v1", "configmaps", "shop", "orders"), {"kind": "ConfigMap"}, False),
])
def test_is_owner(target: Target, body: dict[str, Any], expected: bool) -> None:
    assert ownership.is_owner(NAMESPACED, target, body) is expected


@pytest.mark.parametrize(("verbs", "expected"), [
    (["create", "delete", "get", "list", "patch", "update", "watch"], False),
    (["create"], True),
    (["create", "get"], True),
    ([], True),
])
def test_is_virtual(verbs: list[str], expected: bool) -> None:
    assert ownership.is_virtual(verbs) is expected


def test_child_ref_fields_and_kind() -> None:
    target = Target("apps", "v1", "deployments", "shop")
    child = ownership.child_ref(target, {"kind": "Deployment", "metadata": {"name": "web"}}, "ownerReference")
    assert child == ownership.ChildRef("apps/v1", "apps", "v1", "Deployment", "deployments", "shop", "web",
                                       "ownerReference")
    assert child.child_kind == ownership.ChildKind("apps", "v1", "Deployment", "deployments", True, "ownerReference")


def test_child_ref_falls_back_to_discovered_kind_and_path_name() -> None:
    target = Target("rbac.authorization.k8s.io", "v1", "clusterroles", None, "reader")
    child = ownership.child_ref(target, {}, "annotations", kind="ClusterRole")
    assert (child.kind, child.name, child.namespace, child.api_version) == (
        "ClusterRole", "reader", "", "rbac.authorization.k8s.io/v1")
    assert child.child_kind.namespaced is False


@pytest.mark.parametrize("path", ["/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/namespaces/ns/events"])
def test_events_are_never_linked_to_an_owner(path: str) -> None:
    assert ownership.plan_write("POST", "application/json", ownership.parse_path(path)) is None
