"""Table rendering for ``kubectl get``: built-in printers, CRD printer columns, JSONPath, Accept parsing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hybrid_operator.localcluster.apiserver.jsonpath import jsonpath
from hybrid_operator.localcluster.apiserver.tables import parse_table_accept, table
from hybrid_operator.localcluster.clock import human_duration

pytestmark = pytest.mark.unit

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
FIVE_MINUTES_AGO = "2025-01-01T11:55:00Z"


def _meta(name: str = "x", **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": FIVE_MINUTES_AGO, **extra}


def _columns(result: dict[str, Any]) -> list[str]:
    return [c["name"] for c in result["columnDefinitions"]]


def _cells(items: list[dict[str, Any]], kind: str, columns: list[dict[str, Any]] | None = None) -> list[Any]:
    result = table(items, kind=kind, printer_columns=columns, resource_version="7", now=NOW)
    return [row["cells"] for row in result["rows"]]


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (5, "5s"),
        (119, "119s"),
        (180, "3m"),
        (190, "3m10s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60 * 7, "3h7m"),
        (10 * 3600, "10h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 3600 * 5, "2d5h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 86400 * 4, "3y4d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


# --------------------------------------------------------------------------- built-in printers

DEPLOYMENT: dict[str, Any] = {
    "metadata": _meta("web"),
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
    },
    "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
}

BUILTIN_CASES: list[tuple[str, dict[str, Any], list[str], list[Any]]] = [
    (
        "ConfigMap",
        {"metadata": _meta("cm"), "data": {"a": "1", "b": "2"}},
        ["Name", "Data", "Age"],
        ["cm", 2, "5m"],
    ),
    (
        "Secret",
        {"metadata": _meta("s"), "type": "Opaque", "data": {"a": "MQ=="}},
        ["Name", "Type", "Data", "Age"],
        ["s", "Opaque", 1, "5m"],
    ),
    (
        "Namespace",
        {"metadata": _meta("ns"), "status": {"phase": "Active"}},
        ["Name", "Status", "Age"],
        ["ns", "Active", "5m"],
    ),
    (
        "Deployment",
        DEPLOYMENT,
        ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"],
        ["web", "2/3", 3, 2, "5m", "nginx", "nginx:1.25", "app=web"],
    ),
    (
        "StatefulSet",
        {"metadata": _meta("db"), "spec": {"replicas": 2}, "status": {"readyReplicas": 1}},
        ["Name", "Ready", "Age", "Containers", "Images"],
        ["db", "1/2", "5m", "", ""],
    ),
    (
        "ReplicaSet",
        {"metadata": _meta("rs"), "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}},
        ["Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"],
        ["rs", 2, 2, 1, "5m", "", "", "<none>"],
    ),
    (
        "Pod",
        {
            "metadata": _meta("p"),
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {
                "phase": "Running",
                "podIP": "10.42.0.5",
                "containerStatuses": [
                    {"ready": True, "restartCount": 1, "state": {"running": {}}},
                    {"ready": False, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                ],
            },
        },
        ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"],
        ["p", "1/2", "CrashLoopBackOff", "3", "5m", "10.42.0.5", "n1", "<none>", "<none>"],
    ),
    (
        "Job",
        {
            "metadata": _meta("j"),
            "spec": {"completions": 1},
            "status": {
                "succeeded": 1,
                "startTime": "2025-01-01T11:56:00Z",
                "completionTime": "2025-01-01T11:56:30Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            },
        },
        ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"],
        ["j", "Complete", "1/1", "30s", "5m", "", "", "<none>"],
    ),
    (
        "PersistentVolumeClaim",
        {
            "metadata": _meta("data"),
            "spec": {"storageClassName": "local-path"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
        },
        [
            "Name",
            "Status",
            "Volume",
            "Capacity",
            "Access Modes",
            "StorageClass",
            "VolumeAttributesClass",
            "Age",
            "VolumeMode",
        ],
        ["data", "Bound", "", "1Gi", "RWO", "local-path", "<unset>", "5m", "Filesystem"],
    ),
    (
        "Event",
        {
            "metadata": _meta("web.1"),
            "type": "Normal",
            "reason": "Created",
            "message": "made it",
            "count": 1,
            "lastTimestamp": "2025-01-01T11:59:00Z",
            "involvedObject": {"kind": "Deployment", "name": "web"},
            "source": {"component": "kopf"},
        },
        [
            "Last Seen",
            "Type",
            "Reason",
            "Object",
            "Subobject",
            "Source",
            "Message",
            "First Seen",
            "Count",
            "Name",
        ],
        ["60s", "Normal", "Created", "deployment/web", "", "kopf", "made it", "60s", 1, "web.1"],
    ),
    ("ServiceAccount", {"metadata": _meta("default")}, ["Name", "Secrets", "Age"], ["default", 0, "5m"]),
    (
        "CustomResourceDefinition",
        {"metadata": _meta("widgets.example.com")},
        ["Name", "Created At"],
        ["widgets.example.com", FIVE_MINUTES_AGO],
    ),
    ("Lease", {"metadata": _meta("l")}, ["Name", "Age"], ["l", "5m"]),
]


@pytest.mark.parametrize(
    ("kind", "obj", "columns", "cells"),
    BUILTIN_CASES,
    ids=[case[0] for case in BUILTIN_CASES],
)
def test_builtin_printers(kind: str, obj: dict[str, Any], columns: list[str], cells: list[Any]) -> None:
    result = table([obj], kind=kind, printer_columns=None, resource_version="7", now=NOW)
    assert _columns(result) == columns
    assert result["rows"][0]["cells"] == cells
    assert len(result["columnDefinitions"]) == len(cells)


SERVICE_CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    (
        "cluster ip",
        {
            "type": "ClusterIP",
            "clusterIP": "10.43.0.5",
            "ports": [{"port": 80, "protocol": "TCP"}],
            "selector": {"app": "web"},
        },
        ["ClusterIP", "10.43.0.5", "<none>", "80/TCP", "app=web"],
    ),
    (
        "node port with two ports",
        {
            "type": "NodePort",
            "clusterIP": "10.43.0.6",
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
        },
        ["NodePort", "10.43.0.6", "<none>", "80:30080/TCP,53/UDP", "<none>"],
    ),
    (
        "load balancer pending",
        {"type": "LoadBalancer", "clusterIP": "10.43.0.7", "ports": [{"port": 443, "nodePort": 31443}]},
        ["LoadBalancer", "10.43.0.7", "<pending>", "443:31443/TCP", "<none>"],
    ),
    ("headless without ports", {"clusterIP": "None"}, ["ClusterIP", "None", "<none>", "<none>", "<none>"]),
    (
        "external name",
        {"type": "ExternalName", "externalName": "db.example.com"},
        ["ExternalName", "<none>", "db.example.com", "<none>", "<none>"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in SERVICE_CASES], ids=[c[0] for c in SERVICE_CASES]
)
def test_service_cells(spec: dict[str, Any], expected: list[Any]) -> None:
    cells = _cells([{"metadata": _meta("svc"), "spec": spec}], "Service")[0]
    assert cells[1:5] + cells[6:] == expected
    assert cells[0] == "svc"
    assert cells[5] == "5m"


def test_missing_timestamp_renders_unknown() -> None:
    assert _cells([{"metadata": {"name": "a"}}], "ConfigMap") == [["a", 0, "<unknown>"]]


# --------------------------------------------------------------------------- custom resources

DB_COLUMNS: list[dict[str, Any]] = [
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine", "description": "db engine"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "First", "type": "string", "jsonPath": ".spec.users[0].name", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

DATABASE: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Database",
    "metadata": _meta("db1"),
    "spec": {"engine": "mysql", "replicas": 3, "users": [{"name": "root"}]},
    "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


def test_custom_resource_columns() -> None:
    result = table([DATABASE], kind="Database", printer_columns=DB_COLUMNS, resource_version="9", now=NOW)
    assert _columns(result) == ["Name", "Engine", "Replicas", "Ready", "First", "Age"]
    assert result["rows"][0]["cells"] == ["db1", "mysql", 3, "True", "root", "5m"]
    definitions = result["columnDefinitions"]
    assert definitions[1] == {
        "name": "Engine",
        "type": "string",
        "format": "",
        "description": "db engine",
        "priority": 0,
    }
    assert definitions[4]["priority"] == 1
    assert definitions[5]["type"] == "date"


def test_custom_resource_missing_values_are_null() -> None:
    bare = {"metadata": _meta("db2"), "spec": {}}
    assert _cells([bare], "Database", DB_COLUMNS) == [["db2", None, None, None, None, "5m"]]


def test_custom_resource_default_columns_are_name_and_age_date() -> None:
    result = table([DATABASE], kind="Database", printer_columns=[], resource_version="9", now=NOW)
    assert _columns(result) == ["Name", "Age"]
    assert result["columnDefinitions"][1]["type"] == "date"
    assert result["rows"][0]["cells"] == ["db1", "5m"]


def test_custom_resource_mismatched_type_rendered_as_text() -> None:
    columns = [
        {"name": "Users", "type": "string", "jsonPath": ".spec.users[*].name"},
        {"name": "Count", "type": "integer", "jsonPath": ".spec.engine"},
    ]
    obj = {"metadata": _meta("d"), "spec": {"engine": "x", "users": [{"name": "a"}, {"name": "b"}]}}
    assert _cells([obj], "Database", columns) == [["d", "a b", "x"]]


# --------------------------------------------------------------------------- the envelope


def test_table_envelope_and_metadata_rows() -> None:
    result = table([DEPLOYMENT], kind="Deployment", printer_columns=None, resource_version="42", now=NOW)
    assert result["kind"] == "Table"
    assert result["apiVersion"] == "meta.k8s.io/v1"
    assert result["metadata"] == {"resourceVersion": "42"}
    assert result["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": DEPLOYMENT["metadata"],
    }


def test_include_object_full_fills_type_meta() -> None:
    result = table(
        [DEPLOYMENT],
        kind="Deployment",
        printer_columns=None,
        include_object="Object",
        resource_version="1",
        now=NOW,
        api_version="apps/v1",
    )
    embedded = result["rows"][0]["object"]
    assert embedded["kind"] == "Deployment"
    assert embedded["apiVersion"] == "apps/v1"
    assert embedded["spec"] == DEPLOYMENT["spec"]
    assert "kind" not in DEPLOYMENT, "the input item must not be mutated"


def test_include_object_none_and_continue() -> None:
    result = table(
        [DEPLOYMENT],
        kind="Deployment",
        printer_columns=None,
        include_object="None",
        resource_version="1",
        now=NOW,
        continue_token="abc",
    )
    assert "object" not in result["rows"][0]
    assert result["metadata"] == {"resourceVersion": "1", "continue": "abc"}


def test_empty_list_still_has_columns() -> None:
    result = table([], kind="ConfigMap", printer_columns=None, resource_version="3", now=NOW)
    assert result["rows"] == []
    assert _columns(result) == ["Name", "Data", "Age"]


# --------------------------------------------------------------------------- JSONPath


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (".spec.engine", ["mysql"]),
        ("{.spec.replicas}", [3]),
        ("$.spec.engine", ["mysql"]),
        (".spec['engine']", ["mysql"]),
        (".spec.users[0].name", ["root"]),
        (".spec.users[-1].name", ["root"]),
        (".spec.users[5].name", []),
        (".spec.users[*].name", ["root"]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type!='Ready')].type", ["Synced"]),
        (".spec.missing", []),
        (".metadata.name.deeper", []),
        ("not a path", []),
    ],
)
def test_jsonpath(expression: str, expected: list[Any]) -> None:
    assert jsonpath(DATABASE, expression) == expected


# --------------------------------------------------------------------------- Accept


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
            "application/json",
            True,
        ),
        ("application/json; as=Table; v=v1beta1; g=meta.k8s.io", True),
        ("application/json", False),
        ("application/vnd.kubernetes.protobuf,application/json", False),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", False),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", False),
        ("*/*", False),
        ("", False),
    ],
)
def test_parse_table_accept(accept: str, wanted: bool) -> None:
    assert parse_table_accept(accept) is wanted
