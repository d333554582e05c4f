"""The pieces every chaos scenario is built from: the processes, the API, waiting, measuring.

A :class:`ClusterProcess` and :class:`OperatorProcess` are started as a user starts them
(``python -m hybrid_operator.cli cluster|run``), on 127.0.0.1 only, each in a session of its own so
that a ``kill -9`` hits exactly the process meant, and with a parent-death signal (SIGTERM), so
that a suite that is killed (a CI timeout) leaves none of them running. :class:`Api` reads and
writes through the project's kubernetes client adapter; :func:`raw_create` goes around it for the
durability test (what counts there is exactly the HTTP answer). Every wait is bounded by a deadline.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator import processes
from hybrid_operator.kube.client import ClusterClient

PROJECT = Path(__file__).resolve().parent / "project"
GROUP = "chaos.hybrid.dev"
ANSIBLE_PERIOD = "ansible.sdk.operatorframework.io/reconcile-period"
HELM_PERIOD = "helm.sdk.operatorframework.io/reconcile-period"
HELM_KINDS = frozenset({"Bulk", "Tiny", "Echo", "Twin"})

logging.getLogger("hybrid_operator").setLevel(logging.CRITICAL)  # the API's outages are expected here


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(probe: Callable[[], Any], timeout: float, interval: float = 0.2) -> float | None:
    """Seconds until ``probe()`` was truthy (exceptions count as falsy), None after ``timeout``."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(Exception):
            if probe():
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(interval)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=10)


class Api:
    """Reads and writes through the project's client adapter (with the kubeconfig's token and CA)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.client = ClusterClient(kubeconfig, user_agent="hybrid-operator-chaos")

    def get(self, path: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.client.request("GET", path, timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def send(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        return self.client.request(method, path, body, content_type, timeout=10)

    def merge(self, path: str, body: dict[str, Any]) -> Any:
        return self.send("PATCH", path, body, "application/merge-patch+json")

    def apply_file(self, path: Path) -> None:
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict):
                self.client.apply_manifest(document, "hybrid-operator-chaos")

    def items(self, path: str) -> list[dict[str, Any]]:
        return list((self.get(path) or {}).get("items") or [])


def cr_path(kind: str, name: str = "", namespace: str = "default", sub: str = "") -> str:
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{kind.lower()}s"
    return "/".join(part for part in (path, name, sub) if part)


def cr(kind: str, name: str, spec: dict[str, Any], period: str = "10m", namespace: str = "default") -> dict[str, Any]:
    annotation = HELM_PERIOD if kind in HELM_KINDS else ANSIBLE_PERIOD
    return {"apiVersion": f"{GROUP}/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "annotations": {annotation: period}}, "spec": spec}


def condition(obj: dict[str, Any] | None, kind: str) -> str:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return str(entry.get("status"))
    return ""


class ClusterProcess:
    """``hybrid-operator cluster`` on a free loopback port; restartable on the same port and data."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.data_dir = workdir / "data"
        self.kubeconfig = workdir / "kubeconfig"
        self.log = workdir / "cluster.log"
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 60) -> None:
        self.kubeconfig.unlink(missing_ok=True)
        command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "cluster", "--port",
                   str(self.port), "--data-dir", str(self.data_dir), "--kubeconfig", str(self.kubeconfig),
                   *self.extra]
        with self.log.open("ab") as out:
            # the preexec_fn only calls prctl(2) (writer threads may be running: the burst)
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=processes.parent_death_signal(signal.SIGTERM))  # noqa: PLW1509
        if wait_until(self.kubeconfig.exists, timeout, 0.05) is None:
            raise RuntimeError(f"the cluster did not start within {timeout}s (log: {self.log})")

    def api(self) -> Api:
        return Api(self.kubeconfig)

    def kill9(self) -> None:
        assert self.process is not None
        stop(self.process, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


@dataclass
class OperatorProcess:
    """``hybrid-operator run`` for one watches file, its JSON log read incrementally."""

    cluster: ClusterProcess
    watches: Path
    workdir: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _records: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0
    _started_at: int = 0

    @property
    def artifacts(self) -> Path:
        return self.workdir / "runner"

    @property
    def log(self) -> Path:
        return self.workdir / "operator.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def scope(self) -> str:
        return processes.scope_of(self.artifacts)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "run",
                   "--watches-file", str(self.watches), "--kubeconfig", str(self.cluster.kubeconfig),
                   "--artifacts-dir", str(self.artifacts), "--metrics-bind-address", "0",
                   "--health-probe-bind-address", "0", "--graceful-shutdown-timeout", "5s", *self.args]
        env = {**os.environ, "HOME": str(self.workdir / "home"), **self.env}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.watches.parent, start_new_session=True,
                                            preexec_fn=processes.parent_death_signal(signal.SIGTERM))  # noqa: PLW1509

    def started(self) -> bool:
        """Startup done (sweep included) and watching: the log line of this process's kopf start."""
        return any(r.get("msg") == "watching started" for r in self.records()[self._started_at:])

    def restart(self) -> None:
        self._started_at = len(self.records())
        self.start()

    def kill9(self) -> None:
        assert self.process is not None
        stop(self.process, signal.SIGKILL)

    def stop(self) -> int:
        return stop(self.process) if self.process is not None else 0

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return self._records
        with self.log.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        for line in data[:complete].splitlines():
            if line.startswith(b"{"):
                with contextlib.suppress(json.JSONDecodeError):
                    self._records.append(json.loads(line))
        return self._records

    def said(self, message: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("msg") == message]

    def runs(self, name: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.said("run finished") if name is None or r.get("cr") == name]

    def children(self, *needles: str) -> list[int]:
        """Processes carrying this operator's scope (helm, ansible-playbook, ...) whose argv has every needle."""
        return [pid for pid in processes.leftovers(self.scope)
                if all(needle in command_line(pid) for needle in needles)]


def helm_actions(operator: OperatorProcess, release: str) -> list[int]:
    """helm processes of ``operator`` installing or upgrading ``release`` for real (no dry run)."""
    return [pid for pid in operator.children("helm", release)
            if (" install " in command_line(pid) or " upgrade " in command_line(pid))
            and "--dry-run" not in command_line(pid)]


# -- raw HTTPS, for the durability test ---------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    port: int
    token: str
    context: ssl.SSLContext

    @classmethod
    def of(cls, cluster: ClusterProcess) -> Endpoint:
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        return cls(cluster.port, str(config["users"][0]["user"]["token"]), ssl.create_default_context(cadata=ca))


@contextlib.contextmanager
def connection(endpoint: Endpoint) -> Iterator[http.client.HTTPSConnection]:
    conn = http.client.HTTPSConnection("127.0.0.1", endpoint.port, context=endpoint.context, timeout=10)
    try:
        yield conn
    finally:
        conn.close()


def raw_request(conn: http.client.HTTPSConnection, endpoint: Endpoint, method: str, path: str,
                body: Any = None) -> int:
    """One request on a keep-alive connection; the HTTP status (the connection may be reset)."""
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {endpoint.token}", "Accept": "application/json",
               "Content-Type": "application/json"}
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    response.read()
    return int(response.status)

