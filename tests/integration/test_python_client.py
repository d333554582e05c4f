"""The official kubernetes Python client works against `hybrid-operator cluster`.

The operator itself (and kopf, and kubernetes.core) talk to the API server
through this client, so its typed APIs, custom objects, watches, the dynamic
client and its ApiException status codes must all behave as with a real
cluster.  Every call here is a real HTTPS request to the server process.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from support.cluster import Cluster

ROOT_CA = "kube-root-ca.crt"  # every namespace has it, as in kube
pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parent / "manifests"
_names = itertools.count()


@pytest.fixture(scope="module")
def api_client(shared_cluster: Cluster) -> Iterator[client.ApiClient]:
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com")
    api = config.new_client_from_config(config_file=str(shared_cluster.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    """A fresh namespace per test, so tests sharing the cluster never see each other."""
    name = f"py-{next(_names)}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": data}


def database(name: str, engine: str = "postgres", replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": name},
            "spec": {"engine": engine, "version": "16", "replicas": replicas}}


def deployment(name: str, image: str = "nginx:1.25") -> dict[str, Any]:
    body = yaml.safe_load((MANIFESTS / "deploy.yaml").read_text())
    body["metadata"]["name"] = name
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return dict(body)


def test_core_v1_configmap_lifecycle(api_client: client.ApiClient, namespace: str, shared_cluster: Cluster) -> None:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map(namespace, configmap("settings", {"app": "demo"}, color="blue"))
    assert created.metadata.uid
    assert created.metadata.namespace == namespace

    fetched = core.read_namespaced_config_map("settings", namespace)
    assert fetched.data == {"color": "blue"}
    assert fetched.metadata.resource_version == created.metadata.resource_version

    listed = core.list_namespaced_config_map(namespace)
    assert [item.metadata.name for item in listed.items] == ["kube-root-ca.crt", "settings"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)

    fetched.data = {"color": "green"}
    replaced = core.replace_namespaced_config_map("settings", namespace, fetched)
    assert replaced.data == {"color": "green"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    patched = core.patch_namespaced_config_map("settings", namespace, {"data": {"size": "large"}})
    assert patched.data == {"color": "green", "size": "large"}
    assert shared_cluster.get_json("configmap", "settings", "-n", namespace)["data"]["size"] == "large"

    core.delete_namespaced_config_map("settings", namespace)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("settings", namespace)
    assert caught.value.status == 404


def test_apps_v1_deployment_lifecycle(api_client: client.ApiClient, namespace: str,
                                      shared_cluster: Cluster) -> None:
    apps = client.AppsV1Api(api_client)
    created = apps.create_namespaced_deployment(namespace, deployment("web"))
    assert created.metadata.generation == 1
    assert created.spec.strategy.type == "RollingUpdate"  # server-side defaulting

    # the deployment controller annotates and reports on a new Deployment: read it once that settled
    shared_cluster.kubectl("rollout", "status", "-n", namespace, "deployment/web", "--timeout=30s")
    current = apps.read_namespaced_deployment("web", namespace)
    current.spec.template.spec.containers[0].image = "nginx:1.26"
    replaced = apps.replace_namespaced_deployment("web", namespace, current)
    assert replaced.metadata.generation == 2
    assert replaced.spec.template.spec.containers[0].image == "nginx:1.26"

    patched = apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 3}})
    assert patched.spec.replicas == 3
    assert patched.metadata.generation == 3
    shared_cluster.kubectl("wait", "-n", namespace, "--for=condition=Available", "deployment/web", "--timeout=30s")
    status = apps.read_namespaced_deployment_status("web", namespace).status
    assert (status.ready_replicas, status.observed_generation) == (3, 3)

    assert [d.metadata.name for d in apps.list_namespaced_deployment(namespace).items] == ["web"]
    apps.delete_namespaced_deployment("web", namespace)
    assert apps.list_namespaced_deployment(namespace).items == []


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=demo", ["a", "b"]),
    ("app==demo,tier=web", ["a"]),
    ("app!=demo", ["c", "d"]),
    ("tier in (web,db)", ["a", "b"]),
    ("tier notin (web)", ["b", "c", "d"]),
    ("tier", ["a", "b"]),
    ("!tier", ["c", "d"]),
    ("app", ["a", "b", "c"]),
])
def test_label_selectors(api_client: client.ApiClient, namespace: str, selector: str,
                         expected: list[str]) -> None:
    core = client.CoreV1Api(api_client)
    for name, labels in [("a", {"app": "demo", "tier": "web"}), ("b", {"app": "demo", "tier": "db"}),
                         ("c", {"app": "other"}), ("d", {})]:
        core.create_namespaced_config_map(namespace, configmap(name, labels))
    found = core.list_namespaced_config_map(namespace, label_selector=selector)
    assert sorted(item.metadata.name for item in found.items if item.metadata.name != ROOT_CA) == expected


def test_custom_objects_create_patch_and_status(api_client: client.ApiClient, namespace: str,
                                               shared_cluster: Cluster) -> None:
    custom = client.CustomObjectsApi(api_client)
    args = ("example.com", "v1", namespace, "databases")
    created = custom.create_namespaced_custom_object(*args, database("orders"))
    assert created["spec"] == {"engine": "postgres", "version": "16", "replicas": 2}
    assert created["metadata"]["generation"] == 1

    patched = custom.patch_namespaced_custom_object(*args, "orders", {"spec": {"replicas": 4}})
    assert patched["spec"]["replicas"] == 4
    assert patched["spec"]["engine"] == "postgres"  # a merge patch keeps other fields
    assert patched["metadata"]["generation"] == 2

    status = custom.patch_namespaced_custom_object_status(*args, "orders", {"status": {"phase": "Ready"}})
    assert status["status"] == {"phase": "Ready"}
    assert status["metadata"]["generation"] == 2  # status writes do not bump generation

    listed = custom.list_namespaced_custom_object(*args)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["orders"]
    assert shared_cluster.get_json("db", "orders", "-n", namespace)["status"]["phase"] == "Ready"
    custom.delete_namespaced_custom_object(*args, "orders")
    assert custom.list_namespaced_custom_object(*args)["items"] == []


def test_watch_stream_sees_added_modified_deleted(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, configmap("before"))
    steps: list[Callable[[], object]] = [
        lambda: core.create_namespaced_config_map(namespace, configmap("live", color="red")),
        lambda: core.patch_namespaced_config_map("live", namespace, {"data": {"color": "blue"}}),
        lambda: core.delete_namespaced_config_map("live", namespace),
    ]
    seen: list[tuple[str, str, dict[str, str] | None]] = []
    watcher = watch.Watch()
    for event in watcher.stream(core.list_namespaced_config_map, namespace, timeout_seconds=20,
                                field_selector=f"metadata.name!={ROOT_CA}"):
        seen.append((event["type"], event["object"].metadata.name, event["object"].data))
        if not steps:
            watcher.stop()
        else:
            steps.pop(0)()  # each write happens only once the previous event has arrived
    assert seen == [
        ("ADDED", "before", {}),
        ("ADDED", "live", {"color": "red"}),
        ("MODIFIED", "live", {"color": "blue"}),
        ("DELETED", "live", {"color": "blue"}),
    ]


def test_watch_resumes_from_resource_version(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, configmap("replayed"))
    core.delete_namespaced_config_map("replayed", namespace)
    watcher = watch.Watch()
    events = []
    for event in watcher.stream(core.list_namespaced_config_map, namespace, resource_version=start,
                                timeout_seconds=10):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            watcher.stop()
    assert events == [("ADDED", "replayed"), ("DELETED", "replayed")]


def test_dynamic_client_get_and_create(api_client: client.ApiClient, namespace: str,
                                       shared_cluster: Cluster) -> None:
    dynamic = DynamicClient(api_client)
    databases = dynamic.resources.get(api_version="example.com/v1", kind="Database")
    assert databases.namespaced
    assert databases.short_names == ["db"]
    created = databases.create(body=database("dyn", engine="mysql"), namespace=namespace)
    assert created.spec.engine == "mysql"
    fetched = databases.get(name="dyn", namespace=namespace)
    assert fetched.metadata.uid == created.metadata.uid

    configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
    configmaps.create(body=configmap("dyn-cm", {"app": "dyn"}, key="value"), namespace=namespace)
    listed = configmaps.get(namespace=namespace, label_selector="app=dyn")
    assert [item.metadata.name for item in listed.items] == ["dyn-cm"]
    assert shared_cluster.get_json("configmap", "dyn-cm", "-n", namespace)["data"] == {"key": "value"}


def _stale_replace(core: client.CoreV1Api, namespace: str) -> None:
    stale = core.create_namespaced_config_map(namespace, configmap("stale", color="red"))
    core.patch_namespaced_config_map("stale", namespace, {"data": {"color": "blue"}})
    core.replace_namespaced_config_map("stale", namespace, stale)


def _duplicate(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("twice"))
    core.create_namespaced_config_map(namespace, configmap("twice"))


def _invalid_cr(core: client.CoreV1Api, namespace: str) -> None:
    body = yaml.safe_load((MANIFESTS / "db-invalid.yaml").read_text())
    client.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
        "example.com", "v1", namespace, "databases", body)


@pytest.mark.parametrize(("action", "status", "reason", "message"), [
    (lambda core, ns: core.read_namespaced_config_map("missing", ns), 404, "NotFound",
     'configmaps "missing" not found'),
    (lambda core, ns: core.delete_namespaced_secret("missing", ns), 404, "NotFound",
     'secrets "missing" not found'),
    (_duplicate, 409, "AlreadyExists", 'configmaps "twice" already exists'),
    (_stale_replace, 409, "Conflict", 'Operation cannot be fulfilled on configmaps "stale": the object has been '
     "modified; please apply your changes to the latest version and try again"),
    (_invalid_cr, 422, "Invalid", 'Database.example.com "bad" is invalid'),
], ids=["get-404", "delete-404", "already-exists", "stale-conflict", "invalid-cr"])
def test_errors_raise_api_exception(api_client: client.ApiClient, namespace: str,
                                    action: Callable[[client.CoreV1Api, str], object],
                                    status: int, reason: str, message: str) -> None:
    core = client.CoreV1Api(api_client)
    with pytest.raises(ApiException) as caught:
        action(core, namespace)
    assert caught.value.status == status
    body = yaml.safe_load(caught.value.body)
    assert (body["kind"], body["code"], body["reason"]) == ("Status", status, reason)
    assert body["message"].startswith(message)


def test_invalid_cr_lists_each_cause(api_client: client.ApiClient, namespace: str) -> None:
    with pytest.raises(ApiException) as caught:
        _invalid_cr(client.CoreV1Api(api_client), namespace)
    causes = yaml.safe_load(caught.value.body)["details"]["causes"]
    assert {cause["field"] for cause in causes} == {"spec.engine", "spec.replicas"}
    assert all(cause["reason"] for cause in causes)
