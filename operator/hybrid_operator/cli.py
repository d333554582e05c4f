"""The ``hybrid-operator`` command line: the only place that parses argv.

Each subcommand turns flags (and environment variables) into settings and
hands them to the module that does the work.  Exit codes: 0 success, 1 runtime
failure, 2 bad input (configuration or usage).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from hybrid_operator import __version__, logs


def _cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("cluster", help="run the embedded Kubernetes API server in the foreground")
    parser.add_argument("--port", type=int, default=6443, help="TCP port on 127.0.0.1 (default 6443)")
    parser.add_argument("--data-dir", type=Path, default=Path(".hybrid/cluster"),
                        help="directory holding state.db (default .hybrid/cluster)")
    parser.add_argument("--in-memory", action="store_true", help="keep nothing on disk")
    parser.add_argument("--kubeconfig", type=Path, default=Path(".hybrid/kubeconfig"),
                        help="kubeconfig written once the server accepts requests (default .hybrid/kubeconfig)")
    parser.add_argument("--no-controllers", action="store_true",
                        help="turn off the fake readiness/garbage-collection/namespace controllers")
    parser.add_argument("--bookmark-interval", type=float, default=30.0,
                        help="seconds between BOOKMARK events on idle watches (default 30)")
    parser.add_argument("--watch-history", type=int, default=20000, help=argparse.SUPPRESS)


def _check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("check", help="validate a watches file and the files it references (no cluster)")
    parser.add_argument("--watches-file", type=Path, default=Path("watches.yaml"),
                        help="the watches file (default ./watches.yaml)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hybrid-operator", description=__doc__)
    parser.add_argument("--version", action="version", version=f"hybrid-operator {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    sub = parser.add_subparsers(dest="command", required=True)
    _cluster_parser(sub)
    _check_parser(sub)
    return parser


def run_cluster(args: argparse.Namespace) -> int:
    from hybrid_operator.localcluster import server

    options = server.ClusterOptions(
        port=args.port,
        data_dir=args.data_dir,
        in_memory=args.in_memory,
        kubeconfig=args.kubeconfig,
        controllers=not args.no_controllers,
        bookmark_interval=args.bookmark_interval,
        watch_history=args.watch_history,
    )
    try:
        asyncio.run(server.serve_forever(options))
    except OSError as exc:
        print(f"hybrid-operator cluster: cannot serve on 127.0.0.1:{args.port}: {exc.strerror}. "
              "Choose another --port or stop what is using it.", file=sys.stderr)
        return 1
    return 0


def run_check(args: argparse.Namespace) -> int:
    from hybrid_operator import errors, watches

    try:
        loaded = watches.load(args.watches_file)
    except errors.ConfigurationError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    for watch in loaded:
        if isinstance(watch, watches.AnsibleWatch):
            target = f"playbook {watch.playbook}" if watch.playbook else f"role {watch.role}"
        else:
            target = f"chart {watch.chart}"
        print(f"{watch.gvk}: {watch.runner} {target}")
    print(f"{args.watches_file}: {len(loaded)} valid entries")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    if args.command == "cluster":
        return run_cluster(args)
    if args.command == "check":
        return run_check(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
