"""What `make run` does for a newcomer that kubectl and a second process then meet, with the real tools.

* The objects `up` installs carry the annotation real `kubectl apply` writes, byte for byte, so a
  later `kubectl apply` of the same file is a clean three-way merge (no "missing the
  last-applied-configuration annotation" warning).
* A metrics or probe port that is taken stops `hybrid-operator run` at once with exit code 2 and a
  message naming the flag to change, and ``host:0`` binds a free port instead.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient
from support.cluster import REPO, Cluster
from support.operator import OperatorProcess, apply, open_crd, wait_for

pytestmark = pytest.mark.integration

MANIFEST = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "page", "labels": {"app": "web"}}, "data": {"index.html": "<h1>café & co</h1>"}}


def test_kubectl_apply_writes_the_annotation_up_writes(cluster: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "page.yaml"
    path.write_text(yaml.safe_dump(MANIFEST))
    cluster.kubectl("apply", "-f", str(path))
    written = cluster.get_json("configmap", "page")["metadata"]["annotations"][objects.LAST_APPLIED]
    expected = {**MANIFEST, "metadata": {**MANIFEST["metadata"], "namespace": cluster.namespace}}
    assert written == objects.last_applied(expected)


def test_kubectl_apply_after_up_created_an_object_is_clean(cluster: Cluster, tmp_path: Path) -> None:
    client = ClusterClient(cluster.kubeconfig)
    document = {**MANIFEST, "metadata": {**MANIFEST["metadata"], "name": "made-by-up"}}
    assert client.apply_manifest(yaml.safe_load(yaml.safe_dump(document)), "hybrid-operator-up", create_only=True,
                                 namespace=cluster.namespace) == "created"
    path = tmp_path / "page.yaml"
    path.write_text(yaml.safe_dump({**document, "data": {"index.html": "changed"}}))
    applied = cluster.kubectl("apply", "-f", str(path))
    assert "configmap/made-by-up configured" in applied.stdout
    assert "Warning" not in applied.stderr and "last-applied" not in applied.stderr, applied.stderr
    assert cluster.get_json("configmap", "made-by-up")["data"] == {"index.html": "changed"}
    # a CRD, applied by up with server-side apply, then by the user with kubectl apply
    crd = REPO / "config" / "crd" / "web.example.com_websites.yaml"
    client.apply_manifest(yaml.safe_load(crd.read_text()), "hybrid-operator-up")
    again = cluster.kubectl("apply", "-f", str(crd))
    assert "Warning" not in again.stderr, again.stderr


def test_a_taken_metrics_port_names_the_flag_and_port_0_takes_a_free_one(cluster: Cluster, tmp_path: Path) -> None:
    apply(cluster, open_crd("Thing", "newcomer.example.com"))
    watches = tmp_path / "watches.yaml"
    (tmp_path / "site.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
    watches.write_text("- {group: newcomer.example.com, version: v1, kind: Thing, playbook: site.yml}\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "run", "--watches-file", str(watches),
                                 "--kubeconfig", str(cluster.kubeconfig), "--artifacts-dir", str(tmp_path / "runner"),
                                 "--metrics-bind-address", f"127.0.0.1:{port}",
                                 "--health-probe-bind-address", "127.0.0.1:0"],
                                env=cluster.env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "choose another --metrics-bind-address (host:0 takes a free port" in result.stderr
    assert "Traceback" not in result.stderr
    # the same operator, twice at once on free ports: each reports where it listens
    first = OperatorProcess(cluster, watches, tmp_path / "one")
    second = OperatorProcess(cluster, watches, tmp_path / "two")
    try:
        found = [wait_for(lambda p=p: p.endpoint("metrics"), "the metrics address in the log") for p in (first, second)]
        assert len(set(found)) == 2 and all(f.startswith("http://127.0.0.1:") for f in found)
        assert first.process.poll() is None and second.process.poll() is None
    finally:
        codes = (first.stop(), second.stop())
        cluster.kubectl("delete", "crd", "things.newcomer.example.com", "--ignore-not-found")
    assert codes == (0, 0)
