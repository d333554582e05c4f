"""Starting and stopping one operator process (``hybrid-operator run``).

Loads and validates ``watches.yaml`` (fatal on any problem), connects to the
cluster, builds the runners and one reconciler per watch, and runs them until
SIGTERM/SIGINT.  This is the composition root: it is the one place that knows
every concrete class.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from hybrid_operator import app, errors, watches
from hybrid_operator.cluster import ClusterClient
from hybrid_operator.reconciler import AnsibleReconciler, Reconciler
from hybrid_operator.runners.ansible import AnsibleRunner
from hybrid_operator.settings import Settings

log = logging.getLogger("hybrid_operator.runtime")

COLLECTIONS = Path(__file__).resolve().parent / "ansible" / "collections"


def ansible_env(settings: Settings) -> dict[str, str]:
    """Environment of every playbook run: our operator_sdk.util collection first on the collections path."""
    existing = settings.environ.get("ANSIBLE_COLLECTIONS_PATH") or settings.environ.get("ANSIBLE_COLLECTIONS_PATHS")
    paths = [str(COLLECTIONS), *(existing.split(os.pathsep) if existing else
                                 ["~/.ansible/collections", "/usr/share/ansible/collections"])]
    return {"ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths)}


def run(settings: Settings) -> int:
    loaded = watches.load(settings.watches_file, settings.environ)
    helm = [w for w in loaded if isinstance(w, watches.HelmWatch)]
    if helm:
        kinds = ", ".join(str(w.gvk) for w in helm)
        raise errors.ConfigurationError(
            f"{settings.watches_file}: Helm entries are not supported yet ({kinds}); "
            "remove them or run them with the Operator SDK's helm-operator for now")
    return asyncio.run(_serve(settings, loaded))


async def _serve(settings: Settings, loaded: list[watches.Watch]) -> int:
    cluster = ClusterClient(settings.kubeconfig)
    settings.artifacts_dir.mkdir(parents=True, exist_ok=True)
    run_kubeconfig = cluster.write_kubeconfig(settings.artifacts_dir / "kubeconfig")
    runner = AnsibleRunner(max_workers=settings.max_workers, timeout=settings.run_timeout.total_seconds(),
                           project_dir=settings.watches_file.resolve().parent)
    slots = asyncio.Semaphore(max(1, settings.max_workers))
    env = ansible_env(settings)
    reconcilers: list[Reconciler] = []
    for watch in loaded:
        assert isinstance(watch, watches.AnsibleWatch)
        reconcilers.append(AnsibleReconciler(watch, cluster, runner, settings, slots, run_kubeconfig, env))
    operator = app.Operator(settings, loaded, cluster, reconcilers)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await operator.run(stop)
    finally:
        await runner.close()
    return 0
