"""Start, watch and stop a real control plane: etcd, kube-apiserver, kube-controller-manager.

``hybrid-operator cluster --control-plane real`` (and ``up --control-plane real``) runs this in the
foreground with the embedded cluster's conventions: the API server on ``127.0.0.1:<--port>``, its state
under ``--data-dir`` (etcd's data in ``etcd/``, the PKI in ``pki/``, each component's log in ``logs/``),
and the admin kubeconfig written to ``--kubeconfig`` once ``/readyz`` answers. Nothing listens beyond
loopback: every component is given 127.0.0.1 (each binds every interface by default), etcd's ports are
free ones picked at each start, and the controller-manager serves nothing (``--secure-port=0``). With the
controller-manager, the simulated node runs too unless turned off: the node agent (:mod:`..nodeagent`),
in a thread of this process, started before the kubeconfig is written (so the Node is there when clients
come) and stopped first.

Each component runs in a session of its own, so a terminal's Ctrl-C reaches this process alone, which
stops them in order: controller-manager, API server, etcd (each SIGTERM, then SIGKILL after a grace
period). Should this process die, the kernel sends each child SIGTERM (parent-death signal). A
component that exits on its own ends the control plane, reported with the last lines of its log.
One data dir serves one control plane at a time (a lock file says so).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import yaml

from hybrid_operator import processes
from hybrid_operator.localcluster import files, tls
from hybrid_operator.localcluster.nodeagent.agent import AgentError, AgentThread
from hybrid_operator.localcluster.nodeagent.kubeconfig import Endpoint
from hybrid_operator.localcluster.realplane import build, pki

log = logging.getLogger(__name__)

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
#: kube-controller-manager's controllers (v1.36 names; `kube-controller-manager --help` lists them)
CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "cronjob-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "persistentvolume-binder-controller",
    # with the simulated node: Pods, claims and volumes that go, DaemonSets, finished Jobs' TTL, and the
    # Node's health (the agent's Lease heartbeat keeps it Ready)
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
    "ephemeral-volume-controller",
    "daemonset-controller",
    "ttl-after-finished-controller",
    "node-lifecycle-controller",
)
#: every request at Metadata level (who, what, the response code; never a body, so never a Secret)
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata"}]}
READY_TIMEOUT = 180.0
AGENT_TIMEOUT = 60.0
STOP_GRACE = 15.0
TAIL_LINES = 25


class ControlPlaneError(Exception):
    """The control plane could not start or a component stopped; the message says which and why."""


@dataclass(frozen=True)
class RealOptions:
    """What ``cluster --control-plane real`` was asked for."""

    port: int
    data_dir: Path
    kubeconfig: Path | None = Path(".hybrid/kubeconfig")
    audit_log: Path | None = None  # kube-apiserver's audit log (JSON lines, Metadata level)
    controllers: bool = True  # False: no controller-manager and no simulated node (--no-controllers)
    simulated_node: bool = True  # False: no node agent (--no-simulated-node)
    sharded_list_watch: bool = True  # the ShardedListAndWatch feature gate
    event_ttl: float = 3600.0
    release: str = build.RELEASE


@dataclass(frozen=True)
class Layout:
    """Where a data dir keeps each part of a real control plane."""

    data_dir: Path

    @property
    def etcd(self) -> Path:
        return self.data_dir / "etcd"

    @property
    def pki(self) -> Path:
        return self.data_dir / "pki"

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"

    @property
    def controller_manager_kubeconfig(self) -> Path:
        return self.data_dir / "controller-manager.kubeconfig"

    @property
    def audit_policy(self) -> Path:
        return self.data_dir / "audit-policy.yaml"

    @property
    def lock(self) -> Path:
        return self.data_dir / "real.lock"


def etcd_args(binaries: build.Binaries, keys: pki.Pki, layout: Layout, client_port: int, peer_port: int) -> list[str]:
    return [str(binaries.etcd), f"--data-dir={layout.etcd}",
            f"--listen-client=127.0.0.1:{client_port}", f"--listen-peer=127.0.0.1:{peer_port}",
            f"--cert-file={keys.etcd_cert}", f"--key-file={keys.etcd_key}", f"--trusted-ca-file={keys.etcd_ca_cert}"]


def apiserver_args(binaries: build.Binaries, keys: pki.Pki, layout: Layout, options: RealOptions,
                   etcd_port: int) -> list[str]:
    gate = "true" if options.sharded_list_watch else "false"
    args = [
        str(binaries.apiserver),
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={options.port}",
        f"--tls-cert-file={keys.apiserver_cert}", f"--tls-private-key-file={keys.apiserver_key}",
        f"--cert-dir={layout.pki / 'apiserver'}",
        f"--client-ca-file={keys.ca_cert}", f"--token-auth-file={keys.token_file}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={keys.service_account_pub}",
        f"--service-account-signing-key-file={keys.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--etcd-servers=https://127.0.0.1:{etcd_port}", f"--etcd-cafile={keys.etcd_ca_cert}",
        f"--etcd-certfile={keys.apiserver_etcd_cert}", f"--etcd-keyfile={keys.apiserver_etcd_key}",
        f"--feature-gates=ShardedListAndWatch={gate}",
        f"--event-ttl={int(options.event_ttl)}s",
        # the `kubernetes` Service's endpoints would be 127.0.0.1, which validation refuses (loopback),
        # and no Pod runs here to reach them
        "--endpoint-reconciler-type=none",
    ]
    if options.audit_log is not None:
        args += [f"--audit-log-path={options.audit_log.absolute()}", f"--audit-policy-file={layout.audit_policy}",
                 "--audit-log-format=json", "--audit-log-mode=blocking"]
    return args


def controller_manager_args(binaries: build.Binaries, keys: pki.Pki, layout: Layout) -> list[str]:
    return [
        str(binaries.controller_manager),
        f"--kubeconfig={layout.controller_manager_kubeconfig}",
        "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
        f"--controllers={','.join(CONTROLLERS)}",
        f"--service-account-private-key-file={keys.service_account_key}",
        f"--root-ca-file={keys.ca_cert}",
        "--use-service-account-credentials=true",
    ]


def controller_manager_kubeconfig(server: str, keys: pki.Pki) -> str:
    """The controller-manager's kubeconfig: our CA, and its client certificate (no token)."""
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "hybrid", "cluster": {"server": server, "certificate-authority": str(keys.ca_cert)}}],
        "users": [{"name": pki.CONTROLLER_MANAGER_USER, "user": {
            "client-certificate": str(keys.controller_manager_cert),
            "client-key": str(keys.controller_manager_key)}}],
        "contexts": [{"name": "hybrid", "context": {"cluster": "hybrid", "user": pki.CONTROLLER_MANAGER_USER}}],
        "current-context": "hybrid",
    }
    return yaml.safe_dump(config, sort_keys=False)


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``. Connections of a previous run waiting out TIME_WAIT do
    not count: kube-apiserver binds with SO_REUSEADDR (as Go does), and so does this probe."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def tail(path: Path, lines: int = TAIL_LINES, start: int = 0) -> str:
    """The last ``lines`` lines of a log written since offset ``start``."""
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Component:
    """One process of the control plane and its log."""

    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    log_start: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log = self.log_path.open("ab")
        log.info("component starting", extra={"component": self.name, "log": str(self.log_path)})
        # a session of its own (a Ctrl-C reaches the launcher alone, which stops the components in
        # order), and SIGTERM should the launcher die
        self.process = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=processes.parent_death_signal(signal.SIGTERM),  # noqa: PLW1509 -- async-signal-safe prctl only
        )

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def failure(self, what: str) -> ControlPlaneError:
        code = self.exited()
        state = f"exited with code {code}" if code is not None else "is still running"
        return ControlPlaneError(f"{self.name} {what}: it {state} (log: {self.log_path}); its last lines:\n"
                                 f"{tail(self.log_path, start=self.log_start)}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            log.info("component stopping", extra={"component": self.name, "pid": self.process.pid})
            self.process.send_signal(signal.SIGTERM)
            processes.wait_or_kill(self.process, STOP_GRACE)
            log.info("component stopped", extra={"component": self.name, "code": self.process.returncode})
        if self._log is not None:
            self._log.close()
            self._log = None


def _get(url: str, context: ssl.SSLContext, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code
    except (urllib.error.URLError, OSError):
        return 0


def _wait_ok(component: Component, url: str, context: ssl.SSLContext, token: str | None,
             stop: threading.Event, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while _get(url, context, token) != 200:
        if component.exited() is not None:
            raise component.failure("did not start")
        if stop.is_set():
            raise ControlPlaneError(f"stopped while waiting for {component.name}")
        if time.monotonic() > deadline:
            raise component.failure(f"was not ready within {timeout:.0f} s ({url})")
        stop.wait(0.25)


class ControlPlane:
    """The three components of one data dir."""

    def __init__(self, options: RealOptions, binaries: build.Binaries) -> None:
        self.options = options
        self.binaries = binaries
        self.layout = Layout(options.data_dir.absolute())
        self.components: list[Component] = []
        self.keys: pki.Pki | None = None
        self.agent: AgentThread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.options.port}"

    def start(self, stop: threading.Event) -> None:
        """Start etcd, then the API server (until ``/readyz``), then the controller-manager; write the kubeconfig."""
        layout, options = self.layout, self.options
        files.private_dir(layout.data_dir)
        keys = self.keys = pki.ensure(layout.pki)
        if options.audit_log is not None:
            files.write_atomically(layout.audit_policy, yaml.safe_dump(AUDIT_POLICY, sort_keys=False), 0o644)
        etcd_port, peer_port = free_port(), free_port()
        etcd = self._start("etcd", etcd_args(self.binaries, keys, layout, etcd_port, peer_port))
        etcd_client = ssl.create_default_context(cafile=str(keys.etcd_ca_cert))
        etcd_client.load_cert_chain(keys.apiserver_etcd_cert, keys.apiserver_etcd_key)
        _wait_ok(etcd, f"https://127.0.0.1:{etcd_port}/health", etcd_client, None, stop)
        apiserver = self._start("kube-apiserver", apiserver_args(self.binaries, keys, layout, options, etcd_port))
        server_context = ssl.create_default_context(cafile=str(keys.ca_cert))
        _wait_ok(apiserver, f"{self.url}/readyz", server_context, keys.admin_token(), stop)
        if options.controllers:
            files.write_atomically(layout.controller_manager_kubeconfig,
                                   controller_manager_kubeconfig(self.url, keys))
            self._start("kube-controller-manager", controller_manager_args(self.binaries, keys, layout))
            if options.simulated_node:
                self._start_agent(keys)
        if options.kubeconfig is not None:
            files.write_atomically(options.kubeconfig, tls.kubeconfig_text(self.url, keys.admin_token(),
                                                                         keys.ca_cert.read_bytes()))
        log.info("control plane serving", extra={"url": self.url, "release": options.release,
                                                 "kubeconfig": str(options.kubeconfig), "etcd_port": etcd_port})

    def _start_agent(self, keys: pki.Pki) -> None:
        """The simulated node (the node agent, in a thread), with the admin's token: Node, Pods, volumes."""
        self.agent = AgentThread(Endpoint.with_token(self.url, keys.ca_cert.read_bytes(), keys.admin_token()))
        try:
            self.agent.start(AGENT_TIMEOUT)
        except AgentError as failed:
            raise ControlPlaneError(f"the simulated node did not start: {failed}") from failed

    def _start(self, name: str, args: list[str]) -> Component:
        component = Component(name, args, self.layout.logs / f"{name}.log")
        self.components.append(component)
        component.start()
        return component

    def watch(self, stop: threading.Event) -> None:
        """Return when ``stop`` is set; raise when a component exits on its own."""
        while not stop.wait(0.5):
            for component in self.components:
                if component.exited() is not None:
                    raise component.failure("stopped unexpectedly")
            failed = self.agent.failed() if self.agent is not None else None
            if failed is not None:
                raise ControlPlaneError(f"the simulated node stopped unexpectedly: {failed}")

    def stop(self) -> None:
        """The simulated node, then controller-manager, API server, etcd: each asked to stop, then killed after a
        grace period."""
        if self.agent is not None:
            self.agent.stop()
        for component in reversed(self.components):
            component.stop()


@contextlib.contextmanager
def data_dir_lock(layout: Layout) -> Iterator[None]:
    """Hold the data dir for one control plane; a second one gets a clear error instead of a stuck etcd."""
    files.private_dir(layout.data_dir)
    with layout.lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as held:
            raise ControlPlaneError(f"{layout.data_dir} is in use by another real control plane: stop it, "
                                    "or pass another --data-dir") from held
        yield


def _serve(plane: ControlPlane, stop: threading.Event) -> None:
    try:
        plane.start(stop)
    except ControlPlaneError:
        if stop.is_set():  # Ctrl-C while starting: a clean stop, not a failure
            return
        raise
    if stop.is_set():
        return
    options = plane.options
    print(f"hybrid-operator cluster (real control plane {options.release}) serving {plane.url}", flush=True)
    if options.kubeconfig is not None:
        print(f"export KUBECONFIG={options.kubeconfig.resolve()}", flush=True)
    plane.watch(stop)


def serve_forever(options: RealOptions) -> int:
    """Run the control plane until SIGINT/SIGTERM, then stop it: 0.

    Raises :class:`build.BuildMissing` without a build, and :class:`ControlPlaneError` when the port or
    the data dir is taken, a component does not start, or one stops on its own (the CLI prints either
    and exits 1); every component started is stopped first.
    """
    binaries = build.binaries(options.release)
    if port_taken(options.port):
        raise ControlPlaneError(f"cannot serve on 127.0.0.1:{options.port}: the port is in use. "
                                "Choose another --port or stop what is using it.")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    plane = ControlPlane(options, binaries)
    try:
        with data_dir_lock(plane.layout):
            try:
                _serve(plane, stop)
            finally:
                plane.stop()
                log.info("control plane stopped", extra={"url": plane.url})
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
