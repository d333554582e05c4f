"""`hybrid-operator up` (what `make run` runs) as a new user meets it, driven by a separate kubectl.

Starts `up` from the repository (local cluster + CRDs + operator + samples), waits until every sample
resource reaches its success condition, checks what `kubectl get` shows, deletes each sample and
checks that what it created goes, and finally compares every request the operator side made (from the
cluster's audit log) against the ClusterRole in config/rbac.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hybrid_operator.authoring import rbac
from support.cluster import REPO, Cluster, free_port
from support.operator import condition, get_or_none, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# user agents of the test's own clients and of `up` installing CRDs and samples (what a user would do
# with kubectl); everything else is the operator or its automation
TEST_CLIENTS = ("kubectl/", "hybrid-operator-up/")


class UpProcess:
    """`hybrid-operator up` with its default, relative paths (.hybrid/...), run from a fresh directory."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.cluster = Cluster(workdir, port=self.port)
        self.cluster.data_dir = workdir / ".hybrid" / "cluster"
        self.cluster.kubeconfig = workdir / ".hybrid" / "kubeconfig"
        self.audit = workdir / "audit.jsonl"
        self.log_path = workdir / "up.log"
        command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "up",
                   "--port", str(self.port), "--watches-file", str(REPO / "watches.yaml"),
                   "--crd-dir", str(REPO / "config" / "crd"), "--samples-dir", str(REPO / "config" / "samples"),
                   "--audit-log", str(self.audit), "--no-summary",
                   "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                            stdin=subprocess.DEVNULL, env=self.cluster.env())

    def stop(self) -> int:
        self.process.terminate()
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    process = UpProcess(tmp_path_factory.mktemp("up"))
    try:
        wait_for(lambda: process.cluster.kubeconfig.exists() or process.process.poll() is not None,
                 "up to start the local cluster", timeout=60)
        assert process.process.poll() is None, process.log_path.read_text()
        yield process
    finally:
        assert process.stop() == 0, process.log_path.read_text()[-3000:]


def succeeded(cluster: Cluster, kind: str, name: str, condition_type: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, kind, name)
    found = condition(obj, condition_type) if obj else None
    return obj if found and found["status"] == "True" else None


def test_every_sample_reaches_success(up: UpProcess) -> None:
    cluster = up.cluster
    for kind, name, kind_condition in (("website", "hello", "Successful"), ("realibox", "box-sample", "Successful"),
                                       ("database", "orders", "Successful"), ("database", "inventory", "Successful"),
                                       ("memcached", "memcached-sample", "Deployed"),
                                       ("foo", "foo-01", "Successful"), ("foo", "foo-02", "Successful")):
        wait_for(lambda k=kind, n=name, c=kind_condition: succeeded(cluster, k, n, c),
                 f"{kind} {name} to reach {kind_condition}=True", timeout=180)
    wait_for(lambda: cluster.get_json("db", "orders").get("status", {}).get("ready") is True, "orders to be ready")
    table = cluster.kubectl("get", "db").stdout.splitlines()
    assert table[0].split() == ["NAME", "ENGINE", "VERSION", "READY"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert rows["orders"] == ["postgres", "16", "true"]
    # the summary degrades to log lines without a terminal
    lines = [json.loads(line) for line in up.log_path.read_text().splitlines() if line.startswith("{")]
    assert any(r.get("msg") == "resource status" and r.get("object") == "default/hello" for r in lines)


def test_deleting_each_sample_removes_what_it_created(up: UpProcess) -> None:
    cluster = up.cluster
    wait_for(lambda: succeeded(cluster, "website", "hello", "Successful"), "hello", timeout=180)
    children = {
        ("website", "hello"): [("deployment", "hello-web"), ("configmap", "hello-content")],
        ("realibox", "box-sample"): [("pod", "box-sample-pod")],
        ("database", "orders"): [("statefulset", "orders"), ("service", "orders"), ("configmap", "orders-config")],
        ("memcached", "memcached-sample"): [],
    }
    services = cluster.get_json("services", "-l", "app.kubernetes.io/instance=memcached-sample")["items"]
    children[("memcached", "memcached-sample")] = [("service", s["metadata"]["name"]) for s in services]
    assert children[("memcached", "memcached-sample")], "the chart creates a Service"
    for (kind, name), owned in children.items():
        for child in owned:
            assert get_or_none(cluster, *child) is not None, f"{child} exists before deleting {kind} {name}"
        cluster.kubectl("delete", kind, name, "--timeout=120s")
        for child in owned:
            wait_for(lambda c=child: get_or_none(cluster, *c) is None, f"{child} to go with {kind} {name}")


def test_config_applies_and_rbac_covers_what_the_operator_used(up: UpProcess, tmp_path: Path) -> None:
    cluster = up.cluster
    cluster.kubectl("apply", "-f", str(REPO / "config" / "crd"), "-f", str(REPO / "config" / "rbac"),
                    "-f", str(REPO / "config" / "manager"))
    role = cluster.get_json("clusterrole", "hybrid-operator")
    time.sleep(1)  # let in-flight requests land in the audit log
    used: set[tuple[str, str, str]] = set()
    for line in up.audit.read_text().splitlines():
        entry = json.loads(line)
        if entry["userAgent"].startswith(TEST_CLIENTS):
            continue
        used.add((entry["group"], entry["resource"], entry["verb"]))
    assert (("", "pods", "create") in used and ("apps", "statefulsets", "patch") in used) or \
        ("apps", "statefulsets", "create") in used, "the audit log saw the automation's writes"
    missing = sorted(need for need in used
                     if not rbac.allows(role["rules"], rbac.Need(need[0], need[1], need[2], "audit")))
    assert not missing, f"config/rbac/role.yaml misses verbs the operator used: {missing}"
    assert yaml.safe_load((REPO / "config" / "rbac" / "role.yaml").read_text())["rules"] == role["rules"]
