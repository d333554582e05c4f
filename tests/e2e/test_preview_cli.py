"""`hybrid-operator preview -f cr.yaml` against a cluster where the operator reconciled the samples.

A Database (Ansible role) and a Memcached (Helm chart) are reconciled first; previews of changed,
unchanged and broken resources must print what would change and leave every object untouched.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import REPO, Cluster
from support.operator import OperatorProcess, condition, get_or_none, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DATABASE = REPO / "config" / "samples" / "example_v1_database.yaml"
MEMCACHED = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
WATCHED = [("statefulset", "orders"), ("configmap", "orders-config"), ("service", "orders"),
           ("database", "orders"), ("deployment", "memcached-sample"), ("service", "memcached-sample"),
           ("memcached", "memcached-sample")]


@pytest.fixture(scope="module")
def reconciled(shared_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = shared_cluster
    cluster.kubectl("apply", "-f", str(REPO / "config" / "crd"))
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    operator = OperatorProcess(cluster, REPO / "watches.yaml", tmp_path_factory.mktemp("operator"))
    try:
        cluster.kubectl("apply", "-f", str(DATABASE), "-f", str(MEMCACHED))
        wait_for(lambda: ((get_or_none(cluster, "database", "orders") or {}).get("status") or {}).get("ready"),
                 "the Database to be ready")
        wait_for(lambda: (condition(get_or_none(cluster, "memcached", "memcached-sample") or {}, "Deployed")
                          or {}).get("status") == "True", "the Memcached release to be deployed")
        yield cluster
    finally:
        operator.stop()


def preview(cluster: Cluster, document: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "cr.yaml"
    path.write_text(yaml.safe_dump(document))
    return subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "preview", "-f", str(path),
                           "--watches-file", str(REPO / "watches.yaml"), "--namespace", cluster.namespace],
                          env=cluster.env(), cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


def versions(cluster: Cluster) -> dict[tuple[str, str], str]:
    return {(kind, name): cluster.get_json(kind, name)["metadata"]["resourceVersion"] for kind, name in WATCHED}


def sample(path: Path, **spec: Any) -> dict[str, Any]:
    document = dict(yaml.safe_load(path.read_text()))
    document["spec"] = {**document["spec"], **spec}
    return document


def test_unchanged_database_previews_no_change(reconciled: Cluster, tmp_path: Path) -> None:
    result = preview(reconciled, sample(DATABASE), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("no changes")


def test_database_replicas_change_prints_the_statefulset_diff_and_changes_nothing(
        reconciled: Cluster, tmp_path: Path) -> None:
    before = versions(reconciled)
    result = preview(reconciled, sample(DATABASE, replicas=3), tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"~ update apps/v1 StatefulSet {reconciled.namespace}/orders" in result.stdout
    assert "-  replicas: 1" in result.stdout and "+  replicas: 3" in result.stdout
    assert "ConfigMap" not in result.stdout, "only what changes is listed"
    assert versions(reconciled) == before
    assert reconciled.get_json("statefulset", "orders")["spec"]["replicas"] == 1
    assert reconciled.get_json("database", "orders")["spec"]["replicas"] == 1


def test_memcached_size_change_and_unchanged(reconciled: Cluster, tmp_path: Path) -> None:
    before = versions(reconciled)
    unchanged = preview(reconciled, sample(MEMCACHED), tmp_path)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    changed = preview(reconciled, sample(MEMCACHED, size=4), tmp_path)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert f"~ update apps/v1 Deployment {reconciled.namespace}/memcached-sample" in changed.stdout
    assert "-  replicas: 2" in changed.stdout and "+  replicas: 4" in changed.stdout
    assert versions(reconciled) == before


def test_new_database_lists_what_would_be_created(reconciled: Cluster, tmp_path: Path) -> None:
    document = sample(DATABASE)
    document["metadata"] = {"name": "fresh"}
    result = preview(reconciled, document, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    ns = reconciled.namespace
    for kind in (f"ConfigMap {ns}/fresh-config", f"Service {ns}/fresh", f"StatefulSet {ns}/fresh"):
        assert f"+ create {'apps/v1' if kind.startswith('StatefulSet') else 'v1'} {kind}" in result.stdout
    assert get_or_none(reconciled, "statefulset", "fresh") is None
    assert get_or_none(reconciled, "database", "fresh") is None


@pytest.mark.parametrize(("document", "message"), [
    ({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "memcached-sample"},
      "spec": {"image": "broken"}}, "can't evaluate field repository"),
    ({"apiVersion": "nope.example.com/v1", "kind": "Nope", "metadata": {"name": "x"}}, "not in the watches file"),
])
def test_errors_exit_2_with_the_reason(reconciled: Cluster, tmp_path: Path, document: dict[str, Any],
                                       message: str) -> None:
    before = versions(reconciled)
    result = preview(reconciled, document, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert versions(reconciled) == before
