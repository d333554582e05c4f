"""Starting and stopping one operator process (``hybrid-operator run``).

Loads and validates ``watches.yaml`` (fatal on any problem), connects to the
cluster, builds the runners (ansible-runner, and helm when there are Helm
entries: its binary and every chart are checked at startup) and one reconciler
per watch -- Ansible and Helm kinds side by side -- and runs them until
SIGTERM/SIGINT, with the metrics, probe and playbook-metrics endpoints and,
with ``--leader-elect``, the leader election (docs/operations.md).  This is
the composition root: it is the one place that knows every concrete class.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aiohttp import web

from hybrid_operator import __version__, errors, processes
from hybrid_operator.ansible.environment import METRICS_URL_ENV, ansible_env
from hybrid_operator.ansible.ownership import ChildRef, OwnerKey
from hybrid_operator.ansible.proxy import OwnerProxy
from hybrid_operator.ansible.reconciler import AnsibleReconciler
from hybrid_operator.ansible.runner import AnsibleRunner
from hybrid_operator.config import model, watches
from hybrid_operator.config.settings import Settings
from hybrid_operator.controller.controller import Controller, controller_names
from hybrid_operator.controller.metrics import OperatorMetrics
from hybrid_operator.controller.reconcile import OwnWrites, Reconciler, RunCancel
from hybrid_operator.helm.client import HelmClient, HelmError, chart_digest, find_helm
from hybrid_operator.helm.gate import ManifestGate, discovery
from hybrid_operator.helm.reconciler import HelmReconciler
from hybrid_operator.kube.client import ClusterClient
from hybrid_operator.manager import health, leader, privatedir, startup
from hybrid_operator.manager.leader import ElectionConfig, LeaderElector
from hybrid_operator.manager.metrics import metrics_app, user_metrics_app
from hybrid_operator.manager.metrics_security import RbacFilter, self_signed_context
from hybrid_operator.manager.operator import Operator
from hybrid_operator.manager.sharding import Sharding
from hybrid_operator.manager.sharding.membership import RingConfig

log = logging.getLogger(__name__)

#: A coroutine run beside the operator until it stops (given the cluster client and the stop event).
Companion = Callable[[ClusterClient, asyncio.Event], Coroutine[Any, Any, None]]


@dataclass
class Endpoints:
    """Where the process serves ``/metrics`` and the probes once they are bound ("" when turned off).

    Filled in before any companion starts, so ``up`` can print ports picked by the system (``host:0``).
    """

    metrics: str = ""
    health: str = ""


def run(settings: Settings) -> int:
    """``hybrid-operator run``: load and validate the watches (fatal on any problem), then serve."""
    return serve(settings, watches.load(settings.watches_file, settings.environ))


async def _helm_client(settings: Settings, loaded: list[model.Watch], kubeconfig: Path,
                       chart_names: dict[Path, str], gate: ManifestGate) -> HelmClient | None:
    """The helm client, after checking that helm runs and loads every chart (fatal otherwise).

    Fills ``chart_names`` with the name in each chart's Chart.yaml; starts ``gate``, which sees every
    manifest helm renders before it is applied.
    """
    charts = [w for w in loaded if isinstance(w, model.HelmWatch)]
    if not charts:
        return None
    executable = find_helm(settings.environ)
    if executable is None:
        raise errors.ConfigurationError("helm not found: Helm entries need the helm v4 binary; put it on PATH "
                                        "or set HELM_BINARY")
    env = {**settings.environ, **_child_env(settings)}
    await gate.start()
    client = HelmClient(executable, kubeconfig, history_max=settings.helm_history_max,
                        timeout=settings.helm_timeout.total_seconds(), env=env, gate=gate)
    for watch in charts:
        try:
            chart_names[watch.chart] = str((await client.show_chart(watch.chart)).get("name") or "")
        except (HelmError, OSError) as exc:
            raise errors.ConfigurationError(f"{settings.watches_file}: {watch.gvk}: helm cannot load chart "
                                            f"{watch.chart}: {exc}") from exc
    return client


def _child_env(settings: Settings) -> dict[str, str]:
    """What every child (helm, the warm worker, each run) gets on top of its environment: the marker that
    ties it to this operator, and the private scratch directory as ``TMPDIR``. Libraries name files in
    the temporary directory after what they hold (the Kubernetes clients' discovery caches,
    ``k8srcp-<digest>.json``); in a shared ``/tmp`` another user could make such a file first."""
    return {**processes.marker(processes.scope_of(settings.artifacts)),
            "TMPDIR": str(startup.scratch_dir(settings.artifacts))}


def _reconciler(watch: model.Watch, cluster: ClusterClient, runner: AnsibleRunner, helm: HelmClient | None,
                settings: Settings, slots: asyncio.Semaphore, run_kubeconfig: Path,
                env: dict[str, str], proxy: OwnerProxy, metrics: OperatorMetrics, cancel: RunCancel,
                chart_names: dict[Path, str], own_writes: OwnWrites) -> Reconciler:
    if isinstance(watch, model.HelmWatch):
        assert helm is not None
        return HelmReconciler(watch, cluster, helm, settings, slots, chart_digest(watch.chart), metrics=metrics,
                              cancel=cancel, chart_name=chart_names.get(watch.chart, ""), own_writes=own_writes)
    return AnsibleReconciler(watch, cluster, runner, settings, slots, run_kubeconfig, env, proxy, metrics=metrics,
                             cancel=cancel, own_writes=own_writes)


def _elector(settings: Settings, cluster: ClusterClient, operator: Operator) -> LeaderElector:
    config = ElectionConfig(
        name=settings.leader_election_id,
        namespace=settings.leader_election_namespace or leader.default_namespace(dict(settings.environ)),
        identity=leader.default_identity(),
        lease_duration=settings.lease_duration.total_seconds(),
        renew_deadline=settings.renew_deadline.total_seconds(),
        retry_period=settings.retry_period.total_seconds(),
    )
    return LeaderElector(cluster, config, operator.start_leading, operator.stop_leading)


def _sharding(settings: Settings, cluster: ClusterClient, operator: Operator, metrics: OperatorMetrics) -> Sharding:
    """``--sharding``: this replica's membership in the ring and its sharded primaries (instead of kopf)."""
    if settings.leader_elect:
        log.warning("--sharding replaces --leader-elect: every replica of the ring reconciles its own shard")
    config = RingConfig(
        ring=settings.shard_ring or settings.leader_election_id,
        namespace=settings.leader_election_namespace or leader.default_namespace(dict(settings.environ)),
        identity=leader.default_identity(),
        lease_duration=settings.lease_duration.total_seconds(),
        renew_deadline=settings.renew_deadline.total_seconds(),
        retry_period=settings.retry_period.total_seconds(),
        handover_grace=settings.graceful_shutdown_timeout.total_seconds(),
    )

    async def sink(controller: Controller, event_type: str, body: dict[str, Any]) -> None:
        await operator.on_primary_event(controller.watch, event_type, body)

    return Sharding(cluster, config, operator.controllers, settings.namespaces, sink, key=settings.shard_key,
                    registry=metrics.registry)


def _bound_port(runner: web.AppRunner | None) -> int:
    assert runner is not None
    return int(next(a for a in runner.addresses if isinstance(a, tuple))[1])


def _bound(runner: web.AppRunner | None) -> str:
    """``host:port`` a server listens on (its first address), "" when it is turned off."""
    if runner is None:
        return ""
    host, port = next(a for a in runner.addresses if isinstance(a, tuple))[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


async def _serve(settings: Settings, loaded: list[model.Watch],
                 companions: Sequence[Companion] = (), endpoints: Endpoints | None = None) -> int:
    """Run the operator until SIGTERM/SIGINT; ``companions`` run beside it (``hybrid-operator up``)."""
    # artifacts hold job events and the kubeconfigs: a directory of the operator's user alone, checked
    # (--artifacts-dir) or made new for this process (the default); UnsafeDirectory stops the start
    place = privatedir.claim(settings.artifacts_dir, settings.environ)
    try:
        return await _serve_in(replace(settings, artifacts_dir=place.directory), loaded, companions, endpoints)
    finally:
        place.release()


async def _serve_in(settings: Settings, loaded: list[model.Watch], companions: Sequence[Companion],
                    endpoints: Endpoints | None) -> int:
    """:func:`_serve` once the artifacts directory (``settings.artifacts``) is this process's to use."""
    try:
        lock = startup.ArtifactsLock(settings.artifacts)
        startup.sweep_local(lock)  # what an operator killed mid-run left: processes, run kubeconfigs, scratch
        lock.share()
    except OSError as exc:
        raise errors.ConfigurationError(f"cannot use the artifacts directory {settings.artifacts}: {exc}; "
                                        "choose another --artifacts-dir") from exc
    scratch = startup.scratch_dir(settings.artifacts)
    cluster = ClusterClient(settings.kubeconfig, temp_dir=scratch)
    if lock.alone:
        await asyncio.to_thread(startup.sweep_artifacts, cluster, loaded, settings.artifacts, settings.namespaces)
    run_kubeconfig = cluster.write_kubeconfig(settings.artifacts / "kubeconfig")
    chart_names: dict[Path, str] = {}
    gate = ManifestGate(discovery(cluster))
    try:
        helm = await _helm_client(settings, loaded, run_kubeconfig, chart_names, gate)
        return await _serve_with(settings, loaded, companions, endpoints, lock, cluster, scratch, run_kubeconfig,
                                 helm, chart_names)
    finally:
        await gate.close()


async def _serve_with(settings: Settings, loaded: list[model.Watch], companions: Sequence[Companion],
                      endpoints: Endpoints | None, lock: startup.ArtifactsLock, cluster: ClusterClient,
                      scratch: Path, run_kubeconfig: Path, helm: HelmClient | None,
                      chart_names: dict[Path, str]) -> int:
    run_slots = settings.run_slots(watch.gvk for watch in loaded)
    runner = AnsibleRunner(max_workers=run_slots, timeout=settings.run_timeout.total_seconds(),
                           project_dir=settings.watches_file.resolve().parent, work_dir=scratch,
                           mode="cold" if settings.ansible_runner == "cold" else "warm",
                           worker_env=_child_env(settings))
    slots = asyncio.Semaphore(run_slots)
    metrics = OperatorMetrics(__version__)
    cancel = RunCancel()
    servers: list[web.AppRunner | None] = []
    try:
        servers.append(await health.serve(user_metrics_app(metrics.user), "127.0.0.1:0", "user-metrics"))
        env = {**ansible_env(settings), METRICS_URL_ENV: f"http://127.0.0.1:{_bound_port(servers[0])}/metrics",
               **_child_env(settings)}
        return await _operate(settings, loaded, companions, cluster, runner, helm, slots, run_kubeconfig, env,
                              metrics, cancel, servers, chart_names, endpoints or Endpoints())
    finally:
        await runner.close()
        for server in servers:
            await health.stop(server)
        lock.close()


async def _operate(settings: Settings, loaded: list[model.Watch], companions: Sequence[Companion],
                   cluster: ClusterClient, runner: AnsibleRunner, helm: HelmClient | None, slots: asyncio.Semaphore,
                   run_kubeconfig: Path, env: dict[str, str], metrics: OperatorMetrics, cancel: RunCancel,
                   servers: list[web.AppRunner | None], chart_names: dict[Path, str], endpoints: Endpoints) -> int:
    connection = cluster.connection()
    owners: list[Operator] = []

    async def child_written(owner: OwnerKey, child: ChildRef) -> None:
        await owners[0].child_written(owner, child)

    proxy = OwnerProxy(connection, inject=settings.inject_owner_ref, on_child=child_written)
    await proxy.start()
    try:
        own_writes = OwnWrites()
        reconcilers = [_reconciler(w, cluster, runner, helm, settings, slots, run_kubeconfig, env, proxy, metrics,
                                   cancel, chart_names, own_writes) for w in loaded]
        names = controller_names(loaded)
        readiness = health.Readiness(names, window=settings.readiness_window.total_seconds())

        async def probe() -> None:
            await health.probe_watches(cluster, list(zip(names, loaded, strict=True)), settings.namespaces,
                                       readiness)

        operator = Operator(settings, loaded, cluster, reconcilers, metrics=metrics, readiness=readiness,
                            run_cancel=cancel, background=[probe], own_writes=own_writes)
        owners.append(operator)
        for watch, reconciler in zip(loaded, reconcilers, strict=True):
            if isinstance(reconciler, HelmReconciler):
                reconciler.on_children = functools.partial(operator.helm_children, watch)
                reconciler.releases = operator.dependents.releases
                reconciler.resyncer.live = operator.dependents
        if settings.sharding:
            sharded = _sharding(settings, cluster, operator, metrics)
            operator.primaries, readiness.sharding = sharded.run, sharded.ready
        elif settings.leader_elect:
            elector = operator.elector = _elector(settings, cluster, operator)
            readiness.election = lambda: elector.leading or elector.healthy()
        servers.append(await _serve_metrics(settings, cluster, metrics))
        servers.append(await health.serve(health.health_app(readiness), settings.health_probe_bind_address,
                                          "health", "--health-probe-bind-address"))
        endpoints.metrics, endpoints.health = _bound(servers[-2]), _bound(servers[-1])
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, operator.handle_signal, sig)
        tasks = [asyncio.create_task(companion(cluster, operator.stop)) for companion in companions]
        try:
            await operator.run()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await proxy.stop()
    return 0


async def _serve_metrics(settings: Settings, cluster: ClusterClient, metrics: OperatorMetrics) -> web.AppRunner | None:
    """``/metrics`` on ``--metrics-bind-address``: HTTPS with ``--metrics-secure``, behind the token review and
    access review of ``--metrics-require-rbac`` (docs/operations.md)."""
    middlewares = [RbacFilter(cluster).middleware] if settings.metrics_require_rbac else []
    if settings.metrics_require_rbac and not settings.metrics_secure:
        log.warning("--metrics-require-rbac without --metrics-secure: bearer tokens travel in clear text")
    context = self_signed_context() if settings.metrics_secure else None
    return await health.serve(metrics_app(metrics.render, middlewares), settings.metrics_bind_address, "metrics",
                              "--metrics-bind-address", ssl_context=context)


def serve(settings: Settings, loaded: list[model.Watch], companions: Sequence[Companion] = (),
          endpoints: Endpoints | None = None) -> int:
    """Run the operator for already loaded watches with ``companions`` beside it; ``endpoints`` learns its ports."""
    return asyncio.run(_serve(settings, loaded, companions, endpoints))

