"""``hybrid-operator up`` (what ``make run`` runs): the local cluster, the CRDs, the operator, the samples.

A newcomer types one command and sees real custom resources reconciled: this
starts ``hybrid-operator cluster`` as a child process (its data persists in
the data dir, so a second ``up`` reuses it), installs ``config/crd``, runs the
operator on ``watches.yaml``, creates the ``config/samples`` resources that do
not exist yet (edits made to them in the cluster are kept), and shows a live
summary of every watched resource until Ctrl-C.  Without a terminal the
summary degrades to one log line per change.

Nothing here takes a fixed port but the cluster's own (``--port``, 6443 unless
told): metrics and probes listen on free loopback ports, printed with the
lines to paste into another shell, so two ``up`` (``make run ARGS='--port
6444'``) or a molecule run beside one never collide.  What ``up`` installs
carries kubectl's last-applied annotation, as if the user had applied it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator import __version__, errors
from hybrid_operator.cli import terminal
from hybrid_operator.config import model, watches
from hybrid_operator.config.settings import Settings
from hybrid_operator.kube import objects
from hybrid_operator.kube.client import ClusterClient
from hybrid_operator.manager import runtime

log = logging.getLogger(__name__)

FIELD_MANAGER = "hybrid-operator-up"
#: what `up` itself installs (CRDs, samples) is sent with this user agent (audit logs tell it apart)
USER_AGENT = f"hybrid-operator-up/{__version__}"
SUMMARY_INTERVAL = 2.0
STARTUP_SECONDS = 60
REAL_STARTUP_SECONDS = 240
#: the real control plane stops three processes in turn, each given up to 15 s
STOP_SECONDS = {"embedded": 20, "real": 60}


@dataclass(frozen=True)
class UpOptions:
    """Where the local cluster lives and what to install into it."""

    port: int
    data_dir: Path
    kubeconfig: Path
    crd_dir: Path
    samples_dir: Path
    log_format: str = "text"
    summary: bool = True
    audit_log: Path | None = None
    reset_data: bool = False  # the cluster's --reset-data
    control_plane: str = "embedded"  # or "real": etcd + kube-apiserver + kube-controller-manager (make kube)


def start_cluster(options: UpOptions) -> subprocess.Popen[bytes]:
    """Start ``hybrid-operator cluster`` and wait until its kubeconfig is written."""
    if options.kubeconfig.exists():
        options.kubeconfig.unlink()
    options.data_dir.mkdir(parents=True, exist_ok=True)
    log_path = options.data_dir / "cluster.log"
    command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", options.log_format, "cluster",
               "--port", str(options.port), "--data-dir", str(options.data_dir),
               "--kubeconfig", str(options.kubeconfig)]
    if options.audit_log is not None:
        command += ["--audit-log", str(options.audit_log)]
    if options.reset_data:
        command.append("--reset-data")
    if options.control_plane != "embedded":
        command += ["--control-plane", options.control_plane]
    start = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as handle:
        # a session of its own: a Ctrl-C reaches `up` alone, which stops the operator first, the cluster last
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    # the real control plane's API server takes longer to be ready (etcd, then its post-start hooks)
    limit = STARTUP_SECONDS if options.control_plane == "embedded" else REAL_STARTUP_SECONDS
    deadline = time.monotonic() + limit
    while not options.kubeconfig.exists():
        if process.poll() is not None:
            with log_path.open("rb") as handle:
                handle.seek(start)
                tail = handle.read().decode(errors="replace")[-2000:]
            hint = (f"\nPort {options.port} is taken (another `make run`?): pass another one, "
                    f"e.g. `make run ARGS='--port {options.port + 1}'` or `hybrid-operator up --port "
                    f"{options.port + 1}`." if "cannot serve on" in tail else
                    "\nTo start a new, empty local cluster: `hybrid-operator up --reset-data` (the old state.db is "
                    "kept beside it)." if "--reset-data" in tail else "")
            raise errors.ConfigurationError(
                f"the local cluster exited with code {process.returncode} (log: {log_path}):\n{tail}{hint}")
        if time.monotonic() > deadline:
            process.terminate()
            raise errors.ConfigurationError(f"the local cluster did not start within {limit} s (log: {log_path})")
        time.sleep(0.05)
    with log_path.open("rb") as handle:  # what the cluster reports at start (damaged rows of state.db)
        handle.seek(start)
        for line in handle.read().decode(errors="replace").splitlines():
            if line.startswith("hybrid-operator cluster:"):
                print(line, file=sys.stderr, flush=True)
    return process


def manifests(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every YAML document in a directory's ``*.yaml``/``*.yml`` files, in name order."""
    found: list[tuple[Path, dict[str, Any]]] = []
    if not directory.is_dir():
        return found
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            raise errors.ConfigurationError(f"{path}: not valid YAML: {exc}") from exc
        found.extend((path, doc) for doc in documents if isinstance(doc, dict))
    return found


def install(cluster: ClusterClient, directory: Path, *, create_only: bool) -> None:
    for path, document in manifests(directory):
        name = objects.meta(document).get("name")
        try:
            outcome = cluster.apply_manifest(document, FIELD_MANAGER, create_only=create_only)
        except errors.TemporaryError as exc:
            log.warning("manifest not applied", extra={"file": str(path), "object": name, "error": str(exc)})
            continue
        log.info("manifest applied", extra={"file": str(path), "kind": document.get("kind"), "object": name,
                                            "outcome": outcome})


def summarize(obj: dict[str, Any]) -> tuple[str, str]:
    """The headline condition of a resource and when it last changed."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    running = conditions.get("Running")
    if running and running.get("status") == "True" and running.get("reason") == "Running":
        # a run in progress: the SDK also sets Successful=False when a run starts, which says nothing yet
        return "Running", str(running.get("lastTransitionTime", ""))
    for kind in ("Failure", "ReleaseFailed", "Irreconcilable"):
        found = conditions.get(kind)
        if found and found.get("status") == "True":
            message = str(found.get("message", "")).splitlines()[0][:60] if found.get("message") else ""
            return f"{kind}: {message}", str(found.get("lastTransitionTime", ""))
    for kind in ("Successful", "Deployed", "Running"):
        found = conditions.get(kind)
        if found:
            return f"{kind}={found.get('status')}", str(found.get("lastTransitionTime", ""))
    return "Pending", ""


def summary_rows(cluster: ClusterClient, loaded: list[model.Watch]) -> list[tuple[str, str, str, str]]:
    rows = []
    for watch in loaded:
        gvk = watch.gvk
        try:
            ref = cluster.resolve(gvk.group, gvk.version, gvk.kind)
            items = cluster.list(ref)
        except errors.TemporaryError:
            continue
        for obj in items:
            meta = objects.meta(obj)
            state, when = summarize(obj)
            name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
            rows.append((gvk.kind, name, state, when))
    return rows


def exports(options: UpOptions) -> list[str]:
    """The lines a user pastes into another shell to reach the local cluster with kubectl and helm."""
    lines = [f"export KUBECONFIG={options.kubeconfig.resolve()}"]
    tools = Path(sys.executable).parent
    if (tools / "kubectl").exists() or (tools / "helm").exists():
        lines.append(f"export PATH={tools}:$PATH")
    return lines


def served(endpoints: runtime.Endpoints) -> list[str]:
    """Where the operator's metrics and probes listen (ports picked at startup unless given)."""
    lines = []
    if endpoints.metrics:
        lines.append(f"metrics: http://{endpoints.metrics}/metrics")
    if endpoints.health:
        lines.append(f"probes:  http://{endpoints.health}/healthz  http://{endpoints.health}/readyz")
    return lines


def render(rows: list[tuple[str, str, str, str]], footer: list[str]) -> str:
    header = ("KIND", "NAME", "CONDITION", "SINCE")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)) for row in [header, *rows]]
    return "\n".join([*lines, "", *footer, "(Ctrl-C stops the operator and the cluster)"])


def summary_companion(options: UpOptions, loaded: list[model.Watch], cluster: ClusterClient,
                      endpoints: runtime.Endpoints) -> runtime.Companion:
    """Creates the samples, then follows the resources; with ``up``'s own client, not the operator's."""
    interactive = options.summary and sys.stdout.isatty()

    async def follow(_: ClusterClient, stop: asyncio.Event) -> None:
        footer = [*exports(options), *served(endpoints)]
        for line in served(endpoints):
            print(line, flush=True)
        await asyncio.to_thread(install, cluster, options.samples_dir, create_only=True)
        previous: dict[tuple[str, str], str] = {}
        while not stop.is_set():
            rows = await asyncio.to_thread(summary_rows, cluster, loaded)
            if interactive:
                sys.stdout.write("\x1b[2J\x1b[H" + render(rows, footer) + "\n")
                sys.stdout.flush()
            else:
                for kind, name, state, when in rows:
                    if previous.get((kind, name)) != state:
                        log.info("resource status", extra={"kind": kind, "object": name, "condition": state,
                                                           "since": when})
                        previous[(kind, name)] = state
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SUMMARY_INTERVAL)

    return follow


def run(options: UpOptions, settings: Settings) -> int:
    """The cluster, the CRDs, the operator and the samples, until SIGINT/SIGTERM; the operator's exit code.

    While it runs, `up` holds the terminal's foreground (:mod:`hybrid_operator.cli.terminal`), so a
    Ctrl-C under `make run` stops `up` cleanly and make exits with `up`'s code.
    """
    with terminal.own_foreground():
        return _run(options, settings)


def _run(options: UpOptions, settings: Settings) -> int:
    loaded = watches.load(settings.watches_file, settings.environ)
    process = start_cluster(options)
    try:
        print(f"local cluster: https://127.0.0.1:{options.port} (data in {options.data_dir})", flush=True)
        for line in exports(options):
            print(line, flush=True)
        cluster = ClusterClient(options.kubeconfig, user_agent=USER_AGENT)
        install(cluster, options.crd_dir, create_only=False)
        os.environ["KUBECONFIG"] = str(options.kubeconfig.resolve())
        endpoints = runtime.Endpoints()
        return runtime.serve(settings, loaded, [summary_companion(options, loaded, cluster, endpoints)], endpoints)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS.get(options.control_plane, 20))
        except subprocess.TimeoutExpired:
            process.kill()
