"""`hybrid-operator cluster --control-plane real`: etcd, kube-apiserver and kube-controller-manager built by
`make kube`, started on loopback, used with real kubectl, stopped with SIGINT, restarted on the same data.

The `kube` tests need the build in the cache (`make kube`; `make test-kube` builds and runs them) and are
skipped with a one-line reason without it. The missing-build message is checked always.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid_operator.localcluster.realplane import build
from support.cluster import Cluster, free_port, wait_until

pytestmark = pytest.mark.integration


def _built() -> str | None:
    """Why the kube tests cannot run here, or None when the binaries are in the cache."""
    try:
        build.binaries()
    except build.BuildMissing:
        return f"no real control plane {build.RELEASE} in {build.release_dir()}/bin: run `make kube`"
    return None


needs_build = pytest.mark.skipif(_built() is not None, reason=_built() or "")


class RealCluster(Cluster):
    """The support Cluster, started with --control-plane real, given time to stop three processes in turn."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, extra_args=("--control-plane", "real"))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=150)
        self.process = None
        return code


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
    stopping = re.findall(r"component stopping component=(\S+)", log)
    assert stopping == ["kube-controller-manager", "kube-apiserver", "etcd"], log[-3000:]
    assert all(not Path(f"/proc/{pid}").exists() for pid in components), "a component outlived the stop"

    # the same data dir again: etcd's data, the PKI and the admin token are reused
    cluster.start(timeout=240)
    try:
        assert cluster.get_json("deployment", "web", "-n", "default")["metadata"]["name"] == "web"
    finally:
        assert cluster.stop(signal.SIGTERM) == 0


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
