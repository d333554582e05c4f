"""`hybrid-operator node`: the node agent is a plain API client, so it serves the embedded cluster too.

The embedded cluster started with `--no-simulated-node` has no Node and nothing that runs Pods; the agent,
a separate process given only the cluster's kubeconfig, registers the Node and runs bare Pods there as it
does on the real control plane (test_node_agent_real.py). Its Node is the embedded simulated node's to
the field (the session cluster runs one to compare with). Also: what the command says about a kubeconfig
it cannot use or a server it cannot reach.
"""

from __future__ import annotations

import ipaddress
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster, free_port, wait_until

pytestmark = pytest.mark.integration

NODE = "hybrid-node"


class Agent:
    """A `hybrid-operator node` process and its output."""

    def __init__(self, workdir: Path, kubeconfig: Path) -> None:
        self.log_path = workdir / "node.log"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hybrid_operator.cli", "node", "--kubeconfig", str(kubeconfig)],
                stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        wait_until("the node agent serving", lambda: self.process.poll() is not None or
                   f"hybrid-operator node {NODE} serving" in self.log_path.read_text(), timeout=60)
        assert self.process.poll() is None, self.log_path.read_text()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Agent]]:
    """An embedded cluster without its simulated node, and the agent serving it."""
    workdir = tmp_path_factory.mktemp("bare-cluster")
    cluster = Cluster(workdir, extra_args=("--no-simulated-node",))
    cluster.start()
    try:
        assert cluster.get_json("nodes")["items"] == []
        agent = Agent(workdir, cluster.kubeconfig)
        try:
            yield cluster, agent
        finally:
            if agent.process.poll() is None:
                agent.stop()
    finally:
        cluster.stop()


def bare_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def apply(cluster: Cluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", "default", "-f", "-", input_text=yaml.safe_dump_all(docs))


def _comparable(node: dict[str, Any]) -> dict[str, Any]:
    status = node["status"]
    return {"labels": node["metadata"]["labels"], "spec": node["spec"], "capacity": status["capacity"],
            "allocatable": status["allocatable"], "addresses": status["addresses"], "nodeInfo": status["nodeInfo"],
            "conditions": [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]]}


def test_the_agent_registers_the_embedded_simulated_node(bare: tuple[Cluster, Agent], shared_cluster: Cluster) -> None:
    cluster, _ = bare
    node = cluster.get_json("node", NODE)
    assert _comparable(node) == _comparable(shared_cluster.get_json("node", NODE))
    lease = cluster.get_json("lease", NODE, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == NODE
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


def test_bare_pods_are_scheduled_run_and_finish(bare: tuple[Cluster, Agent]) -> None:
    cluster, _ = bare
    apply(cluster, bare_pod("server"), bare_pod("task", restartPolicy="Never"))
    cluster.kubectl("wait", "--for=condition=Ready", "pod/server", "-n", "default", "--timeout=60s")
    server = cluster.get_json("pod", "server", "-n", "default")
    assert server["spec"]["nodeName"] == NODE
    assert ipaddress.ip_address(server["status"]["podIP"]) in ipaddress.ip_network("10.244.0.0/16")
    assert server["status"]["containerStatuses"][0]["image"] == "docker.io/library/busybox:latest"
    cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/task", "-n", "default",
                    "--timeout=60s")
    task = cluster.get_json("pod", "task", "-n", "default")
    assert task["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    cluster.kubectl("delete", "pod", "server", "task", "-n", "default", "--timeout=60s")


def test_a_pod_the_node_does_not_match_stays_pending(bare: tuple[Cluster, Agent]) -> None:
    cluster, _ = bare
    apply(cluster, bare_pod("picky", nodeSelector={"disktype": "ssd"}))

    def scheduled_condition() -> dict[str, Any] | None:
        conditions = cluster.get_json("pod", "picky", "-n", "default")["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    found = wait_until("the PodScheduled condition", scheduled_condition, timeout=30)
    assert (found["status"], found["reason"]) == ("False", "Unschedulable")
    time.sleep(1)
    pod = cluster.get_json("pod", "picky", "-n", "default")
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    cluster.kubectl("delete", "pod", "picky", "-n", "default")


def test_a_deleted_node_is_registered_again(bare: tuple[Cluster, Agent]) -> None:
    cluster, _ = bare
    before = cluster.get_json("node", NODE)["metadata"]["uid"]
    cluster.kubectl("delete", "node", NODE)
    wait_until("the Node registered again", lambda: cluster.kubectl(
        "get", "node", NODE, "-o", "jsonpath={.metadata.uid}", check=False).stdout not in ("", before), timeout=30)


def test_the_agent_stops_on_sigterm(bare: tuple[Cluster, Agent]) -> None:
    _, agent = bare
    assert agent.stop() == 0
    assert "node agent stopped" in agent.log_path.read_text()


def _node(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "node", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=cwd)


def test_a_kubeconfig_the_agent_cannot_use_is_refused_naming_the_field(tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
              "users": [{"name": "u", "user": {"exec": {"command": "get-token", "apiVersion":
                                                         "client.authentication.k8s.io/v1"}}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = _node("--kubeconfig", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"hybrid-operator node: {path}: the user runs an exec plugin, which the node "
                                     "agent does not run: give it a kubeconfig with a token or a client certificate")

    result = _node("--kubeconfig", str(path), "--context", "other", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"hybrid-operator node: {path}: no context named 'other' in contexts"


def test_a_server_the_agent_cannot_reach_is_reported(tmp_path: Path) -> None:
    port = free_port()
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                     "insecure-skip-tls-verify": True}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
              "users": [{"name": "u", "user": {"token": "a-secret-token-value"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = _node("--kubeconfig", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"hybrid-operator node: cannot reach the API server https://127.0.0.1:{port}: ")
    assert "a-secret-token-value" not in result.stderr + result.stdout
