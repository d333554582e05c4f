"""The end-to-end rows of ``make bench``: an embedded cluster, a running operator, CRs through the API.

Why it exists: what a user waits for is not a runner call but the time from creating a custom
resource to its ``Successful=True`` condition, with the watch, the work queue, the status writes and
the operator's process tree in the way; and what an idle operator costs is its resident memory and
whether its periodic resyncs keep their period. Those need the real processes, so this module starts
``hybrid-operator cluster`` and ``hybrid-operator run`` (through :mod:`chaoslib.harness`) on a
project it generates in a temporary directory, and measures each figure interleaved with its
baseline (a naive fresh-process ``ansible-runner run`` of the same playbook, same
``ANSIBLE_GATHERING``; or the period asked for; or a memory target). Times are taken from a watch
stream opened before the first create (each object's first ``Successful=True`` event), not from
polling. ``bench.py`` renders the rows.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from benchkit import PeakRss, Row, naive_run, tree_rss_mib
from chaoslib.harness import (
    Api,
    ClusterProcess,
    Endpoint,
    OperatorProcess,
    condition,
    connection,
    raw_request,
    rss_mib,
    wait_until,
)

GROUP = "bench.hybrid.dev"
NAMESPACE = "default"
ECHO_TASKS = [{"name": "Say hello", "ansible.builtin.debug": {"msg": "hello"}}]
CONFIGMAP_TASKS = [{"name": "The ConfigMap", "kubernetes.core.k8s": {"state": "present", "definition": {
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "{{ ansible_operator_meta.name }}-cm", "namespace": "{{ ansible_operator_meta.namespace }}"},
    "data": {"value": "bench"}}}}]
#: kind -> (role, whether it has the idle rows' reconcilePeriod)
KINDS: dict[str, tuple[str, bool]] = {
    "Echo": ("echo", False), "Cm": ("configmap", False), "Idle": ("echo", True), "Quiet": ("echo", False),
}


@dataclass(frozen=True)
class Counts:
    """How much each figure does (``--quick`` shrinks all of them: a smoke run, not a measurement)."""

    sequential: int
    burst: int
    burst_naive: int
    idle: int
    #: the idle kind's reconcile period, and how long its runs are followed (a few periods)
    period: float
    idle_seconds: float
    resident: int
    #: the resident rows: seconds to let the operator settle, then samples one second apart
    settle: float
    samples: int

    @classmethod
    def of(cls, quick: bool) -> Counts:
        if quick:
            return cls(sequential=1, burst=3, burst_naive=1, idle=2, period=3.0, idle_seconds=8.0, resident=10,
                       settle=1.0, samples=2)
        return cls(sequential=10, burst=200, burst_naive=200, idle=50, period=10.0, idle_seconds=60.0,
                   resident=1000, settle=5.0, samples=5)


def plural(kind: str) -> str:
    return kind.lower() + "s"


def crd(kind: str) -> dict[str, Any]:
    """A namespaced v1 CRD with a status subresource and open spec/status schemas."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object", "properties": {"spec": open_object, "status": open_object}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural(kind)}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural(kind), "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": schema}}]}}


def write_project(root: Path, period: float) -> Path:
    """Roles, watches, CRDs and the naive baseline's playbooks under ``root``; the watches file."""
    for role, tasks in (("echo", ECHO_TASKS), ("configmap", CONFIGMAP_TASKS)):
        (root / "roles" / role / "tasks").mkdir(parents=True)
        (root / "roles" / role / "tasks" / "main.yml").write_text(yaml.safe_dump(tasks, sort_keys=False))
        (root / f"{role}.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "roles": [role]}]))
    watches = []
    for kind, (role, periodic) in KINDS.items():
        entry: dict[str, Any] = {"group": GROUP, "version": "v1", "kind": kind, "role": str(root / "roles" / role)}
        if periodic:
            entry["reconcilePeriod"] = f"{period:g}s"
        watches.append(entry)
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    (root / "crds.yaml").write_text(yaml.safe_dump_all([crd(kind) for kind in KINDS]))
    return root / "watches.yaml"


class SuccessWatch:
    """A watch on one kind: when each object was first seen with ``Successful=True`` (monotonic s)."""

    def __init__(self, endpoint: Endpoint, kind: str) -> None:
        self.endpoint = endpoint
        self.path = f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/{plural(kind)}?watch=true&timeoutSeconds=3600"
        self.seen: dict[str, float] = {}
        self._changed = threading.Condition()
        self._stopped = threading.Event()
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> SuccessWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)

    def _follow(self) -> None:
        while not self._stopped.is_set():
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                self._stream()
            self._stopped.wait(0.2)

    def _stream(self) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", self.endpoint.port, context=self.endpoint.context)
        try:
            conn.connect()
            self._socket = conn.sock
            conn.request("GET", self.path, headers={"Authorization": f"Bearer {self.endpoint.token}"})
            response = conn.getresponse()
            for line in iter(response.readline, b""):
                self._record(json.loads(line).get("object") or {}, time.monotonic())
        finally:
            conn.close()

    def _record(self, obj: dict[str, Any], stamp: float) -> None:
        if condition(obj, "Successful") != "True":
            return
        with self._changed:
            self.seen.setdefault(str(obj["metadata"]["name"]), stamp)
            self._changed.notify_all()

    def wait(self, names: list[str], timeout: float) -> bool:
        """True once every one of ``names`` was seen Successful; False after ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: all(name in self.seen for name in names), timeout)


@dataclass
class Bench:
    """The cluster, the operator, the generated project and a keep-alive connection for creates."""

    cluster: ClusterProcess
    operator: OperatorProcess
    project: Path
    work: Path
    endpoint: Endpoint
    conn: http.client.HTTPSConnection
    notes: list[str] = field(default_factory=list)

    def _send(self, method: str, path: str, body: Any = None) -> tuple[int, bool]:
        """One request on the keep-alive connection, sent again once on a new connection if the server had
        closed the idle one; (HTTP status, whether it was sent again)."""
        try:
            return raw_request(self.conn, self.endpoint, method, path, body), False
        except (OSError, http.client.HTTPException):
            self.conn.close()
            return raw_request(self.conn, self.endpoint, method, path, body), True

    def create(self, kind: str, name: str) -> None:
        body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {}}
        status, again = self._send("POST", f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/{plural(kind)}", body)
        if status != 201 and not (again and status == 409):
            raise RuntimeError(f"creating {kind} {name}: HTTP {status}")

    def delete(self, kind: str, name: str) -> None:
        self._send("DELETE", f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/{plural(kind)}/{name}")

    def watch(self, kind: str) -> SuccessWatch:
        return SuccessWatch(self.endpoint, kind)

    def naive(self, role: str, name: str) -> float:
        """The naive baseline: the role's playbook in a fresh ``ansible-runner run``, against this cluster."""
        return naive_run(self.work, self.project / f"{role}.yml", roles=self.project / "roles",
                         env={"KUBECONFIG": str(self.cluster.kubeconfig)},
                         extravars={"ansible_operator_meta": {"name": name, "namespace": NAMESPACE}})


@contextlib.contextmanager
def running(work: Path, counts: Counts) -> Iterator[Bench]:
    """A cluster with the bench CRDs and an operator (default flags, JSON logs) on the generated project."""
    project = work / "project"
    project.mkdir(parents=True)
    watches = write_project(project, counts.period)
    cluster = ClusterProcess(work / "cluster")
    cluster.start()
    bin_dir = str(Path(sys.executable).parent)
    operator = OperatorProcess(cluster, watches, work / "operator",
                               env={"PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])})
    try:
        Api(cluster.kubeconfig).apply_file(project / "crds.yaml")
        operator.start()
        if wait_until(operator.started, 120, 0.1) is None:
            raise RuntimeError(f"the operator did not start (log: {operator.log})")
        endpoint = Endpoint.of(cluster)
        with connection(endpoint) as conn:
            yield Bench(cluster, operator, project, work, endpoint, conn)
    finally:
        operator.stop()
        cluster.stop()


# -- the figures -------------------------------------------------------------------------------------


def create_and_wait(bench: Bench, watch: SuccessWatch, kind: str, name: str) -> float:
    """Seconds from the POST of ``name`` to the watch event that shows it ``Successful=True``."""
    started = time.monotonic()
    bench.create(kind, name)
    if not watch.wait([name], 300):
        raise RuntimeError(f"{kind} {name} not Successful within 300 s (log: {bench.operator.log})")
    return watch.seen[name] - started


def sequential_row(bench: Bench, kind: str, count: int, figure: str) -> Row:
    """``count`` CRs one after another, each followed by one naive run of the same role (interleaved)."""
    role = KINDS[kind][0]
    mine, naive = [], []
    with bench.watch(kind) as watch:
        create_and_wait(bench, watch, kind, f"{kind.lower()}-warmup")  # starts the worker and its zygote
        bench.naive(role, "naive-warmup")
        for index in range(count):
            mine.append(create_and_wait(bench, watch, kind, f"{kind.lower()}-{index}"))
            naive.append(bench.naive(role, f"naive-{kind.lower()}-{index}"))
    durations = [float(record.get("duration") or 0) for record in bench.operator.runs()
                 if str(record.get("cr", "")).startswith(f"{kind.lower()}-") and record.get("kind") == kind]
    return Row(f"{figure}, CR create → Successful (median of {count})", statistics.median(mine),
               "naive fresh `ansible-runner run` of the same playbook, same gathering", statistics.median(naive),
               note=f"one warm-up CR and naive run first; interleaved one by one; the runs themselves "
                    f"(operator's `run finished` duration) {statistics.median(durations):.3f} s median")


def burst_rows(bench: Bench, counts: Counts) -> list[Row]:
    """``counts.burst`` ConfigMap CRs at once against naive serial runs (half before, half after)."""
    names = [f"burst-{index}" for index in range(counts.burst)]
    half = counts.burst_naive // 2
    serial = [bench.naive("configmap", f"naive-burst-{index}") for index in range(half)]
    with bench.watch("Cm") as watch, PeakRss(bench.operator.pid, 0.1, pss=True) as peak:
        started = time.monotonic()
        for name in names:
            bench.create("Cm", name)
        done = watch.wait(names, 60.0 + 10.0 * counts.burst)
        elapsed = max(watch.seen.get(name, time.monotonic()) for name in names) - started
    serial += [bench.naive("configmap", f"naive-burst-{index}") for index in range(half, counts.burst_naive)]
    scale = counts.burst / counts.burst_naive
    baseline = f"{counts.burst} x naive serial" if scale == 1 else \
        f"{counts.burst_naive} naive serial runs x {scale:g}"
    note = "" if done else f"timed out: {sum(name in watch.seen for name in names)} of {counts.burst} Successful"
    concurrency = os.cpu_count() or 1
    return [
        Row(f"{counts.burst} ConfigMap CRs created at once → all Successful (default concurrency {concurrency})",
            elapsed if done else None, baseline, sum(serial) * scale, note=note or "half the naive runs before, "
            "half after"),
        Row(f"peak RSS of the operator's process tree during the {counts.burst}-CR burst", peak.peak,
            "target 600 MiB", 600.0, unit="MiB", note="operator + warm worker + runs, sampled every 100 ms; "
            "summed RSS, so a page forked processes share counts once per process"),
        Row(f"peak PSS of the operator's process tree during the {counts.burst}-CR burst", peak.peak_pss,
            "target 600 MiB", 600.0, unit="MiB", note="the same samples as PSS: each shared page divided among "
            "its sharers, so the sum is the memory the tree holds"),
    ]


def follow_runs(operator: OperatorProcess, kind: str, seconds: float) -> dict[str, list[float]]:
    """When each CR of ``kind`` logged ``run finished`` during the next ``seconds`` (log read every 100 ms)."""
    seen = len(operator.records())
    stamps: dict[str, list[float]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
        records = operator.records()
        now = time.monotonic()
        for record in records[seen:]:
            if record.get("msg") == "run finished" and record.get("kind") == kind:
                stamps.setdefault(str(record.get("cr")), []).append(now)
        seen = len(records)
    return stamps


def idle_rows(bench: Bench, counts: Counts) -> list[Row]:
    """``counts.idle`` CRs of the periodic kind: intervals between consecutive runs of each, over a window."""
    names = [f"idle-{index}" for index in range(counts.idle)]
    with bench.watch("Idle") as watch:
        for name in names:
            bench.create("Idle", name)
        watch.wait(names, 300)
    stamps = follow_runs(bench.operator, "Idle", counts.idle_seconds)
    for name in names:
        bench.delete("Idle", name)
    intervals = sorted(later - earlier for runs in stamps.values() for earlier, later in itertools.pairwise(runs))
    figure = f"{counts.idle} idle CRs, {counts.period:g} s period: interval between runs of a CR"
    note = (f"{len(intervals)} intervals over {counts.idle_seconds:.0f} s, "
            f"{sum(map(len, stamps.values()))} runs; from the operator's `run finished` log lines")
    if not intervals:
        return [Row(f"{figure}, median", None, "the period asked for", counts.period, note=note)]
    p90 = intervals[min(len(intervals) - 1, int(0.9 * len(intervals)))]
    return [Row(f"{figure}, median", statistics.median(intervals), "the period asked for", counts.period, note=note),
            Row(f"{figure}, p90", p90, "the period asked for", counts.period)]


def worker_pid(operator_pid: int) -> int | None:
    """The warm Ansible worker: the operator's child running ``hybrid_operator.ansible.warmworker``."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if parent == operator_pid and b"warmworker" in (entry / "cmdline").read_bytes():
                return int(entry.name)
    return None


def settled_median(probe: Callable[[], float], samples: int) -> float:
    values = []
    for _ in range(samples):
        values.append(probe())
        time.sleep(1.0)
    return statistics.median(values)


def resident_rows(bench: Bench, counts: Counts, others: int) -> list[Row]:
    """VmRSS of the operator, and of the warm worker's tree, with ``counts.resident`` more converged CRs."""
    names = [f"quiet-{index}" for index in range(counts.resident)]
    with bench.watch("Quiet") as watch:
        for name in names:
            bench.create("Quiet", name)
        done = watch.wait(names, 120.0 + 2.0 * counts.resident)
    time.sleep(counts.settle)
    operator = settled_median(lambda: rss_mib(bench.operator.pid), counts.samples)
    worker = worker_pid(bench.operator.pid)
    worker_rss = settled_median(lambda: rss_mib(worker), counts.samples) if worker is not None else None
    zygotes = tree_rss_mib(worker) - (worker_rss or 0.0) if worker is not None else 0.0
    note = (f"{counts.resident} trivial CRs converged (+ {others} from the rows above); "
            f"median of {counts.samples} samples")
    if not done:
        note = f"timed out: {sum(name in watch.seen for name in names)} of {counts.resident} Successful; " + note
    return [Row(f"operator RSS idle with {counts.resident:,} CRs", operator, "target 150 MiB", 150.0, unit="MiB",
                note=note),
            Row(f"warm worker RSS idle, {counts.resident:,} CRs", worker_rss, "target 150 MiB", 150.0, unit="MiB",
                note=f"VmRSS of the worker process (a child of the operator); its idle zygotes add {zygotes:.0f} MiB "
                     "of RSS, mostly pages shared with the worker (fork)")]


def measure_sequential(work: Path, count: int) -> list[Row]:
    """The two CR create -> Successful rows alone (``bench.py --only sequential``): ``count`` CRs each."""
    counts = Counts.of(quick=False)
    with running(work / "e2e", counts) as bench:
        return [sequential_row(bench, "Echo", count, "one-task role"),
                sequential_row(bench, "Cm", count, "one `k8s` ConfigMap task role")]


def measure(quick: bool, work: Path) -> list[Row]:
    """Every end-to-end row, against one cluster and one operator started for them."""
    counts = Counts.of(quick)
    with running(work / "e2e", counts) as bench:
        rows = [sequential_row(bench, "Echo", counts.sequential, "one-task role"),
                sequential_row(bench, "Cm", counts.sequential, "one `k8s` ConfigMap task role")]
        rows += burst_rows(bench, counts)
        rows += idle_rows(bench, counts)
        others = 2 * (counts.sequential + 1) + counts.burst
        rows += resident_rows(bench, counts, others)
    return rows
