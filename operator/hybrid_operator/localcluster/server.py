"""Running the embedded API server: data dir, token, kubeconfig, lifecycle.

``hybrid-operator cluster`` lands here.  The server binds 127.0.0.1 only,
keeps its objects in ``<data-dir>/state.db`` (or in memory; a damaged or empty
file is refused or salvaged, see :mod:`.storage.damage`), serves TLS with
its own CA (see :mod:`tls`: client-go never sends a token over plain http),
authenticates every request with a bearer token generated once per data dir, writes a
kubeconfig for kubectl/helm/the operator once it accepts requests, runs the
fake controllers (with the simulated node, unless turned off), and stops
cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import sqlite3
import string
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hybrid_operator import listeners
from hybrid_operator.localcluster import files, tls
from hybrid_operator.localcluster.apiserver import app, decoding
from hybrid_operator.localcluster.apiserver.audit import AuditLog
from hybrid_operator.localcluster.apiserver.context import ServerConfig
from hybrid_operator.localcluster.controllers.eventttl import EventExpiry
from hybrid_operator.localcluster.controllers.manager import ControllerManager, ControllerSettings
from hybrid_operator.localcluster.gcpacing import PacingTask
from hybrid_operator.localcluster.periodic import Periodic
from hybrid_operator.localcluster.resources import Registry
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions
from hybrid_operator.localcluster.storage.store import Store

log = logging.getLogger(__name__)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: how often the store's write-ahead log is copied into the database file, off the request path
CHECKPOINT_SECONDS = 1.0


@dataclass(frozen=True)
class ClusterOptions:
    """Settings of one embedded API server."""

    port: int = 6443
    data_dir: Path = Path(".hybrid/cluster")
    in_memory: bool = False
    kubeconfig: Path | None = Path(".hybrid/kubeconfig")
    controllers: bool = True
    simulated_node: bool = True  # a Node whose kubelet runs (pretends to run) the Pods workloads make
    bookmark_interval: float = 30.0
    watch_history: int = 20000  # change events kept for watch resume (older RVs get 410 Expired)
    watch_history_bytes: int = 64 * 1024 * 1024  # ... and at most this many bytes of their JSON
    event_ttl: float = 3600.0  # seconds an Event lives after its last write (kube-apiserver's --event-ttl)
    host: str = "127.0.0.1"
    audit_log: Path | None = None  # one JSON line per resource request (--audit-log)
    sharded_list_watch: bool = True  # KEP-5866 shardSelector honoured (--no-sharded-list-watch: ignored)
    connections: listeners.ConnectionLimits = field(default_factory=listeners.ConnectionLimits)  # deadlines, cap
    min_request_timeout: float = 1800.0  # a watch without timeoutSeconds ends after 1-2 times this (kube's flag)
    reset_data: bool = False  # set an existing state.db aside and start empty (--reset-data)


def open_store(options: ClusterOptions) -> Store:
    if options.in_memory:
        return Store(None, history=options.watch_history, history_bytes=options.watch_history_bytes)
    files.private_dir(options.data_dir)
    return Store(options.data_dir / "state.db", history=options.watch_history,
                 history_bytes=options.watch_history_bytes, reset=options.reset_data)


def random_token() -> str:
    return "".join(random.SystemRandom().choices(string.ascii_letters + string.digits, k=40))


def ensure_token(store: Store) -> str:
    token = store.get_meta("token")
    if token is None:
        token = random_token()
        store.set_meta("token", token)
    return token


def seed(api: ObjectApi) -> None:
    """Pre-create the namespaces every cluster has."""
    info = api.registry.lookup("", "v1", "namespaces")
    assert info is not None
    for name in DEFAULT_NAMESPACES:
        if api.store.get(info.storage_key, "", name) is None:
            api.create(info, "", {"metadata": {"name": name}}, WriteOptions(field_manager="hybrid-cluster"))


class ClusterServer:
    """One embedded API server: start, serve, stop."""

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        self.store = open_store(options)
        self.api = ObjectApi(self.store, Registry.with_builtins())
        self.token = ensure_token(self.store)
        seed(self.api)
        self._runner: listeners.GuardedRunner | None = None
        self._controllers: ControllerManager | None = None
        self._event_expiry = EventExpiry(self.api, options.event_ttl)
        self._audit: AuditLog | None = None
        self._heap_pacing = PacingTask()
        self._checkpoints = Periodic("checkpoints", self.store.checkpoint, CHECKPOINT_SECONDS, in_thread=True,
                                     failures=(sqlite3.Error,))
        self.port = options.port
        cert_dir = Path(tempfile.mkdtemp(prefix="hybrid-certs-")) if options.in_memory else options.data_dir
        files.tighten(cert_dir / "server.key", files.PRIVATE_FILE)
        self.certs = tls.ensure(cert_dir)

    @property
    def url(self) -> str:
        return f"https://{self.options.host}:{self.port}"

    async def start(self) -> None:
        self._heap_pacing.start()
        self._checkpoints.start()
        if self.options.audit_log is not None:
            self._audit = AuditLog(self.options.audit_log)
        config = ServerConfig(token=self.token, address=f"{self.options.host}:{self.options.port}",
                                   bookmark_interval=self.options.bookmark_interval, audit=self._audit,
                                   sharded_list_watch=self.options.sharded_list_watch,
                                   min_request_timeout=self.options.min_request_timeout)
        application = app.build_app(self.api, config)
        self._runner = app.runner(application, self.options.connections)
        await self._runner.setup()
        bound = await listeners.serve(self._runner, self.options.host, self.options.port,
                                      ssl_context=self.certs.server_context())
        self.port = bound[0][1]  # the real port when 0 was asked
        if self.options.controllers:
            settings = ControllerSettings(simulated_node=self.options.simulated_node, api_port=self.port,
                                          ca_pem=self.certs.ca_cert.read_text())
            self._controllers = ControllerManager(self.api, settings)
            self._controllers.start()
        self._event_expiry.start()
        if self.options.kubeconfig is not None:
            files.write_atomically(self.options.kubeconfig, tls.kubeconfig_text(self.url, self.token,
                                                                     self.certs.ca_cert.read_bytes()))
        log.info("cluster serving", extra={"url": self.url, "kubeconfig": str(self.options.kubeconfig),
                                           "objects": sum(self.store.count(k) for k in self.store.storage_keys()),
                                           "quarantined": len(self.store.quarantined)})

    async def stop(self) -> None:
        await self._checkpoints.stop()  # the checkpoint in flight ends first: the store is closed below
        await self._event_expiry.stop()
        if self._controllers is not None:
            await self._controllers.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        decoding.stop_yaml_worker()
        if self._audit is not None:
            self._audit.close()
        self.store.close()
        await self._heap_pacing.stop()
        log.info("cluster stopped", extra={"url": self.url})


async def serve_forever(options: ClusterOptions) -> None:
    server = ClusterServer(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    if server.store.quarantined:
        print(f"hybrid-operator cluster: {len(server.store.quarantined)} damaged row(s) of "
              f"{options.data_dir / 'state.db'} were moved to its quarantine table and are not served: "
              + "; ".join(f"{q.source} {q.key} ({q.reason})" for q in server.store.quarantined[:10]), flush=True)
    print(f"hybrid-operator cluster serving {server.url}", flush=True)
    if options.kubeconfig is not None:
        print(f"export KUBECONFIG={options.kubeconfig.resolve()}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
