"""Real kubectl 1.32 against `hybrid-operator cluster`, with kubectl's default flags.

Why this exists: the embedded API server is only useful if the unmodified kubectl works against it
the way it does against a real cluster: client-side validation via OpenAPI (default
`--validate=strict`), Table output with printer columns, watches, waits, describe, strategic merge
and server-side apply, protobuf request bodies, namespace termination and server dry runs. Every
test here drives the kubectl binary over HTTPS and checks what the server stored or printed.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster, find_binary

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parent / "manifests"
CRD_NAME = "databases.example.com"


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((MANIFESTS / name).read_text())
    return loaded


def as_yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj)


def apply(cluster: Cluster, obj: dict[str, Any], *flags: str, check: bool = True,
          namespace: str | None = None) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -n`` the module's namespace (or ``namespace``)."""
    return cluster.kubectl("apply", "-n", namespace or cluster.namespace, *flags, "-f", "-", input_text=as_yaml(obj),
                           check=check)


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    copy["metadata"]["name"] = name
    return copy


def deployment(name: str, replicas: int = 1, image: str = "nginx:1.25") -> dict[str, Any]:
    obj = named(manifest("deploy.yaml"), name)
    obj["spec"]["replicas"] = replicas
    obj["spec"]["selector"]["matchLabels"] = {"app": name}
    obj["spec"]["template"]["metadata"]["labels"] = {"app": name}
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return obj


def database(name: str, **spec: Any) -> dict[str, Any]:
    obj = named(manifest("db-sample.yaml"), name)
    obj["spec"].update(spec)
    return obj


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def table(output: str) -> list[list[str]]:
    """kubectl's column output as rows of cells (header first)."""
    return [line.split() for line in output.strip().splitlines()]


def is_gone(cluster: Cluster, *target: str) -> bool:
    result = cluster.kubectl("get", *target, check=False)
    return result.returncode != 0 and "(NotFound)" in result.stderr


class Background:
    """A kubectl process whose output lines are read as they arrive."""

    def __init__(self, cluster: Cluster, *args: str) -> None:
        self.process = subprocess.Popen([find_binary("kubectl"), *args], env=cluster.env(), text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cluster.workdir)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, predicate: Any, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if predicate(line):
                return line
        pytest.fail(f"no matching line within {timeout}s; saw: {self.seen}")

    def finish(self, timeout: float = 30.0) -> int:
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)  # the last lines may still be on their way to the queue
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def kube(shared_cluster: Cluster) -> Iterator[Cluster]:
    """The module's cluster with the Database CRD applied and Established."""
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=30s")
    yield shared_cluster


# -- custom resource definitions and custom resources ------------------------------------------


def test_crd_wait_established_reports_condition_met(kube: Cluster) -> None:
    result = kube.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=20s")
    assert result.stdout.strip() == f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} condition met"
    conditions = {c["type"]: c["status"] for c in kube.get_json("crd", CRD_NAME)["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"


def test_get_by_short_name_shows_printer_columns(kube: Cluster) -> None:
    apply(kube, database("columns", engine="mysql", version="8.0"))
    header, row = table(kube.kubectl("get", "db", "columns").stdout)
    assert header == ["NAME", "ENGINE", "VERSION", "READY"]
    assert row == ["columns", "mysql", "8.0"]  # status.ready not set yet: empty cell

    kube.kubectl("patch", "db", "columns", "--subresource=status", "--type=merge",
                 "-p", '{"status":{"ready":true}}')
    header, row = table(kube.kubectl("get", "database", "columns").stdout)
    assert row == ["columns", "mysql", "8.0", "true"]


def test_reapply_custom_resource_changes_it_and_bumps_generation(kube: Cluster) -> None:
    assert "created" in apply(kube, database("reapply", version="15")).stdout
    first = kube.get_json("db", "reapply")
    assert first["spec"]["replicas"] == 2 and first["metadata"]["generation"] == 1

    result = apply(kube, database("reapply", version="16", replicas=3))
    assert result.stdout.strip() == "database.example.com/reapply configured"
    second = kube.get_json("db", "reapply")
    assert (second["spec"]["version"], second["spec"]["replicas"]) == ("16", 3)
    assert second["metadata"]["generation"] == 2

    assert apply(kube, database("reapply", version="16", replicas=3)).stdout.strip().endswith("unchanged")
    assert kube.get_json("db", "reapply")["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]


def test_describe_custom_resource(kube: Cluster) -> None:
    apply(kube, database("described", engine="mysql", version="5.7"))
    text = kube.kubectl("describe", "db", "described").stdout
    for expected in ("Name:         described", "Kind:         Database", "API Version:  example.com/v1",
                     "Engine:    mysql", "Version:   5.7", "Events:"):
        assert expected in text, text


def test_invalid_custom_resource_is_refused_naming_both_fields(kube: Cluster) -> None:
    result = kube.kubectl("apply", "-f", str(MANIFESTS / "db-invalid.yaml"), check=False)
    assert result.returncode != 0
    assert 'The Database "bad" is invalid' in result.stderr
    assert 'spec.engine: Unsupported value: "oracle"' in result.stderr
    assert "spec.replicas: Invalid value: 9" in result.stderr
    assert is_gone(kube, "db", "bad")


@pytest.mark.parametrize("flags", [(), ("--server-side",)], ids=["client-side", "server-side"])
def test_unknown_field_is_refused_by_strict_validation(kube: Cluster, flags: tuple[str, ...]) -> None:
    name = "unknown-" + ("ssa" if flags else "csa")
    result = apply(kube, database(name, colour="red"), *flags, check=False)
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "spec.colour"' in result.stderr
    assert is_gone(kube, "db", name)


# -- built-in workloads -------------------------------------------------------------------------


def test_deployment_apply_wait_get_reapply(kube: Cluster) -> None:
    assert apply(kube, deployment("rollout")).stdout.strip() == "deployment.apps/rollout created"
    waited = kube.kubectl("wait", "--for=condition=Available", "deploy/rollout", "--timeout=30s")
    assert waited.stdout.strip() == "deployment.apps/rollout condition met"
    header, row = table(kube.kubectl("get", "deployment", "rollout").stdout)
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row[:4] == ["rollout", "1/1", "1", "1"]
    assert kube.get_json("deploy", "rollout")["metadata"]["generation"] == 1

    result = apply(kube, deployment("rollout", replicas=2, image="nginx:1.26"))
    assert result.stdout.strip() == "deployment.apps/rollout configured"
    live = kube.get_json("deploy", "rollout")
    assert live["metadata"]["generation"] == 2
    assert live["spec"]["replicas"] == 2
    assert [c["image"] for c in live["spec"]["template"]["spec"]["containers"]] == ["nginx:1.26"]
    kube.kubectl("wait", "--for=condition=Available", "deploy/rollout", "--timeout=30s")
    kube.kubectl("wait", "--for=jsonpath={.status.observedGeneration}=2", "deploy/rollout", "--timeout=30s")
    _, row = table(kube.kubectl("get", "deployment", "rollout").stdout)
    assert row[:4] == ["rollout", "2/2", "2", "2"]


def test_describe_deployment_shows_defaults_and_events(kube: Cluster) -> None:
    apply(kube, deployment("described"))
    uid = kube.get_json("deploy", "described")["metadata"]["uid"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "described.scaled"},
             "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "described",
                                "namespace": kube.namespace, "uid": uid},
             "reason": "ScalingReplicaSet", "message": "Scaled up replica set described-1 to 1",
             "type": "Normal", "source": {"component": "deployment-controller"}, "count": 1,
             "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}
    kube.kubectl("create", "-f", "-", input_text=as_yaml(event))
    kube.kubectl("wait", "--for=condition=Available", "deploy/described", "--timeout=30s")

    text = kube.kubectl("describe", "deployment", "described").stdout
    for expected in ("Name:                   described", "Selector:               app=described",
                     "StrategyType:           RollingUpdate",
                     "RollingUpdateStrategy:  25% max unavailable, 25% max surge",
                     "Image:         nginx:1.25", "Port:          80/TCP"):
        assert expected in text, text
    events = text[text.index("Events:"):]
    assert "ScalingReplicaSet" in events and "Scaled up replica set described-1 to 1" in events


def test_get_all_lists_deployments_and_services(kube: Cluster) -> None:
    kube.kubectl("create", "namespace", "everything")
    apply(kube, deployment("app"), namespace="everything")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "app"},
               "spec": {"selector": {"app": "app"}, "ports": [{"port": 80}]}}
    apply(kube, service, namespace="everything")
    lines = kube.kubectl("get", "all", "-n", "everything").stdout
    names = {row[0] for row in table(lines) if row and row[0] != "NAME"}
    assert {"deployment.apps/app", "service/app"} <= names, lines


# -- watch, wait, label, delete -------------------------------------------------------------------


WATCHES = [
    # kind, object, first cells, patch arguments, cells after the change
    ("configmap", configmap("watched", {"a": "1"}), ["watched", "1"],
     ("--type=merge", "-p", '{"data":{"b":"2","c":"3"}}'), ["watched", "3"]),
    ("database", database("watched", engine="mysql", version="8"), ["watched", "mysql", "8"],
     ("--subresource=status", "--type=merge", "-p", '{"status":{"ready":true}}'),
     ["watched", "mysql", "8", "true"]),
]


@pytest.mark.parametrize(("kind", "obj", "first", "patch", "changed"), WATCHES, ids=["configmap", "custom-resource"])
def test_get_watch_prints_the_change(kube: Cluster, kind: str, obj: dict[str, Any], first: list[str],
                                     patch: tuple[str, ...], changed: list[str]) -> None:
    apply(kube, obj)
    watch = Background(kube, "get", kind, "watched", "-w", "--request-timeout=20s")
    try:
        watch.wait_for_line(lambda line: line.split()[:len(first)] == first)
        kube.kubectl("patch", kind, "watched", *patch)
        watch.wait_for_line(lambda line: line.split()[:len(changed)] == changed)
    finally:
        watch.stop()
    assert watch.seen[0].split()[0] == "NAME"


def test_wait_for_delete_returns_when_the_object_is_gone(kube: Cluster) -> None:
    held = configmap("held", {"a": "1"})
    held["metadata"]["finalizers"] = ["example.com/hold"]
    apply(kube, held)
    kube.kubectl("delete", "configmap", "held", "--wait=false")
    assert kube.get_json("configmap", "held")["metadata"]["deletionTimestamp"]

    # -v=6 logs kubectl's requests: release the finalizer only once its watch is open, else a slow kubectl
    # start finds the object already gone and proves nothing
    waiter = Background(kube, "wait", "--for=delete", "configmap/held", "--timeout=30s", "-v=6")
    try:
        waiter.wait_for_line(lambda line: "watch=true" in line)
        assert waiter.process.poll() is None  # still held by the finalizer
        kube.kubectl("patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
        assert waiter.finish() == 0, waiter.seen
    finally:
        waiter.stop()
    assert "configmap/held condition met" in waiter.seen
    assert is_gone(kube, "configmap", "held")


def test_label_and_select(kube: Cluster) -> None:
    apply(kube, configmap("labelled", {"a": "1"}))
    assert kube.kubectl("label", "configmap", "labelled", "tier=gold").stdout.strip() == "configmap/labelled labeled"
    assert kube.get_json("configmap", "labelled")["metadata"]["labels"] == {"tier": "gold"}
    selected = kube.kubectl("get", "configmap", "-l", "tier=gold", "-o", "name").stdout.split()
    assert selected == ["configmap/labelled"]
    _, row = table(kube.kubectl("get", "configmap", "labelled", "--show-labels").stdout)
    assert row[-1] == "tier=gold"
    kube.kubectl("label", "configmap", "labelled", "tier-")
    assert kube.get_json("configmap", "labelled")["metadata"].get("labels", {}) == {}


@pytest.mark.parametrize(("kind", "obj", "printed"), [
    ("configmap", configmap("doomed", {"a": "1"}), 'configmap "doomed" deleted'),
    ("deployment", deployment("doomed"), 'deployment.apps "doomed" deleted'),
    ("database", database("doomed"), 'database.example.com "doomed" deleted'),
], ids=["configmap", "deployment", "custom-resource"])
def test_delete_removes_the_object(kube: Cluster, kind: str, obj: dict[str, Any], printed: str) -> None:
    apply(kube, obj)
    assert kube.get_json(kind, "doomed")["metadata"]["name"] == "doomed"
    assert kube.kubectl("delete", kind, "doomed").stdout.strip() == printed
    assert is_gone(kube, kind, "doomed")


# -- server-side apply ----------------------------------------------------------------------------


def managers(cluster: Cluster, *target: str) -> dict[str, Any]:
    obj = json.loads(cluster.kubectl("get", *target, "-o", "json", "--show-managed-fields").stdout)
    return {entry["manager"]: entry for entry in obj["metadata"].get("managedFields", [])}


def test_server_side_apply_create_update_conflict_and_force(kube: Cluster) -> None:
    created = apply(kube, configmap("ssa", {"a": "1", "b": "2"}), "--server-side")
    assert created.stdout.strip() == "configmap/ssa serverside-applied"
    updated = apply(kube, configmap("ssa", {"a": "1", "b": "3"}), "--server-side")
    assert updated.returncode == 0
    assert kube.get_json("configmap", "ssa")["data"] == {"a": "1", "b": "3"}
    owner = managers(kube, "configmap", "ssa")["kubectl"]
    assert owner["operation"] == "Apply"
    assert owner["fieldsV1"]["f:data"] == {"f:a": {}, "f:b": {}}

    conflict = apply(kube, configmap("ssa", {"a": "9"}), "--server-side", "--field-manager=intruder", check=False)
    assert conflict.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a' in conflict.stderr
    assert "--force-conflicts" in conflict.stderr
    assert kube.get_json("configmap", "ssa")["data"] == {"a": "1", "b": "3"}

    apply(kube, configmap("ssa", {"a": "9"}), "--server-side", "--field-manager=intruder", "--force-conflicts")
    assert kube.get_json("configmap", "ssa")["data"] == {"a": "9", "b": "3"}
    owners = managers(kube, "configmap", "ssa")
    assert owners["intruder"]["fieldsV1"]["f:data"] == {"f:a": {}}
    assert owners["kubectl"]["fieldsV1"]["f:data"] == {"f:b": {}}


def test_server_side_apply_removes_fields_no_longer_applied(kube: Cluster) -> None:
    apply(kube, deployment("ssa-web", replicas=2), "--server-side")
    slimmer = deployment("ssa-web", replicas=2)
    del slimmer["metadata"]["labels"]
    del slimmer["spec"]["template"]["spec"]["containers"][0]["ports"]
    apply(kube, slimmer, "--server-side")
    live = kube.get_json("deployment", "ssa-web")
    assert "app" not in live["metadata"].get("labels", {})
    assert "ports" not in live["spec"]["template"]["spec"]["containers"][0]
    assert live["metadata"]["generation"] == 2


# -- namespaces, protobuf bodies, dry run -------------------------------------------------------------


def test_create_namespace_and_configmap_then_delete_namespace_removes_contents(kube: Cluster) -> None:
    assert kube.kubectl("create", "namespace", "team").stdout.strip() == "namespace/team created"
    made = kube.kubectl("-n", "team", "create", "configmap", "c1", "--from-literal=x=1")
    assert made.stdout.strip() == "configmap/c1 created"
    assert kube.get_json("-n", "team", "configmap", "c1")["data"] == {"x": "1"}
    apply(kube, deployment("web"), namespace="team")
    apply(kube, database("orders"), namespace="team")

    deleted = kube.kubectl("delete", "namespace", "team", "--timeout=60s")
    assert deleted.stdout.strip() == 'namespace "team" deleted'
    assert is_gone(kube, "namespace", "team")
    for kind in ("configmaps", "deployments", "databases"):
        assert kube.get_json(kind, "-A", "--field-selector=metadata.namespace=team")["items"] == []


def test_dry_run_server_changes_nothing(kube: Cluster) -> None:
    apply(kube, deployment("dry", replicas=1))
    before = kube.get_json("deployment", "dry")

    changed = apply(kube, deployment("dry", replicas=4), "--dry-run=server")
    assert changed.stdout.strip() == "deployment.apps/dry configured (server dry run)"
    created = apply(kube, configmap("dry-new", {"a": "1"}), "--dry-run=server")
    assert created.stdout.strip() == "configmap/dry-new created (server dry run)"

    after = kube.get_json("deployment", "dry")
    assert after["spec"]["replicas"] == 1
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert is_gone(kube, "configmap", "dry-new")
