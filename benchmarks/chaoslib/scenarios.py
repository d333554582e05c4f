"""The scenarios of ``make chaos``: one fault each, tried a bounded number of times, measured.

Every scenario returns one :class:`Row`: how many tries, how many the system survived (converged,
nothing lost, nothing duplicated), the writes lost, the work duplicated, the longest time from the
fault's end to convergence, and notes with the scenario's own figures. The definitions of "lost"
and "duplicated" are the user's: an acknowledged write that is gone or not reflected in the end; a
playbook run of one resource while another runs (the playbook records it under a lock), a helm
process of a killed operator still working next to its successor, a release made again or taken
over by another kind. Counts and times are bounded; only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaoslib.harness import (
    PROJECT,
    Api,
    ClusterProcess,
    Endpoint,
    OperatorProcess,
    alive,
    condition,
    connection,
    cr,
    cr_path,
    helm_actions,
    open_fds,
    raw_request,
    rss_mib,
    wait_until,
)

CONVERGE = 180.0  # the longest wait for convergence after a fault, per try
HELM = str(Path(sys.executable).parent / "helm")


@dataclass
class Row:
    scenario: str
    tries: int = 0
    survived: int = 0
    lost: int = 0
    duplicated: int = 0
    converge: float = 0.0
    notes: str = ""
    converged_all: bool = True

    def tried(self, converged: float | None, lost: int = 0, duplicated: int = 0) -> None:
        self.tries += 1
        self.lost += lost
        self.duplicated += duplicated
        if converged is None:
            self.converged_all = False
        else:
            self.converge = max(self.converge, converged)
        if converged is not None and not lost and not duplicated:
            self.survived += 1


@dataclass
class Context:
    workdir: Path
    quick: bool
    soak_seconds: float | None = None  # the soak's time budget, when not its default

    def tries(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Setup:
    cluster: ClusterProcess
    api: Api
    operator: OperatorProcess
    chaos_dir: Path

    def overlaps(self) -> int:
        path = self.chaos_dir / "overlaps"
        return len(path.read_text().splitlines()) if path.exists() else 0


@contextlib.contextmanager
def environment(ctx: Context, name: str, watches: str = "watches.yaml", *operator_args: str) -> Iterator[Setup]:
    """A cluster with the chaos CRDs and one operator on ``watches``; both stopped afterwards."""
    workdir = ctx.workdir / name
    cluster = ClusterProcess(workdir / "cluster")
    cluster.start()
    operator = OperatorProcess(cluster, PROJECT / watches, workdir / "operator", operator_args,
                               {"CHAOS_DIR": str(workdir)})
    try:
        api = cluster.api()
        api.apply_file(PROJECT / "crds.yaml")
        operator.start()
        if wait_until(operator.started, 120) is None:
            raise RuntimeError(f"the operator did not start (log: {operator.log})")
        yield Setup(cluster, api, operator, workdir)
    finally:
        operator.stop()
        cluster.stop()


def work_done(api: Api, name: str, value: str) -> bool:
    """The playbook reflected ``value`` for the current generation, and its child has it."""
    obj = api.get(cr_path("Work", name)) or {}
    status = obj.get("status") or {}
    child = api.get(f"/api/v1/namespaces/default/configmaps/{name}-work") or {}
    # not Successful=True: a resync that starts sets it False until it ends (observedGeneration is
    # written by the end of a run for that generation, the result by the playbook)
    return (status.get("result") == value and condition(obj, "Failure") != "True"
            and status.get("observedGeneration") == obj["metadata"].get("generation")
            and (child.get("data") or {}).get("value") == value)


def deployed(api: Api, kind: str, name: str, value: str, count: int = 1) -> bool:
    """The Helm CR says Deployed for its generation and the release's objects have ``value``."""
    obj = api.get(cr_path(kind, name)) or {}
    status = obj.get("status") or {}
    if condition(obj, "Deployed") != "True" or status.get("observedGeneration") != obj["metadata"].get("generation"):
        return False
    suffix = kind.lower() if kind != "Bulk" else None
    names = [f"{name}-{suffix}"] if suffix else [f"{name}-{i}" for i in (0, count - 1)]
    for child in names:
        found = api.get(f"/api/v1/namespaces/default/configmaps/{child}") or {}
        if (found.get("data") or {}).get("value") != value:
            return False
    return True


def set_spec(api: Api, kind: str, name: str, spec: dict[str, Any]) -> None:
    api.merge(cr_path(kind, name), {"spec": spec})


# -- operator kill -9 mid-playbook ----------------------------------------------------------------------


def operator_kill_mid_playbook(ctx: Context) -> Row:
    row = Row("operator kill -9 mid-playbook")
    with environment(ctx, "kill-playbook") as env:
        swept = 0
        for attempt in range(1, ctx.tries(5, 1) + 1):
            value = f"v{attempt}"
            overlaps = env.overlaps()
            if attempt == 1:  # the first kill hits the resource's first run, the others a change of its spec
                env.api.send("POST", cr_path("Work"), cr("Work", "w", {"seconds": 3, "value": value}))
            else:
                set_spec(env.api, "Work", "w", {"seconds": 3, "value": value})
            if wait_until(lambda: env.operator.children("sleep"), 120, 0.05) is None:
                row.tried(None)
                continue
            left = env.operator.children()
            env.operator.kill9()
            killed = time.monotonic()
            env.operator.restart()
            converged = wait_until(functools.partial(work_done, env.api, "w", value), CONVERGE)
            swept += sum(1 for pid in left if not alive(pid))
            row.tried(None if converged is None else time.monotonic() - killed,
                      lost=0 if converged is not None else 1, duplicated=env.overlaps() - overlaps)
        row.notes = (f"killed while the playbook slept; its leftover processes stopped at restart: "
                     f"{swept}; runs at once: {env.overlaps()}")
    return row


# -- operator kill -9 mid-helm-install / upgrade -------------------------------------------------------


def _uid(api: Api, name: str) -> str:
    return str(((api.get(f"/api/v1/namespaces/default/configmaps/{name}") or {}).get("metadata") or {}).get("uid"))


def _helm_overlap(env: Setup, release: str, old: list[int], seconds: float) -> bool:
    """Whether a helm of the killed operator still worked on ``release`` next to one of its successor."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in old):
            return False
        if [pid for pid in helm_actions(env.operator, release) if pid not in old]:
            return True
        time.sleep(0.05)
    return False


def _release_status(api: Api, release: str) -> list[str]:
    """The ``status`` labels of helm's release Secrets of ``release`` (one per revision)."""
    selector = f"owner%3Dhelm%2Cname%3D{release}"
    return [str((s["metadata"].get("labels") or {}).get("status", ""))
            for s in api.items(f"/api/v1/namespaces/default/secrets?labelSelector={selector}")]


def _pending(api: Api, release: str) -> bool:
    return any(status.startswith("pending") for status in _release_status(api, release))


def helm_kill(ctx: Context, upgrade: bool) -> Row:
    action = "upgrade" if upgrade else "install"
    row = Row(f"operator kill -9 mid-helm-{action} (slow chart)")
    count = 60 if ctx.quick else 100
    survived_helm = remade = mid = 0
    with environment(ctx, f"kill-helm-{action}") as env:
        for attempt in range(1, ctx.tries(3, 1) + 1):
            name = f"b{attempt}"
            if upgrade:
                env.api.send("POST", cr_path("Bulk"), cr("Bulk", name, {"count": count, "value": "a"}))
                if wait_until(functools.partial(deployed, env.api, "Bulk", name, "a", count), CONVERGE) is None:
                    row.tried(None)
                    continue
                first = _uid(env.api, f"{name}-0")
                set_spec(env.api, "Bulk", name, {"count": count, "value": "b"})
            else:
                env.api.send("POST", cr_path("Bulk"), cr("Bulk", name, {"count": count, "value": "b"}))
            # the kill comes while helm applies the objects: its release is pending-install/-upgrade
            if wait_until(functools.partial(_pending, env.api, name), 120, 0.02) is None:
                row.tried(None)
                continue
            time.sleep(random.uniform(0.0, 0.3))
            old = helm_actions(env.operator, name)
            env.operator.kill9()
            killed = time.monotonic()
            mid += int(_pending(env.api, name))
            time.sleep(1.0)
            survived_helm += sum(1 for pid in old if alive(pid))
            env.operator.restart()
            overlap = _helm_overlap(env, name, old, 30)
            converged = wait_until(functools.partial(deployed, env.api, "Bulk", name, "b", count), CONVERGE)
            again = upgrade and converged is not None and _uid(env.api, f"{name}-0") != first
            remade += int(again)
            row.tried(None if converged is None else time.monotonic() - killed, lost=int(converged is None),
                      duplicated=int(overlap) + int(again))
        row.notes = (f"{count} ConfigMaps; release still pending-{action} just after the kill: {mid} of "
                     f"{row.tries}; helm processes alive 1 s after the kill: {survived_helm}; deployed releases "
                     f"made again: {remade}")
    return row


def _at_work(api: Api, process: subprocess.Popen[bytes], release: str) -> bool:
    """The helm ``process`` has made its pending revision of ``release`` (or already ended)."""
    return process.poll() is not None or _pending(api, release)


def helm_left_running(ctx: Context) -> Row:
    """A helm process that outlived its (dead) operator: started here as it would have been left."""
    row = Row("helm left running by a dead operator (simulated)")
    count = 30 if ctx.quick else 40
    stopped_by_sweep = 0
    with environment(ctx, "helm-left") as env:
        for attempt in range(1, ctx.tries(3, 1) + 1):
            name = f"l{attempt}"
            env.api.send("POST", cr_path("Bulk"), cr("Bulk", name, {"count": count, "value": "a"}))
            if wait_until(functools.partial(deployed, env.api, "Bulk", name, "a", count), CONVERGE) is None:
                row.tried(None)
                continue
            env.operator.stop()
            # what a helm left by a dead operator looks like: the operator's kubeconfig and scope marker
            leftover = subprocess.Popen(
                [HELM, "upgrade", name, str(PROJECT / "charts" / "bulk"), "--namespace", "default", "--reuse-values",
                 "--set", "value=stale,count=400", "--kubeconfig", str(env.operator.artifacts / "kubeconfig")],
                env={**os.environ, "HOME": str(env.chaos_dir / "home"), "HYBRID_OPERATOR_SCOPE": env.operator.scope},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            wait_until(functools.partial(_at_work, env.api, leftover, name), 30, 0.05)
            set_spec(env.api, "Bulk", name, {"count": count, "value": "b"})
            started = time.monotonic()
            env.operator.restart()
            overlap = _helm_overlap(env, name, [leftover.pid], 30)
            converged = wait_until(functools.partial(deployed, env.api, "Bulk", name, "b", count), CONVERGE)
            if leftover.poll() is not None and leftover.returncode < 0:
                stopped_by_sweep += 1
            with contextlib.suppress(Exception):
                leftover.kill()
            leftover.wait(timeout=10)
            row.tried(None if converged is None else time.monotonic() - started, lost=int(converged is None),
                      duplicated=int(overlap))
        row.notes = f"a helm upgrade left running when the operator starts: stopped by its sweep {stopped_by_sweep}"
    return row


# -- embedded cluster kill -9 during a burst of creates -----------------------------------------------


class _Burst:
    """Four writers creating 50 ConfigMaps each, retrying through a crash of the server."""

    def __init__(self, cluster: ClusterProcess, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.endpoint = Endpoint.of(cluster)
        self.acked: set[str] = set()
        self.done: set[str] = set()
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + 120

    def writer(self, index: int) -> None:
        names = [f"w{index}-{i}" for i in range(50)]
        position = 0
        path = f"/api/v1/namespaces/{self.namespace}/configmaps"
        while position < len(names) and time.monotonic() < self.deadline:
            try:
                with connection(self.endpoint) as conn:
                    while position < len(names):
                        body = {"metadata": {"name": names[position]}, "data": {"i": str(position)}}
                        status = raw_request(conn, self.endpoint, "POST", path, body)
                        with self.lock:
                            if status == 201:
                                self.acked.add(names[position])
                            if status in (201, 409):  # 409: committed, but the answer was lost in the crash
                                self.done.add(names[position])
                        position += 1
            except OSError:
                time.sleep(0.1)

    def run(self) -> tuple[float | None, int, int]:
        """(seconds from the restart to all 200 stored, acknowledged creates lost, objects stored twice)"""
        threads = [threading.Thread(target=self.writer, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        kill_at = random.randint(60, 140)
        wait_until(lambda: len(self.acked) >= kill_at, 60, 0.01)
        self.cluster.kill9()
        time.sleep(1.0)
        self.cluster.start()
        restarted = time.monotonic()
        for thread in threads:
            thread.join(timeout=max(1.0, self.deadline - time.monotonic()))
        converged = time.monotonic() - restarted if len(self.done) == 200 else None
        stored = self.cluster.api().items(f"/api/v1/namespaces/{self.namespace}/configmaps")
        names = [obj["metadata"]["name"] for obj in stored if obj["metadata"]["name"].startswith("w")]
        return converged, len(self.acked - set(names)), len(names) - len(set(names)) + max(0, len(names) - 200)


def cluster_kill_burst(ctx: Context) -> Row:
    row = Row("cluster kill -9 during a 200-create burst (4 writers)")
    cluster = ClusterProcess(ctx.workdir / "cluster-burst" / "cluster")
    cluster.start()
    acked = 0
    try:
        for attempt in range(1, ctx.tries(2, 1) + 1):
            namespace = f"burst{attempt}"
            cluster.api().send("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
            burst = _Burst(cluster, namespace)
            converged, lost, twice = burst.run()
            acked += len(burst.acked)
            row.tried(converged, lost=lost, duplicated=twice)
        row.notes = f"{acked} creates acknowledged, each read back after the restart"
    finally:
        cluster.stop()
    return row


# -- API unreachable ----------------------------------------------------------------------------------------


def api_outage(ctx: Context) -> Row:
    outage = 5.0 if ctx.quick else 30.0
    row = Row(f"API unreachable {outage:.0f} s while CRs are created and changed")
    with environment(ctx, "outage") as env:
        names = ["o1"] if ctx.quick else ["o1", "o2", "o3"]
        for name in names:
            env.api.send("POST", cr_path("Work"), cr("Work", name, {"seconds": 0.5, "value": "a"}, period="5s"))
        if wait_until(lambda: all(work_done(env.api, n, "a") for n in names), CONVERGE) is None:
            raise RuntimeError("the CRs never converged before the outage")
        wanted: dict[str, str] = {}
        stop = threading.Event()

        def writer() -> None:
            """Changes three CRs and creates a fourth, retrying each until the API acknowledges it."""
            todo = [("patch", n, "b") for n in names] + [("create", "o4", "b")]
            while todo and not stop.is_set():
                verb, name, value = todo[0]
                try:
                    if verb == "create":
                        env.api.send("POST", cr_path("Work"), cr("Work", name, {"seconds": 0.5, "value": value},
                                                                  period="5s"))
                    else:
                        set_spec(env.api, "Work", name, {"seconds": 0.5, "value": value})
                    wanted[name] = value
                    todo.pop(0)
                except Exception:
                    time.sleep(0.5)

        env.cluster.stop()
        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(outage)
        env.cluster.start()
        back = time.monotonic()
        thread.join(timeout=60)
        stop.set()
        writes = len(names) + 1  # a change of each CR, and one more CR
        converged = wait_until(
            lambda: len(wanted) == writes and all(work_done(env.api, n, v) for n, v in wanted.items()), CONVERGE)
        lost = writes - sum(1 for n, v in wanted.items() if work_done(env.api, n, v))
        said = [str(r.get("msg")) for r in env.operator.records() if str(r.get("logger", "")).startswith("hybrid")]
        errors = sum(1 for r in env.operator.records() if r.get("level") == "error")
        row.tried(None if converged is None else time.monotonic() - back, lost=lost, duplicated=env.overlaps())
        row.notes = (f"log: 'API server unreachable' x{said.count('API server unreachable')}, "
                     f"'reachable again' x{said.count('API server reachable again')}, "
                     f"'reconcile crashed' x{said.count('reconcile crashed')}, error lines: {errors}")
    return row


# -- conflict storm -------------------------------------------------------------------------------------------


def conflict_storm(ctx: Context) -> Row:
    seconds = 3.0 if ctx.quick else 15.0
    row = Row("conflict storm on one CR's status and spec (4 writers)")
    with environment(ctx, "conflicts") as env:
        env.api.send("POST", cr_path("Work"), cr("Work", "storm", {"seconds": 0.5, "value": "s0"}, period="1s"))
        if wait_until(lambda: work_done(env.api, "storm", "s0"), CONVERGE) is None:
            raise RuntimeError("the CR never converged before the storm")
        last: dict[str, Any] = {}
        vanished = [0]
        end = time.monotonic() + seconds

        def status_writer(key: str) -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                with contextlib.suppress(Exception):
                    env.api.merge(cr_path("Work", "storm", sub="status"), {"status": {key: n}})
                    last[key] = n

        def spec_writer() -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                with contextlib.suppress(Exception):
                    set_spec(env.api, "Work", "storm", {"value": f"s{n}"})
                    last["value"] = f"s{n}"
                time.sleep(0.3)

        def label_writer() -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                with contextlib.suppress(Exception):
                    env.api.merge(cr_path("Work", "storm"), {"metadata": {"labels": {"storm": str(n)}}})

        def observer() -> None:
            while time.monotonic() < end:
                with contextlib.suppress(Exception):
                    status = (env.api.get(cr_path("Work", "storm")) or {}).get("status") or {}
                    if not status.get("result"):
                        vanished[0] += 1
                time.sleep(0.05)

        threads = [threading.Thread(target=status_writer, args=("w1",)),
                   threading.Thread(target=status_writer, args=("w2",)),
                   threading.Thread(target=spec_writer), threading.Thread(target=label_writer),
                   threading.Thread(target=observer)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=seconds + 60)
        stopped = time.monotonic()
        converged = wait_until(lambda: work_done(env.api, "storm", str(last["value"])), CONVERGE)
        final = (env.api.get(cr_path("Work", "storm")) or {}).get("status") or {}
        reverted = sum(1 for key in ("w1", "w2") if final.get(key) != last.get(key))
        runs = len(env.operator.runs("storm"))
        row.tried(None if converged is None else time.monotonic() - stopped,
                  lost=vanished[0] + reverted + int(converged is None), duplicated=env.overlaps())
        row.notes = (f"{seconds:.0f} s; playbook status missing in {vanished[0]} reads; writers' status keys "
                     f"reverted: {reverted}; {runs} runs")
    return row


# -- event storm on dependents ---------------------------------------------------------------------------------


def _storm(api: Api, path: str, updates: int, seconds: float) -> None:
    started = time.monotonic()
    for n in range(updates):
        with contextlib.suppress(Exception):
            api.merge(path, {"metadata": {"annotations": {"chaos/noise": str(n)}}})
        pause = started + (n + 1) * seconds / updates - time.monotonic()
        if pause > 0:
            time.sleep(pause)


def _storm_try(env: Setup, name: str, child: str, check: Callable[[], bool], updates: int, seconds: float,
               period: float) -> tuple[float | None, bool, str]:
    """(convergence after the storm, whether the runs were unbounded, the figures)"""
    before = len(env.operator.runs(name))
    started = time.monotonic()
    _storm(env.api, f"/api/v1/namespaces/default/configmaps/{child}", updates, seconds)
    converged = wait_until(check, CONVERGE)
    time.sleep(2.0)
    during = len(env.operator.runs(name)) - before
    took = [float(r.get("duration") or 0) for r in env.operator.runs(name)[before:]]
    # one run at a time per object, each event while one runs coalesced into one more run
    bound = int((time.monotonic() - started) / max(0.05, min(took or [1.0]))) + 2
    time.sleep(3 * period)
    after = len(env.operator.runs(name)) - before - during
    unbounded = during > bound or after > 3 + 1  # three periods: three resyncs, one more for a run in flight
    figures = (f"{during} runs during the storm (bound {bound}), then {after} in {3 * period:g} s "
               f"(period {period:g} s)")
    return converged, unbounded, figures


def event_storm(ctx: Context) -> Row:
    updates, seconds, period = (20, 2.0, 2.0) if ctx.quick else (100, 10.0, 4.0)
    row = Row(f"event storm: {updates} child updates in {seconds:.0f} s "
              f"({'a Helm CR' if ctx.quick else 'an Ansible, a Helm CR'})")
    notes = []
    with environment(ctx, "event-storm") as env:
        if not ctx.quick:  # quick: Helm only (each Ansible run costs seconds of CPU)
            env.api.send("POST", cr_path("Work"), cr("Work", "ev", {"seconds": 0.5, "value": "e"},
                                                      period=f"{period:g}s"))
        env.api.send("POST", cr_path("Tiny"), cr("Tiny", "hv", {"value": "h"}, period=f"{period:g}s"))
        ansible = functools.partial(work_done, env.api, "ev", "e")
        helm = functools.partial(deployed, env.api, "Tiny", "hv", "h")
        if wait_until(lambda: (ctx.quick or ansible()) and helm(), CONVERGE) is None:
            raise RuntimeError("the CRs never converged before the storm")
        tries = [("Ansible", "ev", "ev-work", ansible)] if not ctx.quick else []
        for kind, name, child, check in [*tries, ("Helm", "hv", "hv-tiny", helm)]:
            time.sleep(1.0)
            converged, unbounded, figures = _storm_try(env, name, child, check, updates, seconds, period)
            row.tried(converged, lost=int(converged is None), duplicated=env.overlaps() + int(unbounded))
            notes.append(f"{kind}: {figures}")
    row.notes = "; ".join(notes)
    return row


# -- soak -------------------------------------------------------------------------------------------------------


def _events(api: Api) -> int:
    return len(api.items("/api/v1/events"))


def _artifacts(operator: OperatorProcess) -> tuple[int, int]:
    runs = [p for p in operator.artifacts.rglob("artifacts/*") if p.is_dir()]
    size = sum(f.stat().st_size for f in operator.artifacts.rglob("*") if f.is_file())
    return len(runs), size


def _sample(env: Setup) -> dict[str, float]:
    runs, size = _artifacts(env.operator)
    return {"rss": rss_mib(env.operator.pid), "fds": open_fds(env.operator.pid), "runs": runs,
            "bytes": size / 1024, "events": _events(env.api), "cluster": rss_mib(env.cluster.pid)}


def _unbounded(start: dict[str, float], end: dict[str, float], resources: int, kept_runs: int) -> list[str]:
    """What grew beyond its bound during the soak (growth by one per reconcile would show as hundreds).

    The bounds: Events at most 3 per resource (aggregated, not one per reconcile); the run directories
    ansible-runner keeps (``maxRunnerArtifacts`` 3 per Work resource, plus one run in progress); 16 more
    fds; 64 MiB more RSS for the operator, 128 MiB for the cluster (its watch history is bounded).
    """
    limits = {"events": 3.0 * resources, "runs": float(kept_runs), "fds": start["fds"] + 16,
              "rss": start["rss"] + 64, "cluster": start["cluster"] + 128}
    return [f"{key} {end[key]:.0f} > {limit:.0f}" for key, limit in limits.items() if end[key] > limit]


def soak(ctx: Context) -> Row:
    target, budget = (40, 60.0) if ctx.quick else (1000, 420.0)
    budget = ctx.soak_seconds or budget
    row = Row(f"soak: {target} reconciles")
    with environment(ctx, "soak", "watches.yaml", "--max-workers", "4", "--max-concurrent-reconciles", "4") as env:
        helm = [f"t{i}" for i in range(6 if ctx.quick else 12)]
        for name in helm:
            env.api.send("POST", cr_path("Tiny"), cr("Tiny", name, {"value": name}, period="1s"))
        works = [] if ctx.quick else ["a1", "a2"]  # quick: Helm only (each Ansible run costs seconds of CPU)
        for name in works:
            env.api.send("POST", cr_path("Work"), cr("Work", name, {"seconds": 0.5, "value": name}, period="2s"))
        ready = wait_until(lambda: all(deployed(env.api, "Tiny", n, n) for n in helm)
                           and all(work_done(env.api, n, n) for n in works), CONVERGE)
        if ready is None:
            raise RuntimeError("the soak's CRs never converged")
        start = _sample(env)
        counted = len(env.operator.runs())
        began = time.monotonic()
        wait_until(lambda: len(env.operator.runs()) - counted >= target, budget, 1.0)
        reconciles = len(env.operator.runs()) - counted
        elapsed = time.monotonic() - began
        end = _sample(env)
        healthy = all(deployed(env.api, "Tiny", n, n) for n in helm) and \
            all(work_done(env.api, n, n) for n in works)
        unbounded = _unbounded(start, end, resources=len(helm) + len(works),
                               kept_runs=len(works) * (3 + 1))
        row.tried(0.0 if healthy and reconciles >= target and not unbounded else None, lost=int(not healthy),
                  duplicated=env.overlaps())
        row.scenario = f"soak: {reconciles} reconciles in {elapsed:.0f} s"
        figures = ("operator RSS {rss0:.0f}->{rss1:.0f} MiB, fds {fds0:.0f}->{fds1:.0f}, artifact dirs "
                   "{runs0:.0f}->{runs1:.0f} ({kb0:.0f}->{kb1:.0f} KiB), Events {ev0:.0f}->{ev1:.0f}, cluster RSS "
                   "{c0:.0f}->{c1:.0f} MiB").format(
            rss0=start["rss"], rss1=end["rss"], fds0=start["fds"], fds1=end["fds"], runs0=start["runs"],
            runs1=end["runs"], kb0=start["bytes"], kb1=end["bytes"], ev0=start["events"], ev1=end["events"],
            c0=start["cluster"], c1=end["cluster"])
        row.notes = f"UNBOUNDED: {', '.join(unbounded)}; {figures}" if unbounded else f"{figures} (all within bounds)"
        if reconciles < target:
            row.notes = f"only {reconciles} of {target} reconciles within the {budget:.0f} s budget; {row.notes}"
    return row


# -- two operators, one release name ------------------------------------------------------------------------------


def _history(env: Setup, release: str) -> list[dict[str, Any]]:
    result = subprocess.run([HELM, "history", release, "-n", "default", "-o", "json", "--kubeconfig",
                             str(env.cluster.kubeconfig)], capture_output=True, text=True, check=False, timeout=60,
                            env={"HOME": str(env.chaos_dir / "home"), "PATH": "/usr/bin:/bin"})
    return list(json.loads(result.stdout)) if result.returncode == 0 else []


def _gone(api: Api, kind: str, name: str) -> bool:
    return api.get(cr_path(kind, name)) is None


def _one_deployed_one_refused(api: Api, name: str) -> bool:
    objects = [api.get(cr_path(kind, name)) for kind in ("Echo", "Twin")]
    return ({condition(obj, "Deployed") for obj in objects} >= {"True"}
            and {condition(obj, "Irreconcilable") for obj in objects} >= {"True"})


def _refused(api: Api, kind: str, name: str) -> bool:
    return condition(api.get(cr_path(kind, name)), "Irreconcilable") == "True"


def _same_name_try(env: Setup, name: str) -> tuple[float | None, int, int]:
    """(time to settle, releases lost, revisions made by the second kind or again)"""
    env.api.send("POST", cr_path("Twin"), cr("Twin", name, {"value": "t"}, period="1s"))
    env.api.send("POST", cr_path("Echo"), cr("Echo", name, {"value": "e"}, period="1s"))
    converged = wait_until(functools.partial(_one_deployed_one_refused, env.api, name), CONVERGE)
    time.sleep(5.0)  # several resyncs of both
    history = _history(env, name)
    charts = {str(r.get("chart", "")).rsplit("-", 1)[0] for r in history}
    winner = "Echo" if charts == {"echo"} else "Twin"
    loser = "Twin" if winner == "Echo" else "Echo"
    env.api.send("DELETE", cr_path(loser, name))
    wait_until(functools.partial(_gone, env.api, loser, name), 60)
    lost = int([r.get("status") for r in _history(env, name)][-1:] != ["deployed"])
    env.api.send("DELETE", cr_path(winner, name))
    wait_until(functools.partial(_gone, env.api, winner, name), 60)
    return converged, lost, max(0, len(charts) - 1) + max(0, len(history) - 1)


def _by_hand_try(env: Setup) -> tuple[float | None, int]:
    """(time until the CR is refused, releases lost: the hand-made one changed or uninstalled)"""
    subprocess.run([HELM, "install", "byhand", str(PROJECT / "charts" / "echo"), "-n", "default",
                    "--kubeconfig", str(env.cluster.kubeconfig)], capture_output=True, check=True,
                   timeout=120, env={"HOME": str(env.chaos_dir / "home"), "PATH": "/usr/bin:/bin"})
    env.api.send("POST", cr_path("Echo"), cr("Echo", "byhand", {"value": "mine"}, period="1s"))
    converged = wait_until(functools.partial(_refused, env.api, "Echo", "byhand"), CONVERGE)
    time.sleep(3.0)
    env.api.send("DELETE", cr_path("Echo", "byhand"))
    wait_until(functools.partial(_gone, env.api, "Echo", "byhand"), 60)
    kept = [r.get("revision") for r in _history(env, "byhand")] == [1]
    return converged, int(not kept)


def same_release_name(ctx: Context) -> Row:
    row = Row("two operators, two kinds, one release name (+ one made by hand)")
    with environment(ctx, "same-name", "watches-a.yaml") as env:
        other = OperatorProcess(env.cluster, PROJECT / "watches-b.yaml", env.chaos_dir / "operator-b", (),
                                {"CHAOS_DIR": str(env.chaos_dir)})
        other.start()
        try:
            if wait_until(other.started, 120) is None:
                raise RuntimeError("operator B did not start")
            for attempt in range(1, ctx.tries(3, 1) + 1):
                converged, lost, again = _same_name_try(env, f"dup{attempt}")
                row.tried(converged, lost=lost, duplicated=again)
            converged, lost = _by_hand_try(env)
            row.tried(converged, lost=lost, duplicated=lost)
        finally:
            other.stop()
    row.notes = ("both CRs made at once, by two operators: one release, never touched by the other kind; "
                 "the loser's deletion kept it; a release made by hand kept through its CR's deletion")
    return row


SCENARIOS: list[tuple[str, Callable[[Context], Row]]] = [
    ("kill-playbook", operator_kill_mid_playbook),
    ("kill-helm-install", lambda ctx: helm_kill(ctx, upgrade=False)),
    ("kill-helm-upgrade", lambda ctx: helm_kill(ctx, upgrade=True)),
    ("helm-left-running", helm_left_running),
    ("cluster-burst", cluster_kill_burst),
    ("api-outage", api_outage),
    ("conflict-storm", conflict_storm),
    ("event-storm", event_storm),
    ("soak", soak),
    ("same-release-name", same_release_name),
]
