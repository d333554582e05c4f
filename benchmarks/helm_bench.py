"""Benchmark of a Helm no-change resync against a plain ``helm upgrade`` (issue 16 item 5).

Why it exists: the operator resyncs every Helm resource at its reconcile period, nearly always with
nothing changed. A resync used to cost three helm processes and one apply per object, more than
the ``helm upgrade`` a person would run; it now skips the render when helm's record says the
verified revision is current and applies only drifted objects. This measures that claim:

* the embedded cluster runs as a subprocess (``python -m hybrid_operator.cli cluster``) on a free
  loopback port with a temporary data dir; the Memcached CRD of ``config/crd`` is installed;
* the operator's side runs in this process as ``hybrid-operator run`` wires it: a
  :class:`HelmReconciler` with the real helm client, and the dependent watches it registers;
* per chart (the repository's ``charts/memcached``, and a chart of :data:`BIG_OBJECTS` ConfigMaps
  and Services generated in a temporary directory) one CR is installed and resynced once (the full
  resync that verifies the revision); then, interleaved, ``helm upgrade`` of a second release of
  the same chart with the same values (the baseline, a subprocess as a person runs it) and one
  no-change resync of the CR, ``--repeats`` times; the medians are compared;
* a third row per chart times the full resync (render, compare, apply every object: what every
  resync cost before, and what a chart calling ``lookup`` still costs), against the same baseline.

``measure(quick)`` returns the rows for ``make bench``; run as a script it prints a markdown table.
It stops the processes it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "operator"))

from hybrid_operator.config.model import GroupVersionKind, HelmWatch  # noqa: E402
from hybrid_operator.config.settings import Settings  # noqa: E402
from hybrid_operator.controller.dependents import ChildKind, DependentWatches  # noqa: E402
from hybrid_operator.helm.chartscan import UNKNOWN  # noqa: E402
from hybrid_operator.helm.client import HelmClient, chart_digest, find_helm  # noqa: E402
from hybrid_operator.helm.reconciler import HelmReconciler  # noqa: E402
from hybrid_operator.kube.client import ClusterClient  # noqa: E402

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
NAMESPACE = "default"
VALUES: dict[str, Any] = {"size": 1}
BIG_OBJECTS = 60
Row = dict[str, Any]


def big_chart(root: Path, objects: int = BIG_OBJECTS) -> Path:
    """A chart of ``objects`` plain objects (two thirds ConfigMaps, one third Services)."""
    chart = root / "big"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: big\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("size: 1\n")
    services = objects // 3
    (chart / "templates" / "objects.yaml").write_text(
        f"{{{{- range $i := until {objects - services} }}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        "  name: {{ $.Release.Name }}-cm-{{ $i }}\n  labels:\n    app: {{ $.Release.Name }}\n"
        "data:\n  size: {{ $.Values.size | quote }}\n  index: {{ $i | quote }}\n{{- end }}\n"
        f"{{{{- range $i := until {services} }}}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n"
        "  name: {{ $.Release.Name }}-svc-{{ $i }}\nspec:\n  selector:\n    app: {{ $.Release.Name }}\n"
        "  ports:\n  - name: http\n    port: {{ add 8000 $i }}\n{{- end }}\n")
    return chart


class Bench:
    """The cluster subprocess, the clients, and the operator's pieces wired as the runtime does."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self.home = workdir / "home"
        self.home.mkdir()
        self.env = {**os.environ, "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig),
                    "HELM_CACHE_HOME": str(self.home / "cache"), "HELM_CONFIG_HOME": str(self.home / "config"),
                    "HELM_DATA_HOME": str(self.home / "data")}
        self.env.pop("HELM_DRIVER", None)
        self.process: subprocess.Popen[bytes] | None = None
        helm = find_helm(os.environ)
        if helm is None:
            raise SystemExit("helm not found: run `make setup`")
        self.helm_binary = helm

    def start(self) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log = (self.workdir / "cluster.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(port), "--data-dir",
             str(self.workdir / "data"), "--kubeconfig", str(self.kubeconfig)],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
            env={**self.env, "PYTHONPATH": str(REPO / "operator")})
        deadline = time.monotonic() + 60
        while not self.kubeconfig.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the cluster did not start: {(self.workdir / 'cluster.log').read_text()}")
            time.sleep(0.05)
        self.cluster = ClusterClient(self.kubeconfig, user_agent="hybrid-operator-helm-bench")
        deadline = time.monotonic() + 30
        while True:
            try:
                self.cluster.resolve("", "v1", "ConfigMap")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        crd = REPO / "config" / "crd" / "cache.example.com_memcacheds.yaml"
        subprocess.run([self.kubectl(), "apply", "-f", str(crd)], env=self.env, check=True, capture_output=True)
        subprocess.run([self.kubectl(), "wait", "--for=condition=Established", "crd/memcacheds.cache.example.com"],
                       env=self.env, check=True, capture_output=True)

    def kubectl(self) -> str:
        sibling = Path(sys.executable).parent / "kubectl"
        return str(sibling) if sibling.exists() else "kubectl"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def reconciler(self, chart: Path, dependents: DependentWatches, *, render: bool) -> HelmReconciler:
        helm = HelmClient(self.helm_binary, self.kubeconfig, env=self.env)
        settings = Settings(reconcile_period=timedelta(minutes=10), environ={})
        reconciler = HelmReconciler(HelmWatch(gvk=GVK, chart=chart), self.cluster, helm, settings,
                                    asyncio.Semaphore(1), chart_digest(chart), chart_name=chart.name,
                                    chart_scan=UNKNOWN if render else None)
        owner = (GVK.group, GVK.kind)

        async def children(obj: dict[str, Any], kinds: set[ChildKind]) -> None:
            for kind in kinds:
                dependents.ensure(kind, owner, helm=True)

        reconciler.on_children = children
        reconciler.releases = dependents.releases
        reconciler.resyncer.live = dependents
        return reconciler

    async def helm_upgrade(self, release: str, chart: Path) -> float:
        """One ``helm upgrade`` with the same values, as a person runs it: its wall time."""
        argv = [self.helm_binary, "upgrade", release, str(chart), "--namespace", NAMESPACE, "--install",
                "--reset-values", "--values", "-", "--history-max", "10"]
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                                       stderr=subprocess.PIPE, env=self.env)
        _, stderr = await process.communicate(json.dumps(VALUES).encode())
        if process.returncode != 0:
            raise RuntimeError(f"helm upgrade failed: {stderr.decode()}")
        return time.perf_counter() - started

    def revisions(self, release: str) -> int:
        out = subprocess.run([self.helm_binary, "history", release, "--namespace", NAMESPACE, "-o", "json"],
                             env=self.env, check=True, capture_output=True).stdout
        return len(json.loads(out))


async def _settled(dependents: DependentWatches, name: str) -> None:
    """Wait until the dependent watches listed every kind of the release (as a running operator has)."""
    deadline = time.monotonic() + 30
    while not dependents.watched() or \
            not all(dependents.seen(kind, NAMESPACE, name).known for kind in dependents.watched()):
        if time.monotonic() > deadline:
            raise RuntimeError("the dependent watches did not list their kinds")
        await asyncio.sleep(0.05)


async def _chart_rows(bench: Bench, label: str, chart: Path, repeats: int) -> list[Row]:
    dependents = DependentWatches(bench.cluster, lambda *_: None)
    cheap = bench.reconciler(chart, dependents, render=False)
    full = bench.reconciler(chart, dependents, render=True)
    name = f"op-{chart.name}"
    bench.cluster.apply_manifest({"apiVersion": GVK.api_version, "kind": GVK.kind,
                                  "metadata": {"name": name, "namespace": NAMESPACE}, "spec": dict(VALUES)},
                                 "helm-bench", namespace=NAMESPACE)
    for _ in range(2):  # the install, then the full resync that verifies the revision
        outcome = await cheap.reconcile(NAMESPACE, name)
        if outcome.failed:
            raise RuntimeError(f"the reconcile of {name} failed: {(bench.workdir / 'cluster.log').name}")
    await _settled(dependents, name)
    await bench.helm_upgrade(f"base-{chart.name}", chart)  # installs the baseline release
    before = bench.revisions(name)
    upgrades: list[float] = []
    resyncs: list[float] = []
    renders: list[float] = []
    for _ in range(repeats):
        upgrades.append(await bench.helm_upgrade(f"base-{chart.name}", chart))
        started = time.perf_counter()
        await cheap.reconcile(NAMESPACE, name)
        resyncs.append(time.perf_counter() - started)
        started = time.perf_counter()
        await full.reconcile(NAMESPACE, name)
        renders.append(time.perf_counter() - started)
    if bench.revisions(name) != before:
        raise RuntimeError("a no-change resync made a new revision")
    await dependents.close()
    baseline = statistics.median(upgrades)
    return [{"metric": f"Helm no-change resync, {label}", "value": statistics.median(resyncs),
             "baseline": baseline, "unit": "s"},
            {"metric": f"Helm resync with a render (lookup chart, or before this change), {label}",
             "value": statistics.median(renders), "baseline": baseline, "unit": "s"}]


async def _measure(quick: bool) -> list[Row]:
    repeats = 2 if quick else 12
    with tempfile.TemporaryDirectory(prefix="helm-bench-") as temp:
        workdir = Path(temp)
        bench = Bench(workdir)
        bench.start()
        try:
            rows = await _chart_rows(bench, "sample chart (memcached, 2 objects)", REPO / "charts" / "memcached",
                                     repeats)
            rows += await _chart_rows(bench, f"generated chart ({BIG_OBJECTS} objects)", big_chart(workdir),
                                      repeats)
        finally:
            bench.stop()
    return rows


def measure(quick: bool) -> list[Row]:
    """Rows ``{"metric", "value", "baseline", "unit"}``: medians; baseline = ``helm upgrade``, same values."""
    return asyncio.run(_measure(quick))


def table(rows: list[Row]) -> str:
    lines = ["| figure | value | baseline (`helm upgrade`, same values) | ratio |", "|---|---:|---:|---:|"]
    for row in rows:
        ratio = row["value"] / row["baseline"] if row["baseline"] else float("nan")
        lines.append(f"| {row['metric']} | {row['value']:.3f} {row['unit']} | {row['baseline']:.3f} {row['unit']} "
                     f"| {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args()
    rows = measure(args.quick)
    print(table(rows))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nmedians of {2 if args.quick else 12} interleaved repeats; nproc {os.cpu_count()}, "
          f"load average (1/5/15 min) {load}, Python {platform.python_version()}, {platform.machine()}")


if __name__ == "__main__":
    main()
