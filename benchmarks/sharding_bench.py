"""Benchmark of sharded replicas (``make bench-sharding``).

Why it exists: ``--sharding`` is worth its complexity only if more replicas converge a burst of CRs
sooner and each replica receives only its share of the watch events. This script measures it the
way a user runs it: an embedded cluster (``hybrid-operator cluster``) and 1, 2, 3 ``hybrid-operator
run --sharding`` processes of one ring, ``--crs`` CRs of the ``Chore`` kind (tests/e2e/fixtures/
sharding), whose playbook waits ``--seconds`` on a ``sleep`` child process (waiting, not CPU),
created at once with one ``kubectl apply``. For each replica count it reports the time from the
apply until every CR is Successful, the runs per replica and the watch events received per
replica (``hybrid_operator_shard_watch_events_total``: list items and events before any
client-side filter), with ratios against 1 replica; once against a
server honouring ``shardSelector`` and once against one started with ``--no-sharded-list-watch``.

The table, the machine and its load average are written to ``--output`` (docs/sharding-bench.md).
Processes it starts are stopped at the end; everything runs on loopback in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "e2e" / "fixtures" / "sharding"
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    binary = BIN / "kubectl" if (BIN / "kubectl").exists() else Path("kubectl")
    done = subprocess.run([str(binary), "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True,
                          text=True, check=True, timeout=300)
    return done.stdout


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    log: Path

    def metrics_url(self) -> str:
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("msg") == "serving" and record.get("endpoint") == "metrics":
                    return "http://" + str(record["address"]).split(",")[0] + "/metrics"
        return ""

    def samples(self) -> dict[str, float]:
        """Metric name (with labels as rendered) -> value."""
        url = self.metrics_url()
        if not url:
            return {}
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                found[series] = float(value.replace("+Inf", "inf"))
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_cluster(workdir: Path, sharded: bool) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = workdir / "kubeconfig"
    command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(free_port()), "--in-memory",
               "--data-dir", str(workdir / "data"), "--kubeconfig", str(kubeconfig), "--no-simulated-node"]
    if not sharded:
        command.append("--no-sharded-list-watch")
    with (workdir / "cluster.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the cluster did not start: {(workdir / 'cluster.log').read_text()}")
        time.sleep(0.1)
    kubectl(kubeconfig, "apply", "-f", str(FIXTURES / "crds.yaml"))
    return process, kubeconfig


def start_replica(kubeconfig: Path, workdir: Path, ring: str, ns: str, name: str, concurrency: int) -> Replica:
    directory = workdir / ring / name
    directory.mkdir(parents=True)
    env = {**os.environ, "WATCH_NAMESPACE": ns, "POD_NAMESPACE": ns, "SHARD_REPLICA": name,
           "ANSIBLE_LOCAL_TEMP": str(directory / "ansible-tmp")}
    command = [sys.executable, "-m", "hybrid_operator.cli", "--log-format", "json", "run",
               "--watches-file", str(FIXTURES / "watches.yaml"), "--kubeconfig", str(kubeconfig),
               "--artifacts-dir", str(directory / "runner"), "--ansible-verbosity", "0",
               "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
               "--sharding", "--shard-ring", ring, "--max-concurrent-reconciles", str(concurrency)]
    log = directory / "operator.log"
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=FIXTURES)
    return Replica(process, log)


def wait(what: str, check: Any, timeout: float, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def successful(kubeconfig: Path, ns: str) -> int:
    listing = json.loads(kubectl(kubeconfig, "get", "chores", "-n", ns, "-o", "json"))
    count = 0
    for item in listing["items"]:
        for entry in (item.get("status") or {}).get("conditions") or []:
            if entry.get("type") == "Successful" and entry.get("status") == "True":
                count += 1
    return count


def owned_buckets(replica: Replica) -> float:
    try:
        return replica.samples().get("hybrid_operator_shard_buckets_owned", 0.0)
    except OSError:
        return 0.0


def measure(kubeconfig: Path, workdir: Path, mode: str, replicas: int, args: argparse.Namespace) -> dict[str, Any]:
    ns = f"bench-{mode}-{replicas}"
    kubectl(kubeconfig, "create", "namespace", ns)
    started = [start_replica(kubeconfig, workdir, ns, ns, f"r{i}", args.concurrency) for i in range(replicas)]
    try:
        wait("the ring to settle", lambda: sum(owned_buckets(r) for r in started) == 32
             and all(owned_buckets(r) > 0 for r in started), timeout=120)
        documents = [{"apiVersion": "shard.hybrid.dev/v1", "kind": "Chore",
                      "metadata": {"name": f"c{i}", "namespace": ns}, "spec": {"seconds": args.seconds}}
                     for i in range(args.crs)]
        begin = time.monotonic()
        kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
        wait("every CR to converge", lambda: successful(kubeconfig, ns) == args.crs, timeout=args.timeout,
             interval=2.0)
        seconds = time.monotonic() - begin
        runs, events = [], []
        for replica in started:
            samples = replica.samples()
            runs.append(int(sum(v for k, v in samples.items() if k.startswith("controller_runtime_reconcile_total{"))))
            events.append(int(samples.get('hybrid_operator_shard_watch_events_total{controller="Chore"}', 0)))
        return {"mode": mode, "replicas": replicas, "seconds": seconds, "runs": runs, "events": events}
    finally:
        for replica in started:
            replica.stop()


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| server | replicas | converge (s) | speed-up vs 1 | runs per replica | watch events per replica "
             "| events per replica vs 1 |", "|---|---|---|---|---|---|---|"]
    base = {r["mode"]: r for r in results if r["replicas"] == 1}
    for r in results:
        one = base.get(r["mode"]) or base.get("sharded")
        speed = one["seconds"] / r["seconds"] if one else float("nan")
        mean_events = sum(r["events"]) / len(r["events"])
        events_ratio = mean_events / one["events"][0] if one and one["events"][0] else float("nan")
        server = "honours shardSelector" if r["mode"] == "sharded" else "ignores it (client-side filter)"
        lines.append(f"| {server} | {r['replicas']} | {r['seconds']:.1f} | {speed:.2f}x | "
                     f"{' / '.join(str(x) for x in r['runs'])} | {' / '.join(str(x) for x in r['events'])} | "
                     f"{events_ratio:.2f} |")
    return "\n".join(lines)


def machine() -> str:
    load = os.getloadavg()
    return (f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=15, help="how long each run's playbook waits")
    parser.add_argument("--concurrency", type=int, default=8, help="--max-concurrent-reconciles per replica")
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--modes", default="sharded,ignored", help="sharded (server honours), ignored (it does not)")
    parser.add_argument("--ignored-replicas", default="2,3",
                        help="replica counts measured against the server that ignores shardSelector")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "sharding-bench.md")
    args = parser.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    # one replica asks for the whole space: the same against either server, so it is measured once
    ignored = [int(x) for x in args.ignored_replicas.split(",") if int(x) != 1 or "sharded" not in args.modes]
    before = machine()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sharding-") as scratch:
        for mode in args.modes.split(","):
            workdir = Path(scratch) / mode
            workdir.mkdir()
            cluster, kubeconfig = start_cluster(workdir, sharded=mode == "sharded")
            try:
                for count in counts if mode == "sharded" else ignored:
                    results.append(measure(kubeconfig, workdir, mode, count, args))
                    print(table(results).splitlines()[-1], flush=True)
                    write(args, results, before)
            finally:
                cluster.send_signal(signal.SIGTERM)
                cluster.wait(timeout=60)
    print(write(args, results, before))
    return 0


def write(args: argparse.Namespace, results: list[dict[str, Any]], before: str) -> str:
    """The report so far, written to ``--output`` (after every measurement: a long run leaves its part)."""
    text = (f"# `make bench-sharding`\n\n{args.crs} CRs of a kind whose playbook waits {args.seconds} s "
            "(a `sleep` child process, through a `pipe` lookup), "
            f"`--max-concurrent-reconciles {args.concurrency}` per replica, 32 hash buckets.\n\n"
            f"{table(results)}\n\nMachine at the start: {before}.  \nAt the last measurement: {machine()}.\n")
    args.output.write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
