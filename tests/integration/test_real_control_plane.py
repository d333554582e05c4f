"""`hybrid-operator cluster --control-plane real`: etcd, kube-apiserver and kube-controller-manager built by
`make kube`, started on loopback, used with real kubectl, stopped with SIGINT, restarted on the same data.

The `kube` tests need the build in the cache (`make kube`; `make test-kube` builds and runs them) and are
skipped with a one-line reason without it. The missing-build message, the refusals before anything
starts and the failure report are checked always (no build needed).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid_operator.localcluster.realplane import build, launcher
from support.cluster import free_port, wait_until
from support.realplane import RealCluster, needs_build

pytestmark = pytest.mark.integration


def _children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command names."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if int(fields.get("PPid", "0")) == pid:
            found[int(entry.name)] = fields.get("Name", "").strip()
    return found


def _listening(pids: set[int]) -> list[str]:
    """`ss -ltnp` local addresses of the listening TCP sockets held by ``pids``."""
    output = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    addresses = []
    for line in output.splitlines():
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            addresses.append(line.split()[3])
    return addresses


@pytest.mark.kube
@pytest.mark.slow
@needs_build
def test_real_control_plane_serves_kubectl_runs_controllers_and_stops_cleanly(tmp_path: Path) -> None:
    cluster = RealCluster(tmp_path)
    cluster.start(timeout=240)
    assert cluster.process is not None
    try:
        namespaces = cluster.kubectl("get", "ns", "-o", "name").stdout.split()
        assert {"namespace/default", "namespace/kube-system", "namespace/kube-public"} <= set(namespaces)
        version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"] == build.RELEASE

        # the controller-manager runs: a Deployment gets its ReplicaSet, and default gets its ServiceAccount
        cluster.kubectl("create", "deployment", "web", "--image=registry.invalid/web:1", "-n", "default")
        owner = wait_until("the Deployment's ReplicaSet", lambda: [
            rs for rs in cluster.get_json("replicasets", "-n", "default")["items"]
            if any(ref["kind"] == "Deployment" and ref["name"] == "web"
                   for ref in rs["metadata"].get("ownerReferences", []))], timeout=90)
        assert owner[0]["spec"]["replicas"] == 1
        wait_until("the default ServiceAccount", lambda: cluster.kubectl(
            "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0, timeout=60)
        # and the simulated node (the node agent, a thread of the launcher) runs its Pod
        cluster.kubectl("rollout", "status", "deployment/web", "-n", "default", "--timeout=120s")
        pod = cluster.get_json("pods", "-n", "default", "-l", "app=web")["items"][0]
        assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("hybrid-node", "Running")

        # three components, each listening on loopback only (the API server on the port asked for)
        components = _children(cluster.process.pid)
        assert sorted(components.values()) == ["etcd", "kube-apiserver", "kube-controller"]  # /proc: 15 characters
        addresses = _listening(set(components))
        assert f"127.0.0.1:{cluster.port}" in addresses
        assert len(addresses) >= 3  # the API server, etcd's client and peer ports
        assert all(address.startswith("127.0.0.1:") for address in addresses), addresses
    finally:
        code = cluster.stop(signal.SIGINT)
    assert code == 0
    log = cluster.log_path.read_text()
    stopping = re.findall(r"(?:component|node agent) stopping (?:component|node)=(\S+)", log)
    assert stopping == ["hybrid-node", "kube-controller-manager", "kube-apiserver", "etcd"], log[-3000:]
    assert all(not Path(f"/proc/{pid}").exists() for pid in components), "a component outlived the stop"

    # the same data dir again: etcd's data, the PKI and the admin token are reused; no simulated node this time
    restarted_at = cluster.log_path.stat().st_size
    cluster.extra_args = (*cluster.extra_args, "--no-simulated-node")
    cluster.start(timeout=240)
    try:
        assert cluster.get_json("deployment", "web", "-n", "default")["metadata"]["name"] == "web"
    finally:
        assert cluster.stop(signal.SIGTERM) == 0
    with cluster.log_path.open() as restarted:
        restarted.seek(restarted_at)
        second = restarted.read()
    assert "component stopping component=etcd" in second and "node agent" not in second, second[-3000:]


def test_without_a_build_the_real_control_plane_names_make_kube(tmp_path: Path) -> None:
    env = dict(os.environ, HYBRID_CACHE=str(tmp_path / "empty-cache"))
    result = subprocess.run(
        [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--control-plane", "real", "--port",
         str(free_port()), "--data-dir", str(tmp_path / "data"), "--kubeconfig", str(tmp_path / "kubeconfig")],
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "run `make kube`" in lines[0] and str(tmp_path / "empty-cache") in lines[0]
    assert not (tmp_path / "kubeconfig").exists()
    assert not (tmp_path / "data").exists()


def test_a_taken_port_and_a_held_data_dir_are_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_CACHE", str(tmp_path / "cache"))
    bin_dir = tmp_path / "cache/kube" / build.RELEASE / "bin"
    bin_dir.mkdir(parents=True)
    for name in build.COMPONENTS:  # never run: the port is checked first
        (bin_dir / name).write_text("#!/bin/sh\nexit 99\n")
        (bin_dir / name).chmod(0o755)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert launcher.port_taken(port)
        options = launcher.RealOptions(port=port, data_dir=tmp_path / "data")
        with pytest.raises(launcher.ControlPlaneError, match=f"cannot serve on 127.0.0.1:{port}: the port is in use"):
            launcher.serve_forever(options)
    assert not (tmp_path / "data").exists()
    assert not launcher.port_taken(port)
    layout = launcher.Layout(tmp_path / "data")
    with launcher.data_dir_lock(layout), pytest.raises(launcher.ControlPlaneError, match="in use by another"), \
            launcher.data_dir_lock(layout):
        pass
    with launcher.data_dir_lock(layout):  # released: taken again
        pass


def test_a_failure_names_the_component_and_quotes_only_this_run_of_its_log(tmp_path: Path) -> None:
    log_path = tmp_path / "etcd.log"
    log_path.write_text("old run: fine\n")
    component = launcher.Component("etcd", ["/bin/sh", "-c", "echo 'bad flag --x' >&2; exit 3"], log_path)
    component.start()
    assert component.process is not None
    component.process.wait(timeout=10)
    message = str(component.failure("did not start"))
    assert message.startswith(f"etcd did not start: it exited with code 3 (log: {log_path})")
    assert "bad flag --x" in message and "old run" not in message
    component.stop()
