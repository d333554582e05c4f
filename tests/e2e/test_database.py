"""The Database kind end to end: the `database` role run by `hybrid-operator run` on the embedded cluster.

Everything goes through what a user types: the repository's watches.yaml and CRDs, the sample
applied with kubectl, `kubectl get db`, spec changes with `kubectl patch`, and deletion. What the
role created is read back with kubectl.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from support.cluster import REPO, Cluster
from support.operator import OperatorProcess, get_or_none, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

StartOperator = Callable[..., OperatorProcess]
SAMPLE = REPO / "config" / "samples" / "example_v1_database.yaml"
NAME = yaml.safe_load(SAMPLE.read_text())["metadata"]["name"]
MYSQL_SAMPLE = REPO / "config" / "samples" / "example_v1_database_mysql.yaml"


@pytest.fixture(scope="module")
def crds(shared_cluster: Cluster) -> Cluster:
    shared_cluster.kubectl("apply", "-f", str(REPO / "config" / "crd"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    return shared_cluster


def ready_at(cluster: Cluster, generation: int, name: str = NAME) -> dict[str, Any] | None:
    """The Database once the role has reported it ready for ``generation`` of its spec."""
    obj = get_or_none(cluster, "database", name)
    status = (obj or {}).get("status") or {}
    done = status.get("ready") is True and status.get("observedGeneration", 0) >= generation
    return obj if done else None


def database(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Database",
            "metadata": {"name": name}, "spec": spec}


def statefulset(cluster: Cluster) -> dict[str, Any]:
    return dict(cluster.get_json("statefulset", NAME))


def test_sample_becomes_ready_scales_upgrades_and_is_cleaned_up(crds: Cluster,
                                                                 start_operator: StartOperator) -> None:
    cluster = crds
    start_operator(cluster, REPO / "watches.yaml")
    cluster.kubectl("apply", "-f", str(SAMPLE))

    db = wait_for(lambda: ready_at(cluster, 1), f"Database {NAME} to become ready")
    assert db["status"]["phase"] == "Running"
    assert "example.com/cleanup" in db["metadata"]["finalizers"]

    sts = statefulset(cluster)
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["serviceName"] == NAME
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:16"
    claim = sts["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    service = cluster.get_json("service", NAME)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["port"] == 5432
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "postgres", "containerPort": 5432, "protocol": "TCP"}]
    assert container["args"] == ["-c", "listen_addresses=*", "-c", "max_connections=200"]
    settings = cluster.get_json("configmap", f"{NAME}-config")
    assert settings["data"]["ENGINE"] == "postgres"
    assert settings["data"]["VERSION"] == "16"
    assert settings["data"]["PORT"] == "5432"

    table = cluster.kubectl("get", "db", NAME).stdout.splitlines()
    assert table[0].split() == ["NAME", "ENGINE", "VERSION", "READY"]
    assert table[1].split() == [NAME, "postgres", "16", "true"]

    # the other engine: its own port, settings file and image
    mysql_name = yaml.safe_load(MYSQL_SAMPLE.read_text())["metadata"]["name"]
    cluster.kubectl("apply", "-f", str(MYSQL_SAMPLE))
    wait_for(lambda: ready_at(cluster, 1, mysql_name), f"Database {mysql_name} to become ready")
    mysql = cluster.get_json("statefulset", mysql_name)["spec"]
    assert mysql["replicas"] == 2
    assert mysql["template"]["spec"]["containers"][0]["image"] == "mysql:8.4"
    assert mysql["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 3306
    assert mysql["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert "max_connections = 200" in cluster.get_json("configmap", f"{mysql_name}-config")["data"][
        "server-settings"]
    config_volume = next(v for v in mysql["template"]["spec"]["volumes"] if v["name"] == "config")
    assert config_volume["configMap"]["items"] == [{"key": "server-settings", "path": "hybrid-operator.cnf"}]

    # scaling: the StatefulSet follows spec.replicas and the Database is ready again at generation 2
    cluster.kubectl("patch", "db", NAME, "--type", "merge", "-p", json.dumps({"spec": {"replicas": 3}}))
    wait_for(lambda: ready_at(cluster, 2), "the scaled Database to be ready")
    assert statefulset(cluster)["spec"]["replicas"] == 3
    assert statefulset(cluster)["status"]["readyReplicas"] == 3

    # upgrading: a new version rolls the image tag (and the settings say so)
    cluster.kubectl("patch", "db", NAME, "--type", "merge", "-p", json.dumps({"spec": {"version": "17"}}))
    upgraded = wait_for(lambda: ready_at(cluster, 3), "the upgraded Database to be ready")
    assert upgraded["status"]["phase"] == "Running"
    containers = statefulset(cluster)["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] == "postgres:17"
    assert cluster.get_json("configmap", f"{NAME}-config")["data"]["VERSION"] == "17"

    # deletion: the finalizer re-runs the role with state: absent before the Database goes away
    cluster.kubectl("delete", "db", NAME, "--wait=true", "--timeout=120s")
    assert get_or_none(cluster, "database", NAME) is None
    for kind, child in (("statefulset", NAME), ("service", NAME), ("configmap", f"{NAME}-config")):
        assert get_or_none(cluster, kind, child) is None, f"{kind} {child} outlived its Database"


def test_invalid_database_is_refused_naming_both_fields(crds: Cluster) -> None:
    invalid = database("bad", {"engine": "oracle", "version": "19", "replicas": 9})
    result = crds.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(invalid), check=False)
    assert result.returncode != 0
    assert "spec.engine" in result.stderr and "oracle" in result.stderr
    assert "spec.replicas" in result.stderr
    assert get_or_none(crds, "database", "bad") is None


def test_database_without_engine_or_version_is_refused(crds: Cluster) -> None:
    missing = database("empty", {"replicas": 1})
    result = crds.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(missing), check=False)
    assert result.returncode != 0
    assert "spec.engine" in result.stderr and "spec.version" in result.stderr
    assert "Required value" in result.stderr
