"""Server-side apply and managedFields bookkeeping, driven by the shapes kubectl, helm and Ansible send."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hybrid_operator.localcluster.semantics.applying import ApplyConflict, apply
from hybrid_operator.localcluster.semantics.fieldpaths import field_paths, fields_of, fields_v1, path_string
from hybrid_operator.localcluster.semantics.managedfields import record_update
from hybrid_operator.localcluster.semantics.patching import json_patch, merge_patch, strategic_merge_patch

pytestmark = pytest.mark.unit

T0 = "2026-11-30T10:00:00Z"
T1 = "2026-11-30T10:05:00Z"

# Bodies as sent in the k8 / k9 traces (kubectl apply --server-side).
CM: dict[str, Any] = {
    "apiVersion": "v1",
    "data": {"a": "1"},
    "kind": "ConfigMap",
    "metadata": {"name": "cm1", "namespace": "default"},
}
DEPLOY: dict[str, Any] = json.loads(
    '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web"},"name":"web",'
    '"namespace":"default"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":'
    '{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"env":[{"name":"A","value":"1"}],'
    '"image":"nginx:1.25","name":"nginx","ports":[{"containerPort":80}]}]}}}}'
)
NGINX_KEY = 'k:{"name":"nginx"}'
PORT80_KEY = 'k:{"containerPort":80,"protocol":"TCP"}'


def ssa(
    live: dict[str, Any] | None, applied: dict[str, Any], manager: str = "kubectl", **kw: Any
) -> dict[str, Any]:
    kind = applied.get("kind") or (live or {}).get("kind", "ConfigMap")
    options: dict[str, Any] = {"force": False, "api_version": applied.get("apiVersion", "v1"), "now": T0}
    options.update(kw)
    return apply(live, applied, kind=kind, manager=manager, **options)


def update(old: dict[str, Any] | None, new: dict[str, Any], manager: str, **kw: Any) -> dict[str, Any]:
    kind = new.get("kind", "ConfigMap")
    options: dict[str, Any] = {"api_version": new.get("apiVersion", "v1"), "now": T0}
    options.update(kw)
    return record_update(old, new, kind=kind, manager=manager, **options)


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def owned(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any]:
    entry: dict[str, Any] = entries(obj)[(manager, operation)]["fieldsV1"]
    return entry


def persisted(obj: dict[str, Any]) -> dict[str, Any]:
    """What the store would hold: server fields added after a create, as the HTTP layer does."""
    out = copy.deepcopy(obj)
    out["metadata"].update({"uid": "u-1", "resourceVersion": "5", "creationTimestamp": T0})
    return out


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return found


# --------------------------------------------------------------------------- create and re-apply


def test_apply_creates_configmap_with_managed_fields() -> None:
    before = copy.deepcopy(CM)
    result = ssa(None, CM)
    assert before == CM
    assert result["data"] == {"a": "1"}
    assert result["metadata"]["name"] == "cm1"
    assert result["metadata"]["managedFields"] == [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        }
    ]


def test_apply_creates_deployment_with_kubernetes_shaped_field_set() -> None:
    result = ssa(None, DEPLOY)
    fields = owned(result, "kubectl")
    assert fields["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert fields["f:spec"]["f:replicas"] == {}
    assert fields["f:spec"]["f:selector"] == {}, "label selectors are atomic"
    nginx = fields["f:spec"]["f:template"]["f:spec"]["f:containers"][NGINX_KEY]
    assert nginx == {
        ".": {},
        "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}},
        "f:image": {},
        "f:name": {},
        "f:ports": {PORT80_KEY: {".": {}, "f:containerPort": {}}},
    }


def test_apply_ignores_server_managed_metadata() -> None:
    applied = copy.deepcopy(CM)
    applied["metadata"].update(
        {"resourceVersion": "9", "uid": "x", "managedFields": [{"manager": "evil"}], "generation": 3}
    )
    result = ssa(None, applied)
    assert set(result["metadata"]) == {"name", "namespace", "managedFields"}
    assert [e["manager"] for e in result["metadata"]["managedFields"]] == ["kubectl"]


def test_reapply_with_changed_values_updates_object_and_time() -> None:
    live = persisted(ssa(None, DEPLOY))
    live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = (
        "TCP"  # defaulted by the server
    )
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    changed = copy.deepcopy(DEPLOY)
    changed["spec"]["replicas"] = 2
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    result = ssa(live, changed, now=T1)
    assert result["spec"]["replicas"] == 2
    nginx = containers(result)[0]
    assert nginx["image"] == "nginx:1.26"
    assert nginx["imagePullPolicy"] == "IfNotPresent", "unowned defaulted field kept"
    assert nginx["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert result["metadata"]["uid"] == "u-1"
    assert len(result["metadata"]["managedFields"]) == 1
    assert result["metadata"]["managedFields"][0]["time"] == T1


def test_dropping_an_applied_field_removes_it() -> None:
    first = copy.deepcopy(CM)
    first["data"]["b"] = "2"
    first["metadata"]["labels"] = {"x": "1"}
    live = persisted(ssa(None, first))
    result = ssa(live, CM)
    assert result["data"] == {"a": "1"}
    assert "labels" not in result["metadata"], "emptied map removed"
    assert owned(result, "kubectl") == {"f:data": {"f:a": {}}}


def test_dropping_a_container_env_entry_removes_only_it() -> None:
    first = copy.deepcopy(DEPLOY)
    containers(first)[0]["env"].append({"name": "B", "value": "2"})
    live = persisted(ssa(None, first))
    result = ssa(live, DEPLOY)
    assert containers(result)[0]["env"] == [{"name": "A", "value": "1"}]


def test_dropped_field_owned_by_another_manager_stays() -> None:
    first = copy.deepcopy(CM)
    first["data"]["b"] = "2"
    live = persisted(ssa(None, first))
    # Another writer sets data.b to the same value it already has: no ownership change...
    same = update(live, copy.deepcopy(live), "kubectl-edit")
    assert ("kubectl-edit", "Update") not in entries(same)
    # ...but a shared apply of the same value makes ansible a co-owner.
    co_owned = ssa(
        same,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"b": "2"}},
        manager="ansible",
    )
    result = ssa(co_owned, CM)
    assert result["data"] == {"a": "1", "b": "2"}
    assert owned(result, "kubectl") == {"f:data": {"f:a": {}}}
    assert owned(result, "ansible") == {"f:data": {"f:b": {}}}


# --------------------------------------------------------------------------- conflicts


def csa_configmap() -> dict[str, Any]:
    """The k9 flow: client-side apply creates cm1, then strategic-merge-patches a=2, b=3."""
    created = persisted(update(None, CM, "kubectl-client-side-apply"))
    patched = strategic_merge_patch(created, {"data": {"a": "2", "b": "3"}}, "ConfigMap")
    return update(created, patched, "kubectl-client-side-apply")


def test_conflict_with_client_side_apply_manager() -> None:
    live = csa_configmap()
    with pytest.raises(ApplyConflict) as info:
        ssa(live, CM)
    error = info.value
    assert error.message() == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a'
    )
    assert error.causes() == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-client-side-apply" using v1',
            "field": ".data.a",
        }
    ]
    api_error = error.api_error("configmaps", "", "cm1")
    assert api_error.code == 409
    assert api_error.status()["details"]["causes"] == error.causes()


def test_force_takes_ownership() -> None:
    live = csa_configmap()
    result = ssa(live, CM, force=True)
    assert result["data"] == {"a": "1", "b": "3"}
    assert owned(result, "kubectl") == {"f:data": {"f:a": {}}}
    assert owned(result, "kubectl-client-side-apply", "Update") == {"f:data": {"f:b": {}}}


def test_equal_values_are_not_conflicts() -> None:
    live = csa_configmap()
    result = ssa(live, {**CM, "data": {"a": "2"}})
    assert owned(result, "kubectl") == {"f:data": {"f:a": {}}}
    assert owned(result, "kubectl-client-side-apply", "Update") == {"f:data": {"f:a": {}, "f:b": {}}}


def test_several_conflicts_are_grouped_by_manager() -> None:
    live = csa_configmap()
    with pytest.raises(ApplyConflict) as info:
        ssa(live, {**CM, "data": {"a": "9", "b": "9"}})
    assert info.value.conflicts == [
        ("kubectl-client-side-apply", ".data.a"),
        ("kubectl-client-side-apply", ".data.b"),
    ]
    assert info.value.message() == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-client-side-apply" using v1:\n'
        "- .data.a\n- .data.b"
    )


def test_label_update_takes_ownership_then_reapply_conflicts() -> None:
    live = persisted(ssa(None, DEPLOY))
    labelled = update(
        live,
        merge_patch(live, {"metadata": {"labels": {"app": "other"}}}),
        "kubectl-label",
        api_version="apps/v1",
    )
    assert owned(labelled, "kubectl-label", "Update") == {"f:metadata": {"f:labels": {"f:app": {}}}}
    assert "f:metadata" not in owned(labelled, "kubectl")
    with pytest.raises(ApplyConflict) as info:
        ssa(labelled, DEPLOY)
    assert info.value.conflicts == [("kubectl-label", ".metadata.labels.app")]


def test_conflict_path_inside_a_container() -> None:
    live = persisted(ssa(None, DEPLOY, manager="helm"))
    other = copy.deepcopy(DEPLOY)
    containers(other)[0]["image"] = "nginx:9"
    with pytest.raises(ApplyConflict) as info:
        ssa(live, other, manager="ansible")
    assert info.value.conflicts == [("helm", '.spec.template.spec.containers[name="nginx"].image')]


# --------------------------------------------------------------------------- list merging


def test_containers_merged_by_name() -> None:
    live = persisted(ssa(None, DEPLOY))
    with_sidecar = copy.deepcopy(live)
    containers(with_sidecar).append({"name": "sidecar", "image": "busybox"})
    live = update(live, with_sidecar, "istio", api_version="apps/v1")
    changed = copy.deepcopy(DEPLOY)
    containers(changed)[0]["image"] = "nginx:1.26"
    result = ssa(live, changed)
    assert [(c["name"], c["image"]) for c in containers(result)] == [
        ("nginx", "nginx:1.26"),
        ("sidecar", "busybox"),
    ]
    istio = owned(result, "istio", "Update")["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(istio) == {'k:{"name":"sidecar"}'}


def test_dropping_a_container_removes_it_unless_owned_elsewhere() -> None:
    two = copy.deepcopy(DEPLOY)
    containers(two).append({"name": "extra", "image": "x"})
    live = persisted(ssa(None, two))
    result = ssa(live, DEPLOY)
    assert [c["name"] for c in containers(result)] == ["nginx"]


def test_ports_keyed_by_container_port_and_protocol() -> None:
    live = persisted(ssa(None, DEPLOY))
    containers(live)[0]["ports"][0]["protocol"] = "TCP"
    changed = copy.deepcopy(DEPLOY)
    containers(changed)[0]["ports"] = [
        {"containerPort": 80, "name": "http"},
        {"containerPort": 80, "protocol": "UDP"},
    ]
    result = ssa(live, changed)
    assert containers(result)[0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 80, "protocol": "UDP"},
    ]
    ports = owned(result, "kubectl")["f:spec"]["f:template"]["f:spec"]["f:containers"][NGINX_KEY]["f:ports"]
    assert set(ports) == {PORT80_KEY, 'k:{"containerPort":80,"protocol":"UDP"}'}


def test_finalizers_merge_as_a_set() -> None:
    live = persisted(update(None, {**CM, "metadata": {"name": "cm1", "finalizers": ["a"]}}, "kopf"))
    result = ssa(live, {**CM, "metadata": {"name": "cm1", "finalizers": ["b"]}})
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert owned(result, "kubectl")["f:metadata"] == {"f:finalizers": {'v:"b"': {}}}


def test_atomic_lists_are_replaced_and_owned_as_a_whole() -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "r"},
        "rules": [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}],
    }
    live = persisted(ssa(None, role))
    assert owned(live, "kubectl") == {"f:rules": {}}
    new_rules = [{"verbs": ["list"], "resources": ["pods"], "apiGroups": [""]}]
    result = ssa(live, {**role, "rules": new_rules})
    assert result["rules"] == new_rules


# --------------------------------------------------------------------------- client traces


def test_helm_install_then_upgrade_trace() -> None:
    meta = {
        "annotations": {"meta.helm.sh/release-name": "rel1", "meta.helm.sh/release-namespace": "default"},
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "name": "rel1-svc",
        "namespace": "default",
    }
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"ports": [{"port": 80, "targetPort": 80}], "selector": {"app": "rel1-web"}},
    }
    live = persisted(ssa(None, svc, manager="helm"))
    fields = owned(live, "helm")
    assert fields["f:spec"]["f:ports"] == {
        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:port": {}, "f:targetPort": {}}
    }
    assert fields["f:spec"]["f:selector"] == {}
    live["spec"]["ports"][0]["protocol"] = "TCP"
    live["spec"]["clusterIP"] = "10.96.0.10"
    again = ssa(live, svc, manager="helm", now=T1)
    assert again["spec"]["ports"] == [{"port": 80, "targetPort": 80, "protocol": "TCP"}]
    assert again["spec"]["clusterIP"] == "10.96.0.10"
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"greeting": "hello"},
        "metadata": {**meta, "name": "c"},
    }
    upgraded = ssa(
        persisted(ssa(None, cm, manager="helm")), {**cm, "data": {"greeting": "hi"}}, manager="helm"
    )
    assert upgraded["data"] == {"greeting": "hi"}


def test_ansible_force_apply_then_plain_apply_trace() -> None:
    created = persisted(ssa(None, DEPLOY, manager="ansible", force=True))
    changed = copy.deepcopy(DEPLOY)
    changed["spec"]["replicas"] = 2
    result = ssa(created, changed, manager="ansible")
    assert result["spec"]["replicas"] == 2
    assert list(entries(result)) == [("ansible", "Apply")]


def test_kubectl_last_applied_manager_owns_only_the_annotation() -> None:
    live = csa_configmap()
    annotation = {"kubectl.kubernetes.io/last-applied-configuration": '{"data":{"a":"2"}}\n'}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm1", "namespace": "default", "annotations": annotation},
    }
    result = ssa(live, body, manager="kubectl-last-applied")
    assert result["metadata"]["annotations"] == annotation
    assert result["data"] == {"a": "2", "b": "3"}
    assert owned(result, "kubectl-last-applied") == {
        "f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}
    }


def test_csaupgrade_json_patch_of_managed_fields_is_kept_verbatim() -> None:
    live = csa_configmap()
    migrated = [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}},
        }
    ]
    patched = json_patch(live, [{"op": "replace", "path": "/metadata/managedFields", "value": migrated}])
    result = update(live, patched, "kubectl", now=T1)
    assert result["metadata"]["managedFields"] == migrated
    reapplied = ssa(result, {**CM, "data": {"a": "2"}})
    assert reapplied["data"] == {"a": "2"}, "b was applied by kubectl before and is now dropped"


# --------------------------------------------------------------------------- record_update


def test_record_update_on_create_owns_everything() -> None:
    result = update(None, persisted(CM), "kubectl-create")
    assert result["metadata"]["managedFields"] == [
        {
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        }
    ]


def test_record_update_transfers_ownership_and_drops_empty_entries() -> None:
    live = persisted(ssa(None, CM))
    edited = update(live, merge_patch(live, {"data": {"a": "5", "c": "6"}}), "kubectl-edit", now=T1)
    assert list(entries(edited)) == [("kubectl-edit", "Update")], "kubectl's only field moved away"
    assert owned(edited, "kubectl-edit", "Update") == {"f:data": {"f:a": {}, "f:c": {}}}
    assert edited["metadata"]["managedFields"][0]["time"] == T1


def test_record_update_without_changes_keeps_managed_fields() -> None:
    live = persisted(ssa(None, CM))
    same = update(live, copy.deepcopy(live), "other", now=T1)
    assert same["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_record_update_removal_prunes_ownership() -> None:
    first = persisted(ssa(None, {**CM, "data": {"a": "1", "b": "2"}}))
    removed = update(first, merge_patch(first, {"data": {"b": None}}), "kubectl-patch")
    assert owned(removed, "kubectl") == {"f:data": {"f:a": {}}}
    assert ("kubectl-patch", "Update") not in entries(removed)


@pytest.mark.parametrize(
    ("sent", "expected_managers"),
    [(None, ["kubectl"]), ([], ["kubectl"]), ([{}], [])],
    ids=["absent keeps stored", "empty keeps stored", "[{}] clears"],
)
def test_record_update_put_managed_fields_variants(sent: Any, expected_managers: list[str]) -> None:
    live = persisted(ssa(None, CM))
    body = copy.deepcopy(live)
    if sent is None:
        body["metadata"].pop("managedFields")
    else:
        body["metadata"]["managedFields"] = sent
    result = update(live, body, "helm")
    assert [e["manager"] for e in result["metadata"].get("managedFields", [])] == expected_managers


def test_status_subresource_entries_are_separate() -> None:
    live = persisted(ssa(None, DEPLOY))
    with_status = copy.deepcopy(live)
    with_status["status"] = {"replicas": 1}
    result = update(live, with_status, "controller", subresource="status", api_version="apps/v1")
    entry = entries(result)[("controller", "Update")]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}
    applied = ssa(
        result,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "status": {"readyReplicas": 1},
        },
        manager="ctl",
        subresource="status",
        force=True,
    )
    assert entries(applied)[("ctl", "Apply")]["subresource"] == "status"
    assert applied["status"] == {"replicas": 1, "readyReplicas": 1}


# --------------------------------------------------------------------------- field sets


def test_fields_of_ignores_server_fields_and_keys_lists() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "x",
            "uid": "u",
            "resourceVersion": "1",
            "finalizers": ["f1"],
            "ownerReferences": [{"uid": "o1", "name": "owner"}],
            "annotations": {},
        },
        "data": {"k": "v"},
    }
    assert fields_of(obj, "ConfigMap") == {
        "f:data": {"f:k": {}},
        "f:metadata": {
            "f:annotations": {},
            "f:finalizers": {'v:"f1"': {}},
            "f:ownerReferences": {'k:{"uid":"o1"}': {".": {}, "f:name": {}, "f:uid": {}}},
        },
    }


def test_field_paths_roundtrip_and_canonical_keys() -> None:
    fields: dict[str, Any] = {
        "f:spec": {"f:ports": {'k:{"protocol": "TCP", "port": 80}': {".": {}, "f:port": {}}}}
    }
    paths = field_paths(fields)
    assert paths == {
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}'),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:port"),
    }
    assert field_paths(fields_v1(paths)) == paths


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:data", "f:a"), ".data.a"),
        (
            ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:name"),
            '.spec.ports[port=80,protocol="TCP"].name',
        ),
        (("f:metadata", "f:finalizers", 'v:"x"'), '.metadata.finalizers[="x"]'),
    ],
)
def test_path_string(path: tuple[str, ...], text: str) -> None:
    assert path_string(path) == text
