"""Issue 12 item 3: the embedded cluster's secrets at rest are readable by their owner only.

The data dir holds ``state.db`` (the admin token and every Secret's data)
and the serving key; the kubeconfig carries the token.  Through a real
``hybrid-operator cluster`` process started with ``umask 000`` (so nothing
is private by accident): the data dir must be 0700, and the database, its
``-wal``/``-shm`` files, the serving key and the kubeconfig 0600 -- created so,
which the umask makes visible.  A data dir left with loose modes by an older
version is tightened when the server starts.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cluster import Cluster, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

SECRET_FILES = ("state.db", "state.db-wal", "state.db-shm", "server.key")


def start_with_open_umask(cluster: Cluster) -> None:
    """Start the cluster process under ``umask 000``: whatever is not created private ends up world-writable."""
    command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(cluster.port),
               "--data-dir", str(cluster.data_dir), "--kubeconfig", str(cluster.kubeconfig)]
    if cluster.kubeconfig.exists():
        cluster.kubeconfig.unlink()
    with cluster.log_path.open("ab") as log:
        cluster.process = subprocess.Popen(["bash", "-c", 'umask 000 && exec "$@"', "cluster", *command],
                                           stdout=log, stderr=subprocess.STDOUT, cwd=cluster.workdir)
    deadline = time.monotonic() + 30
    while not cluster.kubeconfig.exists():
        assert cluster.process.poll() is None, cluster.log_path.read_text()
        assert time.monotonic() < deadline, cluster.log_path.read_text()
        time.sleep(0.05)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_private(cluster: Cluster) -> None:
    assert mode(cluster.data_dir) == 0o700, f"data dir is {oct(mode(cluster.data_dir))}"
    for name in SECRET_FILES:
        path = cluster.data_dir / name
        assert path.exists(), f"{name} missing: {sorted(p.name for p in cluster.data_dir.iterdir())}"
        assert mode(path) & 0o077 == 0, f"{name} is {oct(mode(path))}"
    assert mode(cluster.kubeconfig) & 0o077 == 0, f"kubeconfig is {oct(mode(cluster.kubeconfig))}"


def write_a_secret(cluster: Cluster, name: str) -> None:
    response = raw_request(cluster, "POST", "/api/v1/namespaces/default/secrets",
                           {"metadata": {"name": name}, "stringData": {"password": "hunter2"}})
    assert response.status == 201, response.body


def test_secrets_at_rest_are_private_and_loose_modes_are_tightened(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    start_with_open_umask(cluster)
    try:
        write_a_secret(cluster, "first")  # the WAL and its index exist once something is written
        assert_private(cluster)
    finally:
        cluster.stop()

    # A data dir from an older version: everything world-readable.
    os.chmod(cluster.data_dir, 0o755)
    for name in SECRET_FILES:
        if (cluster.data_dir / name).exists():
            os.chmod(cluster.data_dir / name, 0o644)
    start_with_open_umask(cluster)
    try:
        write_a_secret(cluster, "second")
        assert_private(cluster)
    finally:
        cluster.stop()
