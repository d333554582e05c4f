"""The ``hybrid-operator`` command line: the only place that parses argv.

Each subcommand turns flags (and environment variables) into settings and
hands them to the module that does the work.  Exit codes: 0 success, 1 runtime
failure, 2 bad input (configuration or usage).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid_operator import __version__, logs

if TYPE_CHECKING:
    from hybrid_operator.config.settings import Settings


def _cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("cluster", help="run the local cluster in the foreground: the embedded Kubernetes API "
                            "server, or with --control-plane real etcd, kube-apiserver and kube-controller-manager")
    parser.add_argument("--port", type=int, default=6443, help="TCP port on 127.0.0.1 (default 6443)")
    _control_plane_option(parser)
    parser.add_argument("--data-dir", type=Path, default=Path(".hybrid/cluster"),
                        help="directory holding state.db (default .hybrid/cluster)")
    parser.add_argument("--in-memory", action="store_true", help="keep nothing on disk")
    parser.add_argument("--reset-data", action="store_true",
                        help="start a new, empty cluster: an existing state.db (with its -wal and -shm) is kept "
                             "beside it as state.db.reset-<time>; without it, an empty or unreadable state.db "
                             "is refused")
    parser.add_argument("--kubeconfig", type=Path, default=Path(".hybrid/kubeconfig"),
                        help="kubeconfig written once the server accepts requests (default .hybrid/kubeconfig)")
    parser.add_argument("--no-controllers", action="store_true",
                        help="turn off every controller (simulated node, garbage collection, namespaces, ...)")
    parser.add_argument("--no-simulated-node", action="store_true",
                        help="no Node and no Pods: workloads are only reported ready (bare objects); with "
                             "--control-plane real: no node agent, so Pods stay Pending")
    parser.add_argument("--bookmark-interval", type=float, default=30.0,
                        help="seconds between BOOKMARK events on idle watches (default 30)")
    parser.add_argument("--audit-log", type=Path, default=None,
                        help="append one JSON line per resource request (verb, group, resource, namespace, name, "
                             "user agent) to this file")
    parser.add_argument("--no-sharded-list-watch", action="store_true",
                        help="ignore the shardSelector parameter of LIST and WATCH (KEP-5866), as a server "
                             "before Kubernetes 1.36 or without the ShardedListAndWatch gate does")
    parser.add_argument("--watch-history", type=int, default=20000, help=argparse.SUPPRESS)
    parser.add_argument("--watch-history-bytes", type=int, default=64 * 1024 * 1024, help=argparse.SUPPRESS)
    parser.add_argument("--event-ttl", type=_duration, default=timedelta(hours=1),
                        help="delete an Event not written for this long, as kube-apiserver's --event-ttl "
                             "(Go duration, default 1h; 0 keeps Events forever)")
    parser.add_argument("--min-request-timeout", type=int, default=1800, metavar="SECONDS",
                        help="a watch without timeoutSeconds ends after 1 to 2 times this, as kube-apiserver's flag "
                             "(default 1800; 0: such watches never end)")
    parser.add_argument("--header-timeout", type=_positive_seconds, default=32.0, metavar="SECONDS",
                        help="a connection must finish its TLS handshake and a request header within this "
                             "(default 32, kube-apiserver's)")
    parser.add_argument("--idle-timeout", type=_positive_seconds, default=90.0, metavar="SECONDS",
                        help="close a kept-alive connection idle this long (default 90, kube-apiserver's)")
    parser.add_argument("--max-connections", type=int, default=0, metavar="N",
                        help="open connections at most; at the cap the longest idle one is closed, or the new "
                             "one refused when all are busy (default 0: the file descriptor limit less 64)")


def _node_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("node", help="run the simulated node against any API server that has no kubelet: "
                            "register the Node, schedule and run Pods, provision volumes (README: The simulated node)")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig of the cluster (default: the first file of $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: its current-context)")


def _check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("check", help="validate a watches file and the files it references (no cluster)")
    parser.add_argument("--watches-file", type=Path, default=Path("watches.yaml"),
                        help="the watches file (default ./watches.yaml)")
    _ansible_path_options(parser)


def _ansible_path_options(parser: argparse.ArgumentParser) -> None:
    """The SDK's --ansible-roles-path / --ansible-collections-path: they set the environment variables (and win)."""
    parser.add_argument("--ansible-roles-path", default=None, metavar="PATHS",
                        help="roles search path, ':'-separated; sets ANSIBLE_ROLES_PATH (default: the "
                             "variable, else ansible.cfg; <watches dir>/roles and <cwd>/roles are always searched)")
    parser.add_argument("--ansible-collections-path", default=None, metavar="PATHS",
                        help="collections search path, ':'-separated; sets ANSIBLE_COLLECTIONS_PATH")


def _runner_mode(flag: str | None, environ: Mapping[str, str]) -> str:
    """``--ansible-runner``, else ``HYBRID_OPERATOR_ANSIBLE_RUNNER``, else ``warm``."""
    from hybrid_operator import errors

    value = flag or environ.get("HYBRID_OPERATOR_ANSIBLE_RUNNER", "").strip().lower() or "warm"
    if value not in ("warm", "cold"):
        raise errors.ConfigurationError(f"HYBRID_OPERATOR_ANSIBLE_RUNNER={value!r}: expected warm or cold")
    return value


def _environ(args: argparse.Namespace) -> dict[str, str]:
    """The process environment with what the flags set (the SDK's flags call os.Setenv: they win)."""
    import os

    environ = dict(os.environ)
    if getattr(args, "ansible_roles_path", None):
        environ["ANSIBLE_ROLES_PATH"] = args.ansible_roles_path
    if getattr(args, "ansible_collections_path", None):
        environ["ANSIBLE_COLLECTIONS_PATH"] = args.ansible_collections_path
    return environ


def _bool(text: str) -> bool:
    """A boolean flag value, as Go's flag package reads it (``true``, ``false``, ``1``, ``0``, ``t``, ``F``...)."""
    from hybrid_operator.config.values import parse_bool

    value = parse_bool(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def _duration(text: str) -> timedelta:
    from hybrid_operator.config.values import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help="run the operator for the kinds in watches.yaml")
    _operator_options(parser, artifacts=None)
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, else the in-cluster service account)")


def _control_plane_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--control-plane", choices=("embedded", "real"), default="embedded",
                        help="embedded: the API server of this package (default); real: etcd, kube-apiserver and "
                             "kube-controller-manager built by `make kube` (docs/real-cluster.md)")


def _up_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("up", help="local cluster + CRDs + operator + samples, with a live summary (make run)")
    parser.add_argument("--port", type=int, default=6443, help="local cluster port on 127.0.0.1 (default 6443)")
    _control_plane_option(parser)
    parser.add_argument("--data-dir", type=Path, default=Path(".hybrid/cluster"),
                        help="local cluster data (default .hybrid/cluster; reused by the next up)")
    parser.add_argument("--kubeconfig", type=Path, default=Path(".hybrid/kubeconfig"),
                        help="kubeconfig written for the local cluster (default .hybrid/kubeconfig)")
    parser.add_argument("--crd-dir", type=Path, default=Path("config/crd"), help="CRDs to install (config/crd)")
    parser.add_argument("--samples-dir", type=Path, default=Path("config/samples"),
                        help="resources to create if absent (config/samples)")
    parser.add_argument("--no-summary", action="store_true", help="log changes instead of the live summary")
    parser.add_argument("--audit-log", type=Path, default=None,
                        help="the local cluster appends one JSON line per resource request to this file")
    parser.add_argument("--reset-data", action="store_true",
                        help="start the local cluster new and empty (its old state.db is kept beside it as "
                             "state.db.reset-<time>)")
    # a development setup: metrics and probes on loopback, on free ports (printed at startup), so that a
    # second `up` or a molecule run beside it never collides; `run` keeps the SDK's :8080/:8081
    _operator_options(parser, artifacts=Path(".hybrid/runner"), bind_defaults=("127.0.0.1:0", "127.0.0.1:0"))


def _operator_options(parser: argparse.ArgumentParser, artifacts: Path | None,
                      bind_defaults: tuple[str, str] = (":8080", ":8081")) -> None:
    parser.add_argument("--watches-file", type=Path, default=Path("watches.yaml"),
                        help="the watches file (default ./watches.yaml)")
    parser.add_argument("--max-concurrent-reconciles", type=int, default=None,
                        help="reconciles at once per kind (default: number of CPUs); "
                             "MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> overrides it per kind")
    parser.add_argument("--max-workers", type=int, default=None,
                        help="optional cap on runs at once across all kinds (default: no cap beyond "
                             "--max-concurrent-reconciles per kind)")
    parser.add_argument("--ansible-runner", choices=("warm", "cold"), default=None,
                        help="warm: fork each run from a worker with ansible-core already imported (default); "
                             "cold: a new ansible-playbook process per run. Env: HYBRID_OPERATOR_ANSIBLE_RUNNER")
    parser.add_argument("--reconcile-period", type=_duration, default=timedelta(hours=10),
                        help="default resync period, a Go duration (default 10h)")
    parser.add_argument("--ansible-verbosity", type=int, default=2, choices=range(8), metavar="0-7",
                        help="ansible-runner verbosity (default 2); ANSIBLE_VERBOSITY_<KIND>_<GROUP> per kind")
    parser.add_argument("--ansible-args", default="",
                        help="extra arguments for ansible-playbook (one pair of wrapping single quotes is "
                             "removed, as the SDK does)")
    _ansible_path_options(parser)
    parser.add_argument("--inject-owner-ref", type=_bool, default=True, metavar="BOOL",
                        help="add owner references to what playbooks create (default true)")
    default = artifacts or "a new private directory per process, under $XDG_RUNTIME_DIR, ~/.cache/hybrid-operator " \
                           "or the temporary directory, removed at exit"
    parser.add_argument("--artifacts-dir", type=Path, default=artifacts,
                        help=f"per-CR ansible-runner directories, helm's kubeconfig and run credentials; it must be "
                             f"this user's alone, not writable by others (default: {default})")
    parser.add_argument("--run-timeout", type=_duration, default=timedelta(hours=1),
                        help="a run taking longer is stopped and reported as failed (default 1h)")
    parser.add_argument("--suppress-override-values", type=_bool, nargs="?", const=True, default=False,
                        metavar="BOOL", help="Helm: mask overrideValues in OverrideValuesInUse events")
    parser.add_argument("--history-max", type=int, default=10,
                        help="Helm: revisions kept per release (default 10, 0 = no limit)")
    parser.add_argument("--helm-manifest-digest", type=_bool, nargs="?", const=True, default=False,
                        metavar="BOOL", help="Helm: store a sha256 of the manifest in status.deployedRelease "
                                             "instead of the manifest")
    parser.add_argument("--helm-timeout", type=_duration, default=timedelta(minutes=5),
                        help="Helm: --timeout of each helm install/upgrade/rollback/uninstall (default 5m)")
    _operations_options(parser, bind_defaults)


def _operations_options(parser: argparse.ArgumentParser, bind_defaults: tuple[str, str]) -> None:
    """Metrics, probes, leader election and shutdown (docs/operations.md).

    ``bind_defaults``: the metrics and probe addresses; ``run`` keeps the Operator SDK's (every
    interface, ``:8080`` and ``:8081``), ``up`` takes free ports on loopback.
    """
    metrics, health = bind_defaults
    parser.add_argument("--metrics-bind-address", "--metrics-addr", default=metrics,
                        help=f"Prometheus /metrics address, host:port or :port (port 0: a free one); 0 turns it "
                             f"off (default {metrics})")
    parser.add_argument("--metrics-secure", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                        help="serve /metrics over HTTPS with a self-signed certificate (default false)")
    parser.add_argument("--metrics-require-rbac", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                        help="/metrics needs a bearer token allowed get on it: TokenReview + SubjectAccessReview "
                             "(default false; use with --metrics-secure)")
    parser.add_argument("--enable-http2", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                        help="accepted for the Operator SDK's command lines; the servers speak HTTP/1.1 only")
    parser.add_argument("--health-probe-bind-address", default=health,
                        help=f"/healthz and /readyz address, host:port or :port (port 0: a free one); 0 turns it "
                             f"off (default {health})")
    parser.add_argument("--leader-elect", "--enable-leader-election", type=_bool, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help="only the holder of a Lease reconciles; other replicas stand by (default false)")
    parser.add_argument("--leader-election-id", default=None,
                        help="name of the Lease (default $OPERATOR_NAME, else hybrid-operator)")
    parser.add_argument("--leader-election-namespace", default="",
                        help="namespace of the Lease (default $POD_NAMESPACE, the pod's namespace, else default)")
    parser.add_argument("--leader-elect-lease-duration", type=_duration, default=timedelta(seconds=15),
                        help="how long a standby waits before taking an unrenewed Lease (default 15s)")
    parser.add_argument("--leader-elect-renew-deadline", type=_duration, default=timedelta(seconds=10),
                        help="how long the leader keeps trying to renew before it stops reconciling (default 10s)")
    parser.add_argument("--leader-elect-retry-period", type=_duration, default=timedelta(seconds=2),
                        help="time between leader election attempts (default 2s)")
    parser.add_argument("--sharding", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                        help="split the objects between the replicas of the ring by hash (Leases, KEP-5866 "
                             "sharded watches); replaces --leader-elect")
    parser.add_argument("--shard-key", choices=["uid", "namespace"], default="uid",
                        help="what places an object on a shard: metadata.uid (default) or metadata.namespace")
    parser.add_argument("--shard-ring", default="",
                        help="the ring's name, shared by its replicas (default: the leader election id)")
    parser.add_argument("--graceful-shutdown-timeout", type=_duration, default=timedelta(seconds=30),
                        help="on SIGTERM, how long runs in progress may take to finish before they are "
                             "cancelled (default 30s)")
    parser.add_argument("--readiness-window", type=_duration, default=timedelta(seconds=15),
                        help="/readyz fails when a watched kind showed no sign of life for longer (default 15s)")


def _authoring_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """init, create api, generate and preview: the authoring workflow (scaffold.py, generate.py, preview.py)."""
    init = sub.add_parser("init", help="a new operator project (watches.yaml, roles/, charts/, config/, molecule/)")
    init.add_argument("--domain", default="", help="API domain appended to the groups of create api (example.com)")
    init.add_argument("directory", nargs="?", type=Path, default=Path("."), help="project directory (default .)")
    create = sub.add_parser("create", help="add to the project: create api")
    api = create.add_subparsers(dest="create_command", required=True).add_parser(
        "api", help="a new kind: watches entry, role/playbook/chart, CRD, RBAC, sample, molecule scenario")
    api.add_argument("--group", required=True, help="API group (the domain from PROJECT is appended)")
    api.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    api.add_argument("--kind", required=True, help="kind, CamelCase, e.g. Memcached")
    flavor = api.add_mutually_exclusive_group(required=True)
    flavor.add_argument("--generate-role", action="store_true", help="reconcile with a new role roles/<kind>")
    flavor.add_argument("--generate-playbook", action="store_true", help="reconcile with playbooks/<kind>.yml")
    flavor.add_argument("--helm-chart", type=Path, metavar="PATH", help="reconcile with this chart (copied to charts/)")
    flavor.add_argument("--new-chart", action="store_true", help="reconcile with a new chart charts/<kind>")
    api.add_argument("--project-dir", type=Path, default=Path("."), help="project directory (default .)")
    generate = sub.add_parser("generate", help="config/ manifests from watches.yaml, schemas/ and the automation")
    generate.add_argument("target", choices=["crd", "rbac", "manager", "all"])
    generate.add_argument("--output", type=Path, default=None, help="where to write (default <project>/config)")
    generate.add_argument("--project-dir", type=Path, default=Path("."), help="project directory (default .)")
    preview = sub.add_parser("preview", help="what applying a CR would change, without changing anything "
                                             "(exit 0: nothing, 1: changes, 2: error)")
    preview.add_argument("-f", "--filename", type=Path, required=True, help="the custom resource (YAML)")
    preview.add_argument("--watches-file", type=Path, default=Path("watches.yaml"),
                         help="the watches file (default ./watches.yaml)")
    preview.add_argument("--kubeconfig", type=Path, default=None,
                         help="kubeconfig (default $KUBECONFIG, else .hybrid/kubeconfig of make run)")
    preview.add_argument("-n", "--namespace", default=None,
                         help="namespace of the CR (default: the file's, else default)")


def run_authoring(args: argparse.Namespace) -> int:
    from hybrid_operator import errors

    try:
        if args.command == "preview":
            from hybrid_operator.preview import preview

            return preview.main(args.filename, args.watches_file, args.kubeconfig, args.namespace)
        for line in _authoring(args):
            print(line)
    except errors.ConfigurationError as exc:
        print(f"hybrid-operator {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def _authoring(args: argparse.Namespace) -> list[str]:
    from hybrid_operator.authoring import generate, scaffold

    if args.command == "init":
        return scaffold.init(args.directory, args.domain)
    if args.command == "generate":
        changed = generate.run(args.project_dir, args.target, args.output)
        return changed or ["manifests are up to date"]
    flavor: scaffold.Flavor = "role" if args.generate_role else "playbook" if args.generate_playbook else "chart"
    request = scaffold.ApiRequest(group=args.group, version=args.version, kind=args.kind, flavor=flavor,
                                  chart=args.helm_chart)
    return scaffold.create_api(args.project_dir, request)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hybrid-operator", description=__doc__)
    parser.add_argument("--version", action="version", version=f"hybrid-operator {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    sub = parser.add_subparsers(dest="command", required=True)
    _cluster_parser(sub)
    _node_parser(sub)
    _check_parser(sub)
    _run_parser(sub)
    _up_parser(sub)
    _authoring_parsers(sub)
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def run_real_cluster(args: argparse.Namespace) -> int:
    """``cluster --control-plane real``: the options that mean something there, the others refused."""
    from hybrid_operator.localcluster.realplane import build, launcher

    refused = [flag for flag, given in (("--in-memory", args.in_memory),
                                        ("--bookmark-interval", args.bookmark_interval != 30.0),
                                        ("--event-ttl 0", args.event_ttl.total_seconds() <= 0)) if given]
    if refused:
        print(f"hybrid-operator cluster: {', '.join(refused)} is for the embedded cluster only; drop it or "
              "leave out --control-plane real", file=sys.stderr)
        return 2
    options = launcher.RealOptions(
        port=args.port, data_dir=args.data_dir, kubeconfig=args.kubeconfig, audit_log=args.audit_log,
        controllers=not args.no_controllers, simulated_node=not args.no_simulated_node,
        sharded_list_watch=not args.no_sharded_list_watch, event_ttl=args.event_ttl.total_seconds())
    try:
        return launcher.serve_forever(options)
    except (build.BuildMissing, launcher.ControlPlaneError) as exc:
        print(f"hybrid-operator cluster: {exc}", file=sys.stderr)
        return 1


def run_cluster(args: argparse.Namespace) -> int:
    from hybrid_operator import listeners
    from hybrid_operator.localcluster import server
    from hybrid_operator.localcluster.storage.damage import StoreError

    if args.control_plane == "real":
        return run_real_cluster(args)

    options = server.ClusterOptions(
        port=args.port,
        data_dir=args.data_dir,
        in_memory=args.in_memory,
        kubeconfig=args.kubeconfig,
        controllers=not args.no_controllers,
        simulated_node=not args.no_simulated_node,
        bookmark_interval=args.bookmark_interval,
        audit_log=args.audit_log,
        watch_history=args.watch_history,
        watch_history_bytes=args.watch_history_bytes,
        event_ttl=args.event_ttl.total_seconds(),
        sharded_list_watch=not args.no_sharded_list_watch,
        connections=listeners.ConnectionLimits(header_timeout=args.header_timeout, idle_timeout=args.idle_timeout,
                                               max_connections=max(0, args.max_connections)),
        min_request_timeout=max(0, args.min_request_timeout),
        reset_data=args.reset_data,
    )
    try:
        asyncio.run(server.serve_forever(options))
    except StoreError as exc:
        print(f"hybrid-operator cluster: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"hybrid-operator cluster: cannot serve on 127.0.0.1:{args.port}: {exc.strerror}. "
              "Choose another --port or stop what is using it.", file=sys.stderr)
        return 1
    return 0


def run_node(args: argparse.Namespace) -> int:
    """``node``: the node agent against the kubeconfig's server until SIGINT/SIGTERM (0); 2 for a bad kubeconfig,
    1 when the server cannot be served."""
    import os
    import signal

    from hybrid_operator.localcluster.nodeagent import agent, kubeconfig
    from hybrid_operator.localcluster.simnode.node import NODE_NAME

    path = args.kubeconfig or Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")
    try:
        endpoint = kubeconfig.load(path.expanduser(), args.context)
    except kubeconfig.KubeconfigError as exc:
        print(f"hybrid-operator node: {exc}", file=sys.stderr)
        return 2

    async def serve() -> None:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await agent.serve(endpoint, stop, lambda: print(
            f"hybrid-operator node {NODE_NAME} serving {endpoint.server}", flush=True))

    try:
        asyncio.run(serve())
    except agent.AgentError as exc:
        print(f"hybrid-operator node: {exc}", file=sys.stderr)
        return 1
    return 0


def run_check(args: argparse.Namespace) -> int:
    from hybrid_operator.cli import checking

    return checking.run(args.watches_file, _environ(args))


def _settings(args: argparse.Namespace, kubeconfig: Path | None) -> Settings:
    from hybrid_operator import errors
    from hybrid_operator.config import settings
    from hybrid_operator.config.values import parse_bool

    environ = _environ(args)
    defaults = settings.Settings()
    try:
        settings.split_ansible_args(args.ansible_args)
    except ValueError as exc:
        raise errors.ConfigurationError(f"--ansible-args {args.ansible_args!r}: {exc}; quote it as a shell "
                                        "would (the SDK strips one pair of wrapping single quotes)") from exc
    return settings.Settings(
        watches_file=args.watches_file.absolute(),
        kubeconfig=kubeconfig.absolute() if kubeconfig else None,
        namespaces=settings.namespaces_from_env(environ),
        max_concurrent_reconciles=args.max_concurrent_reconciles or defaults.max_concurrent_reconciles,
        max_workers=args.max_workers or defaults.max_workers,
        ansible_runner=_runner_mode(args.ansible_runner, environ),
        reconcile_period=args.reconcile_period,
        ansible_verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        ansible_debug_logs=parse_bool(environ.get("ANSIBLE_DEBUG_LOGS", ""), False),
        inject_owner_ref=args.inject_owner_ref,
        # runs have another working directory
        artifacts_dir=args.artifacts_dir.absolute() if args.artifacts_dir is not None else None,
        run_timeout=args.run_timeout,
        suppress_override_values=args.suppress_override_values,
        helm_history_max=max(0, args.history_max),
        helm_manifest_digest=args.helm_manifest_digest,
        helm_timeout=args.helm_timeout,
        metrics_bind_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        metrics_require_rbac=args.metrics_require_rbac,
        health_probe_bind_address=args.health_probe_bind_address,
        leader_elect=args.leader_elect,
        sharding=args.sharding,
        shard_key=args.shard_key,
        shard_ring=args.shard_ring,
        leader_election_id=args.leader_election_id or environ.get("OPERATOR_NAME") or defaults.leader_election_id,
        leader_election_namespace=args.leader_election_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        readiness_window=args.readiness_window,
        environ=environ,
    )


def run_operator(args: argparse.Namespace) -> int:
    import os

    from hybrid_operator import errors
    from hybrid_operator.manager import runtime

    kubeconfig = args.kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    try:
        return runtime.run(_settings(args, kubeconfig))
    except errors.ConfigurationError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code


def run_up(args: argparse.Namespace) -> int:
    from hybrid_operator import errors
    from hybrid_operator.cli import up

    options = up.UpOptions(port=args.port, data_dir=args.data_dir, kubeconfig=args.kubeconfig,
                           crd_dir=args.crd_dir, samples_dir=args.samples_dir, log_format=args.log_format,
                           summary=not args.no_summary, audit_log=args.audit_log,
                           reset_data=args.reset_data, control_plane=args.control_plane)
    try:
        return up.run(options, _settings(args, args.kubeconfig))
    except errors.ConfigurationError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    if args.command == "cluster":
        return run_cluster(args)
    if args.command == "node":
        return run_node(args)
    if args.command == "check":
        return run_check(args)
    if args.command == "run":
        return run_operator(args)
    if args.command == "up":
        return run_up(args)
    if args.command in ("init", "create", "generate", "preview"):
        return run_authoring(args)
    parser.error(f"unknown command {args.command}")
    return 2

