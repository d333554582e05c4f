"""The real control plane (`cluster --control-plane real`) on a shared machine: etcd and the PKI are not
open to other local users, and the API server knows one token.

Every local user can connect to loopback, and etcd holds every Secret in the clear. So etcd must
refuse plain HTTP, TLS without a client certificate, and a client certificate of the *cluster* CA
(the controller-manager's: a Kubernetes credential must not open etcd); it must answer only
kube-apiserver's etcd client certificate. The PKI directory is 0700 with its keys and token file
0600, created so under ``umask 000``, and the token file holds one line: the admin. Needs the build
of `make kube` (marker ``kube``).
"""

from __future__ import annotations

import os
import signal
import ssl
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.cluster import free_port, wait_until
from support.realplane import needs_build

pytestmark = [pytest.mark.security, pytest.mark.integration, pytest.mark.kube, pytest.mark.slow]


def _etcd_port(launcher_pid: int) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode().split("\0")
            parent = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("PPid:"))
        except (OSError, StopIteration):
            continue
        if int(parent.split()[1]) == launcher_pid and args[0].endswith("/etcd"):
            client = next(arg for arg in args if arg.startswith("--listen-client="))
            return int(client.rsplit(":", 1)[1])
    raise AssertionError("no etcd child of the launcher")


def _health(url: str, context: ssl.SSLContext | None) -> str:
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as response:
            return f"{response.status} {response.read(200).decode(errors='replace')}"
    except urllib.error.HTTPError as refused:
        return f"HTTP {refused.code}"
    except (TimeoutError, urllib.error.URLError, ssl.SSLError, ConnectionError) as failed:
        return f"refused: {failed}"


@needs_build
def test_etcd_answers_only_the_apiserver_certificate_and_the_pki_is_private(tmp_path: Path) -> None:
    data, kubeconfig, port = tmp_path / "data", tmp_path / "kubeconfig", free_port()
    command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--control-plane", "real", "--port",
               str(port), "--data-dir", str(data), "--kubeconfig", str(kubeconfig)]
    log = (tmp_path / "cluster.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               preexec_fn=lambda: os.umask(0))  # noqa: PLW1509 -- no threads here
    try:
        wait_until("the real control plane's kubeconfig", lambda: kubeconfig.exists() or process.poll() is not None,
                   timeout=240)
        assert process.poll() is None, (tmp_path / "cluster.log").read_text()
        pki = data / "pki"
        etcd = f"https://127.0.0.1:{_etcd_port(process.pid)}/health"

        plain = _health(etcd.replace("https://", "http://"), None)
        assert not plain.startswith("200"), plain
        anonymous = ssl.create_default_context(cafile=str(pki / "etcd-ca.crt"))
        assert _health(etcd, anonymous).startswith("refused"), "etcd answered TLS without a client certificate"
        controller_manager = ssl.create_default_context(cafile=str(pki / "etcd-ca.crt"))
        controller_manager.load_cert_chain(pki / "controller-manager.crt", pki / "controller-manager.key")
        assert _health(etcd, controller_manager).startswith("refused"), \
            "etcd answered a client certificate of the cluster CA"
        apiserver = ssl.create_default_context(cafile=str(pki / "etcd-ca.crt"))
        apiserver.load_cert_chain(pki / "apiserver-etcd-client.crt", pki / "apiserver-etcd-client.key")
        assert _health(etcd, apiserver).startswith("200"), "etcd refused kube-apiserver's own certificate"

        assert stat.S_IMODE(pki.stat().st_mode) == 0o700
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for path in [*pki.glob("*.key"), pki / "tokens.csv", kubeconfig, data / "controller-manager.kubeconfig"]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        tokens = (pki / "tokens.csv").read_text().splitlines()
        assert len(tokens) == 1 and tokens[0].split(",")[1:3] == ["admin", "admin"], "the token file holds more"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=150) == 0
        log.close()
