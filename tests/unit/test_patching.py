"""Merge patch, JSON patch, strategic merge patch and the merge-key table they rely on."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hybrid_operator.localcluster.semantics.mergekeys import list_strategy, list_type, map_is_atomic
from hybrid_operator.localcluster.semantics.patching import (
    PatchError,
    PatchTestFailed,
    json_equal,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------- RFC 7386

# The test cases of RFC 7386 appendix A.
MERGE_CASES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), MERGE_CASES)
def test_merge_patch_rfc7386_examples(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_merge_patch_does_not_mutate_or_alias_inputs() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1]}}
    patch = {"metadata": {"labels": {"b": "2"}}, "spec": {"y": {"z": 1}}}
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    result = merge_patch(target, patch)
    result["spec"]["x"].append(2)
    result["spec"]["y"]["z"] = 5
    assert target == before_target
    assert patch == before_patch


# --------------------------------------------------------------------------- RFC 6902

DOC: dict[str, Any] = {
    "metadata": {"name": "w1", "resourceVersion": "7", "finalizers": ["a"]},
    "spec": {"list": [1, 2, 3]},
}

JSON_PATCH_CASES: list[tuple[str, list[dict[str, Any]], Any]] = [
    (
        "add key",
        [{"op": "add", "path": "/spec/size", "value": 3}],
        {**DOC, "spec": {"list": [1, 2, 3], "size": 3}},
    ),
    (
        "add replaces key",
        [{"op": "add", "path": "/metadata/finalizers", "value": ["k"]}],
        {**DOC, "metadata": {**DOC["metadata"], "finalizers": ["k"]}},
    ),
    (
        "add inserts",
        [{"op": "add", "path": "/spec/list/1", "value": 9}],
        {**DOC, "spec": {"list": [1, 9, 2, 3]}},
    ),
    (
        "add appends",
        [{"op": "add", "path": "/spec/list/-", "value": 4}],
        {**DOC, "spec": {"list": [1, 2, 3, 4]}},
    ),
    (
        "add at end index",
        [{"op": "add", "path": "/spec/list/3", "value": 4}],
        {**DOC, "spec": {"list": [1, 2, 3, 4]}},
    ),
    (
        "remove key",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        {**DOC, "metadata": {"name": "w1", "resourceVersion": "7"}},
    ),
    ("remove item", [{"op": "remove", "path": "/spec/list/0"}], {**DOC, "spec": {"list": [2, 3]}}),
    (
        "replace item",
        [{"op": "replace", "path": "/spec/list/2", "value": 0}],
        {**DOC, "spec": {"list": [1, 2, 0]}},
    ),
    ("replace whole", [{"op": "replace", "path": "", "value": {"x": 1}}], {"x": 1}),
    (
        "move",
        [{"op": "move", "from": "/spec/list", "path": "/spec/other"}],
        {**DOC, "spec": {"other": [1, 2, 3]}},
    ),
    (
        "copy",
        [{"op": "copy", "from": "/spec/list/0", "path": "/spec/first"}],
        {**DOC, "spec": {"list": [1, 2, 3], "first": 1}},
    ),
    (
        "test then add (kopf finalizer)",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "kopf.zalando.org/KopfFinalizerMarker"},
        ],
        {**DOC, "metadata": {**DOC["metadata"], "finalizers": ["a", "kopf.zalando.org/KopfFinalizerMarker"]}},
    ),
]


@pytest.mark.parametrize(("name", "ops", "expected"), JSON_PATCH_CASES, ids=[c[0] for c in JSON_PATCH_CASES])
def test_json_patch_operations(name: str, ops: list[dict[str, Any]], expected: Any) -> None:
    before = copy.deepcopy(DOC)
    assert json_patch(DOC, ops) == expected
    assert before == DOC


def test_json_pointer_escapes() -> None:
    doc = {"metadata": {"annotations": {"a/b": "1", "c~d": "2"}}}
    ops = [
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "x"},
        {"op": "remove", "path": "/metadata/annotations/c~0d"},
    ]
    assert json_patch(doc, ops) == {"metadata": {"annotations": {"a/b": "x"}}}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}],
        [{"op": "test", "path": "/metadata/missing", "value": "6"}],
        [{"op": "test", "path": "/spec/list/0", "value": True}],
    ],
)
def test_json_patch_failed_test_raises_patch_test_failed(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchTestFailed, match="/"):
        json_patch(DOC, ops)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"op": "add"}, "list of operations"),
        ([{"op": "frobnicate", "path": "/a"}], "unknown JSON patch operation"),
        ([{"op": "add", "value": 1}], 'missing "path"'),
        ([{"op": "add", "path": "/spec"}], 'missing "value"'),
        ([{"op": "remove", "path": "/spec/nope"}], "nonexistent"),
        ([{"op": "replace", "path": "/spec/nope", "value": 1}], "does not exist"),
        ([{"op": "add", "path": "/spec/list/9", "value": 1}], "out of range"),
        ([{"op": "add", "path": "/spec/list/x", "value": 1}], "invalid array index"),
        ([{"op": "add", "path": "/nope/deeper", "value": 1}], "does not exist"),
        ([{"op": "add", "path": "spec", "value": 1}], "must start with"),
        ([{"op": "move", "from": "/spec", "path": "/spec/list/inner"}], "own child"),
        (["add"], "must be an object"),
    ],
)
def test_json_patch_malformed(ops: Any, message: str) -> None:
    with pytest.raises(PatchError, match=message) as info:
        json_patch(DOC, ops)
    assert not isinstance(info.value, PatchTestFailed)


def test_json_patch_is_atomic_on_failure() -> None:
    doc = copy.deepcopy(DOC)
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/spec/size", "value": 3}, {"op": "remove", "path": "/nope"}])
    assert doc == DOC


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (True, 1, False),
        ({"a": [1]}, {"a": [1]}, True),
        ([1, 2], [2, 1], False),
        ("1", 1, False),
    ],
)
def test_json_equal(a: Any, b: Any, equal: bool) -> None:
    assert json_equal(a, b) is equal


# --------------------------------------------------------------------------- strategic merge patch

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "finalizers": ["a", "b"], "labels": {"app": "web", "tier": "x"}},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "nginx",
                        "image": "nginx:1.25",
                        "imagePullPolicy": "IfNotPresent",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    },
                    {"name": "sidecar", "image": "busybox"},
                ],
                "tolerations": [{"key": "k1"}],
                "volumes": [{"name": "v", "emptyDir": {}}],
            }
        },
    },
}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def _directives(value: Any) -> list[str]:
    text = json.dumps(value)
    return [
        part
        for part in ("$patch", "$setElementOrder", "$retainKeys", "$deleteFromPrimitiveList")
        if part in text
    ]


def test_smp_kubectl_set_element_order_example() -> None:
    patch = json.loads(
        '{"spec":{"replicas":2,"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],'
        '"containers":[{"image":"nginx:1.26","name":"nginx"}]}}}}'
    )
    before = copy.deepcopy(DEPLOYMENT)
    result = strategic_merge_patch(DEPLOYMENT, patch, "Deployment")
    assert before == DEPLOYMENT
    assert result["spec"]["replicas"] == 2
    nginx = _spec(result)["containers"][0]
    assert nginx["name"] == "nginx"
    assert nginx["image"] == "nginx:1.26"
    assert nginx["imagePullPolicy"] == "IfNotPresent"
    assert nginx["env"] == before["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [c["name"] for c in _spec(result)["containers"]] == ["nginx", "sidecar"]
    assert _directives(result) == []


SMP_CASES: list[tuple[str, dict[str, Any], Any]] = [
    (
        "null deletes a key",
        {"metadata": {"labels": {"tier": None}}},
        lambda r: r["metadata"]["labels"] == {"app": "web"},
    ),
    (
        "new container appended",
        {"spec": {"template": {"spec": {"containers": [{"name": "extra", "image": "x"}]}}}},
        lambda r: [c["name"] for c in _spec(r)["containers"]] == ["nginx", "sidecar", "extra"],
    ),
    (
        "env merged by name inside a container",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "nginx",
                                "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                            }
                        ]
                    }
                }
            }
        },
        lambda r: (
            _spec(r)["containers"][0]["env"]
            == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
        ),
    ),
    (
        "ports merged by containerPort",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "nginx", "ports": [{"containerPort": 80, "name": "http"}]}]
                    }
                }
            }
        },
        lambda r: (
            _spec(r)["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
        ),
    ),
    (
        "$patch delete on a list element",
        {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}},
        lambda r: [c["name"] for c in _spec(r)["containers"]] == ["nginx"],
    ),
    (
        "$patch replace on a list",
        {
            "spec": {
                "template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}}
            }
        },
        lambda r: _spec(r)["containers"] == [{"name": "only", "image": "i"}],
    ),
    (
        "$patch replace on a map",
        {"metadata": {"labels": {"$patch": "replace", "new": "1"}}},
        lambda r: r["metadata"]["labels"] == {"new": "1"},
    ),
    (
        "$patch delete on a map",
        {"metadata": {"labels": {"$patch": "delete"}}},
        lambda r: "labels" not in r["metadata"],
    ),
    (
        "$patch merge is the default",
        {"metadata": {"labels": {"$patch": "merge", "new": "1"}}},
        lambda r: r["metadata"]["labels"] == {"app": "web", "tier": "x", "new": "1"},
    ),
    (
        "atomic list (tolerations) replaced",
        {"spec": {"template": {"spec": {"tolerations": [{"key": "k2"}]}}}},
        lambda r: _spec(r)["tolerations"] == [{"key": "k2"}],
    ),
    (
        "finalizers merged as a set",
        {"metadata": {"finalizers": ["b", "c"]}},
        lambda r: r["metadata"]["finalizers"] == ["a", "b", "c"],
    ),
    (
        "$deleteFromPrimitiveList",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
        lambda r: r["metadata"]["finalizers"] == ["b"],
    ),
    (
        "$setElementOrder on a primitive list",
        {"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["c"]}},
        lambda r: r["metadata"]["finalizers"] == ["c", "b", "a"],
    ),
    (
        "$setElementOrder reorders containers",
        {
            "spec": {
                "template": {
                    "spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}]}
                }
            }
        },
        lambda r: [c["name"] for c in _spec(r)["containers"]] == ["sidecar", "nginx"],
    ),
    (
        "$retainKeys drops the other keys of a volume",
        {
            "spec": {
                "template": {
                    "spec": {
                        "volumes": [
                            {"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}
                        ]
                    }
                }
            }
        },
        lambda r: _spec(r)["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}],
    ),
    (
        "new nested map with nulls and directives is cleaned",
        {
            "spec": {
                "strategy": {
                    "type": "Recreate",
                    "rollingUpdate": None,
                    "extra": {"$patch": "merge", "a": None},
                }
            }
        },
        lambda r: r["spec"]["strategy"] == {"type": "Recreate", "extra": {}},
    ),
]


@pytest.mark.parametrize(("name", "patch", "check"), SMP_CASES, ids=[c[0] for c in SMP_CASES])
def test_strategic_merge_patch(name: str, patch: dict[str, Any], check: Any) -> None:
    before = copy.deepcopy(DEPLOYMENT)
    result = strategic_merge_patch(DEPLOYMENT, patch, "Deployment")
    assert before == DEPLOYMENT, "input mutated"
    assert check(result), json.dumps(result)
    assert _directives(result) == []


def test_smp_lists_of_unknown_kind_are_replaced() -> None:
    target = {"spec": {"items": [{"name": "a", "x": 1}]}}
    result = strategic_merge_patch(target, {"spec": {"items": [{"name": "a"}]}}, "Widget")
    assert result == {"spec": {"items": [{"name": "a"}]}}


def test_smp_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    result = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, "Service")
    assert result["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]


def test_smp_owner_references_merge_by_uid() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
    result = strategic_merge_patch(
        obj, {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}, "ConfigMap"
    )
    assert [o["uid"] for o in result["metadata"]["ownerReferences"]] == ["1", "2"]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}, "merge key"),
        ({"spec": {"template": {"spec": {"containers": ["nginx"]}}}}, "must be objects"),
        ({"metadata": {"labels": {"$patch": "explode"}}}, "unknown patch directive"),
        ({"$patch": "delete"}, "whole object"),
    ],
)
def test_smp_errors(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        strategic_merge_patch(DEPLOYMENT, patch, "Deployment")


# --------------------------------------------------------------------------- merge keys

POD = ("spec", "template", "spec")
MERGE_KEY_CASES: list[tuple[str, tuple[str, ...], tuple[Any, Any, tuple[str, ...]], str]] = [
    ("Deployment", (*POD, "containers"), ("merge", "name", ("name",)), "map"),
    ("StatefulSet", (*POD, "initContainers"), ("merge", "name", ("name",)), "map"),
    ("Pod", ("spec", "ephemeralContainers"), ("merge", "name", ("name",)), "map"),
    (
        "Deployment",
        (*POD, "containers", "ports"),
        ("merge", "containerPort", ("containerPort", "protocol")),
        "map",
    ),
    ("DaemonSet", (*POD, "containers", "env"), ("merge", "name", ("name",)), "map"),
    ("ReplicaSet", (*POD, "containers", "envFrom"), ("replace", None, ()), "atomic"),
    ("Job", (*POD, "containers", "volumeMounts"), ("merge", "mountPath", ("mountPath",)), "map"),
    ("Pod", ("spec", "containers", "volumeDevices"), ("merge", "devicePath", ("devicePath",)), "map"),
    (
        "CronJob",
        ("spec", "jobTemplate", "spec", "template", "spec", "volumes"),
        ("merge", "name", ("name",)),
        "map",
    ),
    ("Deployment", (*POD, "imagePullSecrets"), ("merge", "name", ("name",)), "map"),
    ("Deployment", (*POD, "tolerations"), ("replace", None, ()), "atomic"),
    ("Pod", ("spec", "hostAliases"), ("merge", "ip", ("ip",)), "map"),
    ("Service", ("spec", "ports"), ("merge", "port", ("port", "protocol")), "map"),
    ("ConfigMap", ("metadata", "ownerReferences"), ("merge", "uid", ("uid",)), "map"),
    ("Widget", ("metadata", "finalizers"), ("merge", None, ()), "set"),
    ("Deployment", ("status", "conditions"), ("merge", "type", ("type",)), "map"),
    ("StatefulSet", ("spec", "volumeClaimTemplates"), ("replace", None, ()), "atomic"),
    ("Role", ("rules",), ("replace", None, ()), "atomic"),
    ("RoleBinding", ("subjects",), ("replace", None, ()), "atomic"),
    ("Widget", ("spec", "things"), ("replace", None, ()), "atomic"),
]


@pytest.mark.parametrize(("kind", "path", "strategy", "ssa_type"), MERGE_KEY_CASES)
def test_merge_key_table(kind: str, path: tuple[str, ...], strategy: Any, ssa_type: str) -> None:
    assert list_strategy(kind, path) == strategy
    assert list_type(kind, path) == (ssa_type, strategy[2])


def test_atomic_maps() -> None:
    assert map_is_atomic("Deployment", ("spec", "selector"))
    assert map_is_atomic("Service", ("spec", "selector"))
    assert not map_is_atomic("Deployment", ("spec", "template"))
