"""The manifests in config/ as a user deploys them: `kubectl apply`/`delete` (and `make deploy`/`undeploy`)
against the embedded cluster, and the ClusterRole against what the sample automation really does.

The RBAC check derives its list of (group, resource, verb) from the repository itself, with the same
derivation as `hybrid-operator generate rbac` (hybrid_operator.rbac): the kinds in watches.yaml and
the Kubernetes modules called by the roles and playbooks and the kinds in the charts' templates.
Adding a kind to any of them without regenerating config/rbac/role.yaml (`make manifests`) fails here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hybrid_operator.authoring import generate, rbac
from hybrid_operator.authoring.rbac import Need, allows
from hybrid_operator.config import watches
from support.cluster import REPO, Cluster, find_binary
from support.operator import get_or_none, wait_for

pytestmark = pytest.mark.integration

CONFIG = REPO / "config"
MANIFEST_DIRS = [str(CONFIG / d) for d in ("crd", "rbac", "manager")]
NAMESPACE = "hybrid-operator-system"


@pytest.fixture
def cluster(own_cluster: Cluster) -> Cluster:
    """A server of each test's own: they apply and delete the project's CRDs, which every namespace sees."""
    return own_cluster


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifest(directory: str, kind: str) -> dict[str, Any]:
    paths = sorted((CONFIG / directory).glob("*.yaml"))
    (found,) = [d for p in paths for d in documents(p) if d["kind"] == kind]
    return found


# -- kubectl apply / delete and make deploy / undeploy ---------------------------------------------


def deployed_objects(cluster: Cluster) -> dict[str, dict[str, Any] | None]:
    return {
        "namespace": get_or_none(cluster, "namespace", NAMESPACE),
        "serviceaccount": get_or_none(cluster, "serviceaccount", "hybrid-operator", "-n", NAMESPACE),
        "clusterrole": get_or_none(cluster, "clusterrole", "hybrid-operator"),
        "clusterrolebinding": get_or_none(cluster, "clusterrolebinding", "hybrid-operator"),
        "deployment": get_or_none(cluster, "deployment", "hybrid-operator", "-n", NAMESPACE),
        "crd": get_or_none(cluster, "crd", "databases.example.com"),
    }


FILES = [arg for directory in MANIFEST_DIRS for arg in ("-f", directory)]


def test_kubectl_apply_then_delete_with_default_flags(cluster: Cluster) -> None:
    applied = cluster.kubectl("apply", *FILES)
    assert "error" not in applied.stderr.lower()
    objects = deployed_objects(cluster)
    assert all(objects.values()), {k: v is not None for k, v in objects.items()}
    deployment = objects["deployment"]
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "hybrid-operator"
    binding = objects["clusterrolebinding"]
    assert binding is not None
    subject = {"kind": "ServiceAccount", "name": "hybrid-operator", "namespace": NAMESPACE}
    assert binding["subjects"] == [subject]
    # the fake controller marks the Deployment available (no image is pulled here)
    wait_for(lambda: (get_or_none(cluster, "deployment", "hybrid-operator", "-n", NAMESPACE) or {})
             .get("status", {}).get("availableReplicas") == 1, "the operator Deployment to be available")

    again = cluster.kubectl("apply", *FILES)
    assert "created" not in again.stdout, "a second apply changes nothing"

    # Deleting the Namespace (first in config/rbac) takes its ServiceAccount and Deployment with it;
    # they may be gone by the time kubectl gets to them.
    cluster.kubectl("delete", "--ignore-not-found", *FILES, "--timeout=60s")
    gone = deployed_objects(cluster)
    assert [k for k, v in gone.items() if v is not None and k != "namespace"] == []
    namespace = gone["namespace"]
    assert namespace is None or namespace["status"]["phase"] == "Terminating"


def make(cluster: Cluster, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), target,
                           f"KUBECTL={find_binary('kubectl')}"],
                          env=cluster.env(), capture_output=True, text=True, timeout=180, check=False)


def test_make_deploy_and_undeploy_use_kubeconfig(cluster: Cluster) -> None:
    deployed = make(cluster, "deploy")
    assert deployed.returncode == 0, deployed.stderr
    assert "deployment.apps/hybrid-operator created" in deployed.stdout
    assert all(deployed_objects(cluster).values())

    removed = make(cluster, "undeploy")
    assert removed.returncode == 0, removed.stderr
    left = deployed_objects(cluster)
    assert [k for k, v in left.items() if v is not None and k != "namespace"] == []

    twice = make(cluster, "undeploy")
    assert twice.returncode == 0, f"undeploy is idempotent: {twice.stderr}"


def test_docker_build_explains_a_missing_engine(tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    command = ["make", "--no-print-directory", "-C", str(REPO), "docker-build", f"DOCKER={fake}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "cannot reach a Docker engine" in result.stderr
    assert "build" not in result.stdout, "docker build is not attempted"


# -- the Deployment's settings --------------------------------------------------------------------


def test_manager_runs_non_root_with_probes_resources_and_watch_namespace() -> None:
    deployment = manifest("manager", "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 1001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    probes = {kind: container[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert probes["livenessProbe"]["path"] == "/healthz" and probes["readinessProbe"]["path"] == "/readyz"
    assert {ports.get(p["port"], p["port"]) for p in probes.values()} == {8081}
    assert set(container["resources"]) == {"requests", "limits"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["WATCH_NAMESPACE"] == ""
    assert container["command"][:2] == ["hybrid-operator", "run"]


# -- RBAC covers what the automation does -----------------------------------------------------------
# The derivation is hybrid_operator.rbac's (shared with `hybrid-operator generate rbac`).


def all_needs() -> list[Need]:
    return generate.needs(REPO, watches.load(REPO / "watches.yaml"))


def test_derived_needs_include_what_the_samples_create() -> None:
    needs = {(n.group, n.resource, n.verb) for n in all_needs()}
    for expected in [("apps", "statefulsets", "create"), ("apps", "statefulsets", "delete"),
                     ("", "services", "create"), ("", "configmaps", "delete"),
                     ("apps", "deployments", "patch"),
                     ("", "pods", "create"), ("example.com", "databases/status", "patch"),
                     ("web.example.com", "websites/finalizers", "update"), ("apps", "statefulsets", "list")]:
        assert expected in needs, f"the RBAC check no longer sees {expected}"


@pytest.mark.parametrize(("text", "expected"), [
    ("apiVersion: v1\nkind: Service\n---\napiVersion: apps/v1\nkind: Deployment\n",
     [("v1", "Service"), ("apps/v1", "Deployment")]),
    ("{{- if .Values.x }}\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n{{- end }}\n",
     [("v1", "ServiceAccount")]),
    ("data:\n  kind: nested\n", []),
])
def test_template_kinds(text: str, expected: list[tuple[str, str]]) -> None:
    assert rbac.template_kinds(text) == expected


def test_cluster_role_allows_everything_the_operator_and_automation_do() -> None:
    rules = manifest("rbac", "ClusterRole")["rules"]
    missing = sorted({f"{n.group or 'core'} {n.resource} {n.verb} ({n.why})" for n in all_needs()
                      if not allows(rules, n)})
    assert missing == [], "config/rbac/role.yaml lacks:\n" + "\n".join(missing)


def test_cluster_role_grants_no_resource_nothing_needs() -> None:
    needed = {(n.group, n.resource) for n in all_needs()}
    granted = {(group, resource) for rule in manifest("rbac", "ClusterRole")["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert sorted(granted - needed) == []


def test_cluster_role_grants_no_wildcards_or_escalation() -> None:
    rules = manifest("rbac", "ClusterRole")["rules"]
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        rbac = {"clusterroles", "clusterrolebindings", "roles", "rolebindings"}
        assert not rbac & set(rule["resources"]), rule


def test_a_kind_without_a_rule_is_reported() -> None:
    rules = manifest("rbac", "ClusterRole")["rules"]
    assert not allows(rules, Need("batch", "cronjobs", "create", "a new kind"))
    assert not allows(rules, Need("example.com", "databases", "delete", "not needed"))
