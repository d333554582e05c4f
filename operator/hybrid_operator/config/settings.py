"""One documented settings object for ``hybrid-operator run``: flags, environment, defaults.

The CLI fills it from argv and the environment; everything else reads it.  Each
field says where it comes from; the README's reference tables list the same.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from hybrid_operator.config.model import GroupVersionKind


@dataclass(frozen=True)
class Settings:
    """Settings of one operator process."""

    #: ``--watches-file`` (default ``./watches.yaml``).
    watches_file: Path = Path("watches.yaml")
    #: ``--kubeconfig``, else ``KUBECONFIG``, else the in-cluster service account (None).
    kubeconfig: Path | None = None
    #: ``WATCH_NAMESPACE`` (comma-separated); empty means every namespace.
    namespaces: tuple[str, ...] = ()
    #: ``--max-concurrent-reconciles`` per kind (default: number of CPUs), overridden per kind by
    #: ``MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>``.
    max_concurrent_reconciles: int = field(default_factory=lambda: os.cpu_count() or 1)
    #: ``--max-workers``: an optional cap on runs at once across all kinds. None (the default): no cap
    #: beyond the per-kind ``--max-concurrent-reconciles`` (the sum of the kinds' concurrency).
    max_workers: int | None = None
    #: ``--ansible-runner`` / ``HYBRID_OPERATOR_ANSIBLE_RUNNER``: ``warm`` (default) or ``cold``.
    ansible_runner: str = "warm"
    #: ``--reconcile-period`` (default 10h, as the Operator SDK).
    reconcile_period: timedelta = timedelta(hours=10)
    #: ``--ansible-verbosity`` (default 2), overridden per kind by ``ANSIBLE_VERBOSITY_<KIND>_<GROUP>``.
    ansible_verbosity: int = 2
    #: ``--ansible-args``: extra ansible-playbook arguments (see :func:`split_ansible_args`).
    ansible_args: str = ""
    #: ``ANSIBLE_DEBUG_LOGS`` (a Go boolean): each run's whole output goes to the operator's log.
    ansible_debug_logs: bool = False
    #: ``--inject-owner-ref`` (accepted; wired with the ownership proxy).
    inject_owner_ref: bool = True
    #: ``--artifacts-dir``: where per-CR ansible-runner directories, the kubeconfig helm uses and each run's
    #: credentials live. None (the default): a new private directory for this process, made at start
    #: (:mod:`hybrid_operator.manager.privatedir`); the runtime puts the one in use here before anything runs.
    artifacts_dir: Path | None = None
    #: ``--run-timeout``: a playbook run taking longer is killed and reported as failed.
    run_timeout: timedelta = timedelta(hours=1)
    #: ``--suppress-override-values``: mask override values (``****``) in ``OverrideValuesInUse`` events.
    suppress_override_values: bool = False
    #: ``--history-max``: Helm revisions kept per release (default 10; 0 means no limit).
    helm_history_max: int = 10
    #: ``--helm-manifest-digest``: ``status.deployedRelease`` holds a sha256 of the manifest, not the manifest.
    helm_manifest_digest: bool = False
    #: ``--helm-timeout``: helm's ``--timeout`` for each install/upgrade/rollback/uninstall; a helm process
    #: still running 30 s after that is stopped.
    helm_timeout: timedelta = timedelta(minutes=5)
    #: ``--metrics-bind-address``: Prometheus ``/metrics`` (default ``:8080``; ``0`` turns it off).
    metrics_bind_address: str = ":8080"
    #: ``--metrics-secure``: ``/metrics`` over HTTPS with a self-signed certificate (as the SDK).
    metrics_secure: bool = False
    #: ``--metrics-require-rbac``: ``/metrics`` needs a bearer token allowed ``get`` on it (TokenReview +
    #: SubjectAccessReview, as controller-runtime's filter).
    metrics_require_rbac: bool = False
    #: ``--health-probe-bind-address``: ``/healthz`` and ``/readyz`` (default ``:8081``; ``0`` turns it off).
    health_probe_bind_address: str = ":8081"
    #: ``--leader-elect``: only the holder of a Lease reconciles; the other replicas stand by.
    leader_elect: bool = False
    #: ``--leader-election-id``: the Lease's name (default ``OPERATOR_NAME``, else ``hybrid-operator``).
    leader_election_id: str = "hybrid-operator"
    #: ``--leader-election-namespace``: the Lease's namespace (default ``POD_NAMESPACE``, the service
    #: account's namespace, else ``default``); empty means that default.
    leader_election_namespace: str = ""
    #: ``--leader-elect-lease-duration`` (15s), ``--leader-elect-renew-deadline`` (10s),
    #: ``--leader-elect-retry-period`` (2s): client-go's durations.
    lease_duration: timedelta = timedelta(seconds=15)
    renew_deadline: timedelta = timedelta(seconds=10)
    retry_period: timedelta = timedelta(seconds=2)
    #: ``--sharding``: replicas of the same ring split the objects between them (docs/operations.md,
    #: "Sharding"); replaces leader election.
    sharding: bool = False
    #: ``--shard-key``: what is hashed to place an object, ``uid`` (default) or ``namespace``.
    shard_key: str = "uid"
    #: ``--shard-ring``: the ring's name (default: the leader election id).
    shard_ring: str = ""
    #: ``--graceful-shutdown-timeout``: on SIGTERM, runs in progress may finish within this; then they
    #: are cancelled (default 30s).
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30)
    #: ``--readiness-window``: ``/readyz`` fails when a watched kind showed no sign of life for longer.
    readiness_window: timedelta = timedelta(seconds=15)
    #: environment the process was started with (for per-kind overrides).
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def artifacts(self) -> Path:
        """The artifacts directory in use (ValueError before the runtime chose one)."""
        if self.artifacts_dir is None:
            raise ValueError("no artifacts directory yet: the runtime makes one when the operator starts")
        return self.artifacts_dir

    def kind_suffix(self, gvk: GroupVersionKind) -> str:
        """``<KIND>_<GROUP>`` as the Operator SDK forms it: upper case, ``.`` replaced by ``_``."""
        return f"{gvk.kind}_{gvk.group}".upper().replace(".", "_")

    def concurrency_for(self, gvk: GroupVersionKind) -> int:
        for prefix in ("MAX_CONCURRENT_RECONCILES_", "WORKER_"):
            value = self.environ.get(prefix + self.kind_suffix(gvk), "")
            if re.fullmatch(r"\d+", value.strip()) and int(value) > 0:
                return int(value)
        return max(1, self.max_concurrent_reconciles)

    def run_slots(self, gvks: Iterable[GroupVersionKind]) -> int:
        """Runs at once across all kinds: ``--max-workers`` when given, else the sum of the kinds' concurrency."""
        if self.max_workers is not None:
            return max(1, self.max_workers)
        return max(1, sum(self.concurrency_for(gvk) for gvk in gvks))

    def verbosity_for(self, gvk: GroupVersionKind) -> int:
        value = self.environ.get("ANSIBLE_VERBOSITY_" + self.kind_suffix(gvk), "")
        if re.fullmatch(r"\d+", value.strip()):
            return min(7, int(value))
        return self.ansible_verbosity


def split_ansible_args(text: str) -> tuple[str, ...]:
    """``--ansible-args`` as ``ansible-playbook`` arguments, read as the Operator SDK reads them.

    Kubernetes passes container args without a shell, so ``--ansible-args='--vault-password-file
    /x'`` in a manifest arrives with its single quotes; the SDK removes one pair of wrapping single
    quotes before ansible-runner splits the text like a shell. ValueError for unbalanced quotes.
    """
    text = text.strip()
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        text = text[1:-1]
    return tuple(shlex.split(text))


def namespaces_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    raw = environ.get("WATCH_NAMESPACE", "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())
