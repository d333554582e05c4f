#!/usr/bin/env python3
"""Run real public Helm charts through their life cycle against a fresh embedded cluster.

For each chart found: ``helm install --wait``, ``helm upgrade --wait``, ``helm rollback --wait``,
``helm test`` and ``helm uninstall --wait``, all with helm's default flags otherwise (OpenAPI
validation, server-side apply), then a check that the release left nothing behind in its
namespace but what a cluster keeps there itself.  It prints one table row per chart and step.
The install and the upgrade go through the operator's manifest gate (the post-renderer every
helm render of the operator goes through, :mod:`hybrid_operator.helm.gate`), as the operator runs
them: a chart the gate refuses fails its step, with the gate's reason.

The charts are never copied into this repository: point ``--checkout`` at checkouts of
their repositories (a work tree, or a bare git dir whose HEAD is extracted to a temporary
directory), e.g. of prometheus-community/helm-charts, grafana/helm-charts and
kubernetes/ingress-nginx.  Every chart of :data:`KNOWN` found under a checkout runs, with
its values (persistence enabled where the chart has it; kube-state-metrics a second time with
``extraManifests`` holding a ``kind: List``); ``--chart DIR`` adds any other.

    .venv/bin/python scripts/public_charts.py --checkout ~/src/helm-charts --checkout ~/src/grafana-charts

Exit status 0 when every step of every chart passed, 1 otherwise, 2 when no chart was found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = "180s"
# ``extraManifests`` holding a ``kind: List`` of two ConfigMaps (what ``kubectl get -o yaml`` writes).
LIST_MANIFEST = ('json:extraManifests=[{"apiVersion":"v1","kind":"List","items":['
                 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"listed-a"},"data":{"k":"a"}},'
                 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"listed-b"},"data":{"k":"b"}}]}]')
# Chart directory inside its repository, values to set (``key=value`` for --set, ``json:key=value``
# for --set-json).
KNOWN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("charts/prometheus-node-exporter", ()),
    ("charts/kube-state-metrics", ()),
    ("charts/kube-state-metrics", (LIST_MANIFEST,)),
    ("charts/grafana", ("persistence.enabled=true",)),
    ("charts/alertmanager", ("persistence.enabled=true",)),
    ("charts/prometheus-statsd-exporter", ()),
    ("charts/ingress-nginx", ()),
)
# What a namespace holds by itself (never left behind by a release).
NAMESPACE_DEFAULTS = {"configmap/kube-root-ca.crt", "serviceaccount/default"}


@dataclass
class Chart:
    name: str
    path: Path
    values: tuple[str, ...] = ()
    steps: list[tuple[str, bool, float, str]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _binary(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: run `make setup`")
    return found


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "--git-dir", str(checkout), *args], capture_output=True, check=False)


def _last_revision(checkout: Path, inner: str) -> str:
    """HEAD, or (for a chart since moved away) the last commit that still had ``inner/Chart.yaml``."""
    if _git(checkout, "cat-file", "-e", f"HEAD:{inner}/Chart.yaml").returncode == 0:
        return "HEAD"
    last = _git(checkout, "rev-list", "-1", "HEAD", "--", f"{inner}/Chart.yaml").stdout.decode().strip()
    return f"{last}^" if last else ""


def _tree(checkout: Path, inner: str, scratch: Path) -> Path | None:
    """``inner`` of a work tree, or extracted from a bare git dir (its HEAD, or the chart's last version)."""
    if (checkout / inner / "Chart.yaml").exists():
        return checkout / inner
    if not (checkout / "HEAD").exists():
        return None
    revision = _last_revision(checkout, inner)
    archive = _git(checkout, "archive", revision, inner) if revision else None
    if archive is None or archive.returncode != 0:
        return None
    target = scratch / str(abs(hash((str(checkout), inner))))
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target / inner if (target / inner / "Chart.yaml").exists() else None


def find_charts(checkouts: list[Path], extra: list[Path], scratch: Path) -> list[Chart]:
    charts = []
    for checkout in checkouts:
        for inner, values in KNOWN:
            path = _tree(checkout.resolve(), inner, scratch)
            if path is not None:
                charts.append(Chart(path.name, path, values))
    charts.extend(Chart(path.name, path.resolve()) for path in extra)
    return charts


class Gate:
    """The operator's manifest gate, served from a thread of its own while helm runs in this one."""

    def __init__(self, kubeconfig: Path) -> None:
        from hybrid_operator.helm.gate import PLUGIN, ManifestGate, discovery
        from hybrid_operator.kube.client import ClusterClient

        self.plugin = PLUGIN
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.gate = ManifestGate(discovery(ClusterClient(kubeconfig)))
        asyncio.run_coroutine_threadsafe(self.gate.start(), self.loop).result(timeout=30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.gate.close(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class Cluster:
    """A ``hybrid-operator cluster --in-memory`` process with its own HOME for helm and kubectl."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.kubeconfig = workdir / "kubeconfig"
        self.env = dict(os.environ, HOME=str(workdir), KUBECONFIG=str(self.kubeconfig),
                        HELM_CACHE_HOME=str(workdir / "helm-cache"), HELM_CONFIG_HOME=str(workdir / "helm-config"),
                        HELM_DATA_HOME=str(workdir / "helm-data"))
        log = (workdir / "cluster.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--in-memory", "--port", str(self.port),
             "--kubeconfig", str(self.kubeconfig)], stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        deadline = time.monotonic() + 60
        while not self.kubeconfig.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the cluster did not start; see {workdir / 'cluster.log'}")
            time.sleep(0.1)

    def run(self, *command: str, timeout: float = 300, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, env={**self.env, **(env or {})}, capture_output=True, text=True, check=False,
                              timeout=timeout, cwd=self.workdir)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _leftovers(cluster: Cluster, namespace: str) -> tuple[list[str], list[str]]:
    """What a release left in its namespace: (what kube keeps too, anything else)."""
    listed = cluster.run(_binary("kubectl"), "get", "all,configmap,secret,serviceaccount,pvc,role,rolebinding",
                         "-n", namespace, "-o", "json")
    kept, other = [], []
    for item in json.loads(listed.stdout or "{}").get("items", []):
        name = f"{item['kind'].lower()}/{item['metadata']['name']}"
        annotations = item["metadata"].get("annotations") or {}
        if name in NAMESPACE_DEFAULTS:
            continue
        if item["kind"] == "Pod" and "helm.sh/hook" in annotations:
            kept.append(name)  # helm test Pods stay unless their hook-delete-policy says otherwise
        elif item["kind"] == "PersistentVolumeClaim" and item["metadata"]["name"].rsplit("-", 1)[-1].isdigit():
            kept.append(name)  # StatefulSet claims outlive their StatefulSet (retention policy Retain)
        else:
            other.append(name)
    return sorted(kept), sorted(other)


def run_chart(cluster: Cluster, chart: Chart, index: int, gate: Gate) -> None:
    helm = _binary("helm")
    release, namespace = f"r{index}", f"chart-{index}-{chart.name}"[:63]
    sets = [arg for value in chart.values
            for arg in (("--set-json", value[5:]) if value.startswith("json:") else ("--set", value))]
    wait = ("--wait", "--timeout", TIMEOUT)
    steps: list[tuple[str, list[str]]] = [
        ("install", [helm, "install", release, str(chart.path), "-n", namespace, "--create-namespace", *sets, *wait]),
        ("upgrade", [helm, "upgrade", release, str(chart.path), "-n", namespace, *sets,
                     "--set-string", "podAnnotations.hybrid-upgrade=2", *wait]),
        ("rollback", [helm, "rollback", release, "1", "-n", namespace, *wait]),
        ("test", [helm, "test", release, "-n", namespace, "--timeout", TIMEOUT]),
        ("uninstall", [helm, "uninstall", release, "-n", namespace, *wait]),
    ]
    for step, command in steps:
        started = time.monotonic()
        if step in ("install", "upgrade"):  # as the operator runs them: through its manifest gate
            with gate.gate.ticket(namespace, cross_namespace=False) as ticket:
                done = cluster.run(*command, "--post-renderer", gate.plugin, "--post-renderer-args", ticket.id,
                                   env=gate.gate.env(cluster.env))
            refusal = ticket.refusal
        else:
            done, refusal = cluster.run(*command), None
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] if done.returncode else []
        if refusal:
            last = [f"gate: {refusal}"]
        chart.steps.append((step, done.returncode == 0, time.monotonic() - started,
                            " ".join(last)[:600 if refusal else 160]))
        if done.returncode != 0 and step == "install":
            return
        if step == "install" and LIST_MANIFEST in chart.values:
            items = cluster.run(_binary("kubectl"), "get", "configmap", "listed-a", "listed-b", "-n", namespace,
                                "-o", "name")
            chart.steps.append(("List items created", items.returncode == 0, 0.0,
                                (items.stderr or items.stdout).strip()[:160]))
    kept, other = _leftovers(cluster, namespace)
    left = ", ".join(other) or (f"kept as kube keeps them: {', '.join(kept)}" if kept else "")
    chart.steps.append(("nothing left", not other, 0.0, left[:200]))


def _label(value: str) -> str:
    return "extraManifests=[kind: List of 2 ConfigMaps]" if value == LIST_MANIFEST else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="a checkout (work tree or bare git dir) of a charts repository; repeatable")
    parser.add_argument("--chart", type=Path, action="append", default=[], help="another chart directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="public-charts-") as temp:
        scratch = Path(temp)
        charts = find_charts(args.checkout, args.chart, scratch / "charts")
        if not charts:
            print("no chart found (give --checkout or --chart)", file=sys.stderr)
            return 2
        workdir = scratch / "cluster"
        workdir.mkdir()
        cluster = Cluster(workdir)
        gate = Gate(cluster.kubeconfig)
        try:
            for index, chart in enumerate(charts):
                run_chart(cluster, chart, index, gate)
        finally:
            gate.close()
            cluster.stop()
    print("| chart | values | step | result | seconds | detail |")
    print("|---|---|---|---|---:|---|")
    for chart in charts:
        values = " ".join(_label(value) for value in chart.values)
        for step, ok, seconds, detail in chart.steps:
            print(f"| {chart.name} | {values} | {step} | {'ok' if ok else 'FAILED'} | "
                  f"{seconds:.1f} | {detail} |")
    return 0 if all(ok for chart in charts for _, ok, _, _ in chart.steps) else 1


if __name__ == "__main__":
    sys.exit(main())
