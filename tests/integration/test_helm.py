"""Real helm v4 against `hybrid-operator cluster`, with helm's default flags.

Why this exists: the Helm operator mode and users' own charts rely on helm v4 working unmodified
against the embedded API server: OpenAPI-backed validation, server-side apply by default (and
client-side apply with strategic merge when asked), protobuf release Secrets, `--wait` on
kstatus, history, rollback and uninstall. Every test drives the helm binary over HTTPS and checks
the objects and release Secrets the server holds afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster

pytestmark = pytest.mark.integration

CHART = str(Path(__file__).resolve().parent / "charts" / "demo")
WAIT = ("--wait", "--timeout", "60s")


def objects(cluster: Cluster, release: str, namespace: str) -> dict[str, Any]:
    """The release's ConfigMap, Deployment and Service as kubectl sees them (None when absent)."""
    found: dict[str, Any] = {}
    for kind, name in (("configmap", f"{release}-config"), ("deployment", f"{release}-web"),
                       ("service", f"{release}-svc")):
        result = cluster.kubectl("get", "-n", namespace, kind, name, "-o", "json", "--show-managed-fields",
                                 check=False)
        found[kind] = json.loads(result.stdout) if result.returncode == 0 else None
        if result.returncode != 0:
            assert "(NotFound)" in result.stderr, result.stderr
    return found


def release_secrets(cluster: Cluster, release: str, namespace: str) -> list[str]:
    result = cluster.kubectl("get", "secrets", "-n", namespace, "-l", f"owner=helm,name={release}", "-o", "name")
    return sorted(result.stdout.split())


def history(cluster: Cluster, release: str, namespace: str) -> list[tuple[int, str]]:
    rows = json.loads(cluster.helm("history", release, "-n", namespace, "-o", "json").stdout)
    return [(row["revision"], row["status"]) for row in rows]


def managers(obj: dict[str, Any]) -> dict[str, str]:
    return {entry["manager"]: entry["operation"] for entry in obj["metadata"]["managedFields"]
            if entry.get("subresource") != "status"}


def install(cluster: Cluster, release: str, namespace: str, *flags: str) -> str:
    result = cluster.helm("install", release, CHART, "-n", namespace, "--create-namespace", *flags)
    return result.stdout


def test_install_status_manifest_and_list(shared_cluster: Cluster) -> None:
    output = install(shared_cluster, "first", "h-first", *WAIT)
    assert "STATUS: deployed" in output and "REVISION: 1" in output

    live = objects(shared_cluster, "first", "h-first")
    assert live["configmap"]["data"] == {"color": "blue", "extra": "present"}
    assert live["configmap"]["metadata"]["annotations"]["meta.helm.sh/release-name"] == "first"
    assert managers(live["configmap"]) == {"helm": "Apply"}  # v4 defaults to server-side apply
    ready = live["deployment"]["status"]
    assert (ready["readyReplicas"], ready["observedGeneration"]) == (1, 1)  # --wait waited for readiness
    assert live["service"]["spec"]["ports"][0]["port"] == 80

    status = shared_cluster.helm("status", "first", "-n", "h-first").stdout
    for expected in ("NAME: first", "NAMESPACE: h-first", "STATUS: deployed", "REVISION: 1"):
        assert expected in status, status

    manifest = shared_cluster.helm("get", "manifest", "first", "-n", "h-first").stdout
    for expected in ("name: first-config", "name: first-web", "name: first-svc", 'color: "blue"'):
        assert expected in manifest, manifest

    listed = json.loads(shared_cluster.helm("list", "-n", "h-first", "-o", "json").stdout)
    assert [(r["name"], r["revision"], r["status"], r["chart"]) for r in listed] == \
        [("first", "1", "deployed", "demo-0.1.0")]
    every = json.loads(shared_cluster.helm("list", "-A", "-o", "json").stdout)
    assert ("first", "h-first") in {(r["name"], r["namespace"]) for r in every}
    assert release_secrets(shared_cluster, "first", "h-first") == ["secret/sh.helm.release.v1.first.v1"]


def test_upgrade_changes_and_removes_values_then_rollback_restores(shared_cluster: Cluster) -> None:
    install(shared_cluster, "second", "h-second")
    shared_cluster.kubectl("label", "-n", "h-second", "configmap", "second-config", "team=blue")
    before = objects(shared_cluster, "second", "h-second")

    output = shared_cluster.helm("upgrade", "second", CHART, "-n", "h-second", *WAIT, "--set", "color=red",
                                 "--set", "extra=null", "--set", "replicas=3", "--set", "image=nginx:1.27").stdout
    assert "REVISION: 2" in output
    after = objects(shared_cluster, "second", "h-second")
    assert after["configmap"]["data"] == {"color": "red"}  # `extra` was dropped from the chart output
    assert after["configmap"]["metadata"]["labels"]["team"] == "blue"  # owned by kubectl-label, kept
    deployment = after["deployment"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert deployment["metadata"]["generation"] == before["deployment"]["metadata"]["generation"] + 1
    assert deployment["status"]["readyReplicas"] == 3
    assert history(shared_cluster, "second", "h-second") == [(1, "superseded"), (2, "deployed")]

    shared_cluster.helm("rollback", "second", "1", "-n", "h-second", *WAIT)
    restored = objects(shared_cluster, "second", "h-second")
    assert restored["configmap"]["data"] == {"color": "blue", "extra": "present"}
    assert restored["deployment"]["spec"]["replicas"] == 1
    assert restored["deployment"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert history(shared_cluster, "second", "h-second") == [(1, "superseded"), (2, "superseded"),
                                                             (3, "deployed")]


def test_uninstall_removes_objects_and_release_secrets(shared_cluster: Cluster) -> None:
    install(shared_cluster, "third", "h-third")
    shared_cluster.helm("upgrade", "third", CHART, "-n", "h-third", "--set", "color=green")
    assert len(release_secrets(shared_cluster, "third", "h-third")) == 2

    output = shared_cluster.helm("uninstall", "third", "-n", "h-third").stdout
    assert 'release "third" uninstalled' in output
    assert objects(shared_cluster, "third", "h-third") == {"configmap": None, "deployment": None, "service": None}
    assert release_secrets(shared_cluster, "third", "h-third") == []
    assert json.loads(shared_cluster.helm("list", "-n", "h-third", "-o", "json").stdout) == []
    missing = shared_cluster.helm("status", "third", "-n", "h-third", check=False)
    assert missing.returncode != 0 and "release: not found" in missing.stderr


def test_upgrade_install_twice_is_idempotent(shared_cluster: Cluster) -> None:
    args = ("upgrade", "--install", "again", CHART, "-n", "h-again", "--create-namespace", *WAIT)
    first = shared_cluster.helm(*args).stdout
    assert 'Release "again" does not exist. Installing it now.' in first
    before = objects(shared_cluster, "again", "h-again")

    second = shared_cluster.helm(*args).stdout
    assert 'Release "again" has been upgraded.' in second
    after = objects(shared_cluster, "again", "h-again")
    for kind in ("configmap", "deployment", "service"):
        assert after[kind]["metadata"]["resourceVersion"] == before[kind]["metadata"]["resourceVersion"], kind
    assert history(shared_cluster, "again", "h-again") == [(1, "superseded"), (2, "deployed")]


def test_client_side_apply_install_and_upgrade(shared_cluster: Cluster) -> None:
    install(shared_cluster, "classic", "h-classic", "--server-side=false", *WAIT)
    live = objects(shared_cluster, "classic", "h-classic")
    assert managers(live["configmap"]) == {"helm": "Update"}  # created by POST, not by apply
    assert live["configmap"]["data"] == {"color": "blue", "extra": "present"}
    # Someone else adds env to the container: a strategic merge keeps it, a JSON merge patch would not.
    shared_cluster.kubectl("patch", "-n", "h-classic", "deployment", "classic-web", "--type=strategic", "-p",
                           '{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"X","value":"1"}]}]}}}}')

    shared_cluster.helm("upgrade", "classic", CHART, "-n", "h-classic", "--server-side=false", *WAIT,
                        "--set", "extra=null", "--set", "replicas=2", "--set", "image=nginx:1.26")
    after = objects(shared_cluster, "classic", "h-classic")
    assert managers(after["configmap"]) == {"helm": "Update"}
    assert after["configmap"]["data"] == {"color": "blue"}
    containers = after["deployment"]["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"], c["ports"][0]["containerPort"], c["env"]) for c in containers] == \
        [("web", "nginx:1.26", 80, [{"name": "X", "value": "1"}])]  # merged by name, env kept
    assert after["deployment"]["spec"]["replicas"] == 2
    assert after["deployment"]["status"]["readyReplicas"] == 2
    assert history(shared_cluster, "classic", "h-classic") == [(1, "superseded"), (2, "deployed")]


def test_install_wait_legacy(shared_cluster: Cluster) -> None:
    # helm's legacy waiter finds the Deployment's new ReplicaSet (owned, same pod template) and waits
    # for its readyReplicas: the install only succeeds because the fake deployment controller made one.
    output = install(shared_cluster, "legacy", "h-legacy", "--wait=legacy", "--timeout", "30s")
    assert "STATUS: deployed" in output and "REVISION: 1" in output
    deployment = objects(shared_cluster, "legacy", "h-legacy")["deployment"]
    [replica_set] = shared_cluster.get_json("replicasets", "-n", "h-legacy")["items"]
    assert replica_set["metadata"]["ownerReferences"][0]["uid"] == deployment["metadata"]["uid"]
    assert replica_set["status"]["readyReplicas"] == deployment["spec"]["replicas"]


LIST_TEMPLATE = """\
apiVersion: v1
kind: List
items:
{{- range $name, $value := .Values.entries }}
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: {{ $.Release.Name }}-{{ $name }}
  data:
    value: {{ $value | quote }}
{{- end }}
"""


def list_chart(root: Path) -> Path:
    """A chart whose only template renders a ``kind: List`` of ConfigMaps, one per ``entries`` key."""
    chart = root / "listchart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: listchart\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("entries:\n  a: one\n  b: two\n")
    (chart / "templates" / "list.yaml").write_text(LIST_TEMPLATE)
    return chart


def list_values(cluster: Cluster, namespace: str, release: str) -> dict[str, str]:
    listed = cluster.get_json("configmaps", "-n", namespace, "-l", "app.kubernetes.io/managed-by=Helm")
    prefix = f"{release}-"
    return {item["metadata"]["name"].removeprefix(prefix): item["data"]["value"]
            for item in listed["items"] if item["metadata"]["name"].startswith(prefix)}


def test_chart_rendering_a_list_installs_upgrades_rolls_back_and_uninstalls(
        shared_cluster: Cluster, tmp_path: Path) -> None:
    """What some charts render (``extraManifests`` of a List): helm flattens it into its items."""
    chart, namespace = str(list_chart(tmp_path)), "h-list"
    shared_cluster.helm("install", "lst", chart, "-n", namespace, "--create-namespace", *WAIT)
    assert list_values(shared_cluster, namespace, "lst") == {"a": "one", "b": "two"}
    shared_cluster.helm("upgrade", "lst", chart, "-n", namespace, "--set", "entries.b=deux",
                        "--set", "entries.c=trois", *WAIT)
    assert list_values(shared_cluster, namespace, "lst") == {"a": "one", "b": "deux", "c": "trois"}
    shared_cluster.helm("rollback", "lst", "1", "-n", namespace, *WAIT)
    assert list_values(shared_cluster, namespace, "lst") == {"a": "one", "b": "two"}
    assert history(shared_cluster, "lst", namespace)[-1] == (3, "deployed")
    shared_cluster.helm("uninstall", "lst", "-n", namespace, "--wait")
    assert list_values(shared_cluster, namespace, "lst") == {}
    assert release_secrets(shared_cluster, "lst", namespace) == []
