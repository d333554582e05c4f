"""Benchmark of the embedded API server (``make bench-cluster``).

Why it exists: the embedded server replaces a real cluster for development
and tests, so it must stay fast enough that nobody notices it.  This script
measures it the way a user runs it -- ``python -m hybrid_operator.cli cluster``
as a subprocess on a free loopback port with a temporary data dir -- and talks
to it over HTTPS with the token and CA from the kubeconfig it writes:

* ConfigMap creates/s from one client (sequential POSTs on one keep-alive
  connection) and from 8 concurrent clients (one keep-alive connection each);
* LIST latency (median, full JSON list of ConfigMaps in one namespace) at
  1,000 and 10,000 objects;
* watch delivery latency p50/p99 with 50 watchers on the ConfigMaps
  collection: each write is a merge patch whose data carries the writer's
  monotonic clock at send time; each watcher subtracts it on arrival.  The
  next write starts once all watchers got the previous one, so the numbers
  are fan-out latency, not client backlog;
* server RSS (``VmRSS``) empty and with 10,000 objects stored;
* startup time (process start -> kubeconfig written -> first successful GET)
  on an empty data dir and on one holding 10,000 objects.

Baselines, measured in the same run so the ratios share the machine's load:

* a naive server: this same script started with ``--naive-server`` as a
  separate process, a minimal aiohttp HTTPS app on the same certificate that
  checks the bearer token and keeps ConfigMaps in a dict (no validation, no
  durability, no resourceVersion semantics, no watch).  The same client code
  drives both servers, so the ratio is what the API semantics, managedFields
  and SQLite persistence cost on top of bare aiohttp + TLS + JSON;
* SQLite inserts with one commit per row, in this process, with the store's
  pragmas (WAL, synchronous=NORMAL) and a stored object body as the row: the
  storage floor of one durable write, without any HTTP.

Counts and time are bounded (``--quick`` shrinks them for CI smoke runs), it
uses loopback only, and it stops the processes it started.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import os
import platform
import re
import signal
import socket
import sqlite3
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
PAYLOAD = "x" * 200
MERGE_PATCH = "application/merge-patch+json"
PHASE_TIMEOUT = 240.0
OVERALL_TIMEOUT = 600.0
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Sizes:
    """How much work one run does."""

    sequential: int  # objects created by one client; also the small LIST size
    total: int  # objects after the concurrent phase; also the large LIST size
    clients: int
    list_runs: int
    watchers: int
    watch_writes: int


FULL = Sizes(sequential=1000, total=10000, clients=8, list_runs=5, watchers=50, watch_writes=200)
QUICK = Sizes(sequential=100, total=500, clients=8, list_runs=3, watchers=10, watch_writes=10)


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens and how to authenticate to it."""

    url: str
    token: str
    ssl: ssl.SSLContext


@dataclass
class Row:
    """One line of the result table."""

    metric: str
    value: float
    baseline: float | None = None
    unit_digits: int = 1


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)

    def add(self, metric: str, value: float, baseline: float | None = None, digits: int = 1) -> None:
        self.rows.append(Row(metric, value, baseline, digits))


# -- processes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def read_kubeconfig(path: Path) -> tuple[str, str, str]:
    """Server URL, token and CA (base64) of the kubeconfig the server writes (plain YAML scalars)."""
    text = path.read_text()
    found: dict[str, str] = {}
    for key in ("server", "token", "certificate-authority-data"):
        match = re.search(rf"^\s*{key}:\s*(\S+)\s*$", text, re.MULTILINE)
        if match is None:
            raise RuntimeError(f"kubeconfig {path} has no {key}")
        found[key] = match.group(1).strip("'\"")
    return found["server"], found["token"], found["certificate-authority-data"]


def client_context(ca_base64: str) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=base64.b64decode(ca_base64).decode())


class HybridServer:
    """``hybrid-operator cluster`` as a subprocess on a temporary data dir."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.kubeconfig = workdir / "kubeconfig"
        self.log = workdir / "cluster.log"
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self) -> float:
        """Start the server; returns the monotonic start time."""
        if self.kubeconfig.exists():
            self.kubeconfig.unlink()
        command = [sys.executable, "-m", "hybrid_operator.cli", "cluster", "--port", str(free_port()),
                   "--data-dir", str(self.data_dir), "--kubeconfig", str(self.kubeconfig)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "operator"), env.get("PYTHONPATH")]))
        started = time.monotonic()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                            env=env)
        return started

    async def wait_kubeconfig(self) -> Endpoint:
        deadline = time.monotonic() + START_TIMEOUT
        while not self.kubeconfig.exists():
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"cluster exited with {self.process.returncode}:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster did not start within {START_TIMEOUT}s:\n{self.log.read_text()}")
            await asyncio.sleep(0.002)
        url, token, ca = read_kubeconfig(self.kubeconfig)
        return Endpoint(url, token, client_context(ca))

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


class NaiveServer:
    """The baseline: this script's ``--naive-server`` mode as a subprocess."""

    def __init__(self, cert: Path, key: Path, token: str, ca: ssl.SSLContext) -> None:
        self.cert, self.key, self.token, self.ca = cert, key, token, ca
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Endpoint:
        command = [sys.executable, str(Path(__file__).resolve()), "--naive-server", "--cert", str(self.cert),
                   "--key", str(self.key), "--token", self.token]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line.isdigit():
            raise RuntimeError(f"naive server did not start (said {line!r})")
        return Endpoint(f"https://127.0.0.1:{line}", self.token, self.ca)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None


# -- the naive baseline server --------------------------------------------------------------


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def naive_app(token: str) -> web.Application:
    """ConfigMaps in a dict behind a bearer-token check: the least an HTTP JSON store does."""
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    counter = [0]
    expected = f"Bearer {token}"

    def authorized(request: web.Request) -> bool:
        return request.headers.get("Authorization") == expected

    async def create(request: web.Request) -> web.Response:
        if not authorized(request):
            return web.Response(status=401)
        obj = json.loads(await request.read())
        namespace = request.match_info["namespace"]
        counter[0] += 1
        obj["metadata"].update(namespace=namespace, resourceVersion=str(counter[0]))
        objects.setdefault(namespace, {})[obj["metadata"]["name"]] = obj
        return web.Response(body=_dumps(obj), status=201, content_type="application/json")

    async def list_objects(request: web.Request) -> web.Response:
        if not authorized(request):
            return web.Response(status=401)
        stored = objects.get(request.match_info["namespace"], {})
        names = sorted(stored)
        limit = int(request.query.get("limit", "0") or "0")
        if limit:
            names = names[:limit]
        body = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": str(counter[0])},
                "items": [stored[name] for name in names]}
        return web.Response(body=_dumps(body), content_type="application/json")

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/api/v1/namespaces/{namespace}/configmaps", create)
    app.router.add_get("/api/v1/namespaces/{namespace}/configmaps", list_objects)
    return app


async def serve_naive(cert: Path, key: Path, token: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(naive_app(token), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    print(sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


# -- client measurements ---------------------------------------------------------------------


def session(endpoint: Endpoint, connections: int = 1) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, ssl=endpoint.ssl)
    return aiohttp.ClientSession(base_url=endpoint.url, connector=connector,
                                 headers={"Authorization": f"Bearer {endpoint.token}"},
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))


def configmap(index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{index:06d}", "labels": {"app": "bench"}},
            "data": {"index": str(index), "sent": str(time.monotonic_ns()), "payload": PAYLOAD}}


async def expect(response: aiohttp.ClientResponse, status: int) -> bytes:
    body = await response.read()
    if response.status != status:
        raise RuntimeError(f"{response.method} {response.url} answered {response.status}: {body[:500]!r}")
    return body


async def warm_up(client: aiohttp.ClientSession) -> None:
    """Open the keep-alive connection (TLS handshake) outside the timed part."""
    async with client.get(CONFIGMAPS, params={"limit": "1"}) as response:
        await expect(response, 200)


async def create_range(client: aiohttp.ClientSession, indexes: range) -> dict[str, Any]:
    last: dict[str, Any] = {}
    for index in indexes:
        async with client.post(CONFIGMAPS, data=_dumps(configmap(index)),
                               headers={"Content-Type": "application/json"}) as response:
            last = json.loads(await expect(response, 201))
    return last


def split(start: int, stop: int, parts: int) -> list[range]:
    size = math.ceil((stop - start) / parts)
    return [range(low, min(low + size, stop)) for low in range(start, stop, size)]


async def measure_creates(endpoint: Endpoint, start: int, stop: int, clients: int) -> tuple[float, dict[str, Any]]:
    """Creates/s of ``clients`` keep-alive connections creating objects ``start``..``stop``."""
    sessions = [session(endpoint) for _ in range(clients)]
    try:
        await asyncio.gather(*(warm_up(client) for client in sessions))
        began = time.perf_counter()
        outcomes = await asyncio.gather(*(create_range(client, part)
                                          for client, part in zip(sessions, split(start, stop, clients),
                                                                  strict=False)))
        elapsed = time.perf_counter() - began
    finally:
        await asyncio.gather(*(client.close() for client in sessions))
    return (stop - start) / elapsed, outcomes[-1]


async def measure_list(endpoint: Endpoint, runs: int, expected: int) -> float:
    """Median ms of a full LIST (until its last byte arrived; client-side parsing not counted)."""
    async with session(endpoint) as client:
        await warm_up(client)
        timings: list[float] = []
        body = b""
        for _ in range(runs):
            began = time.perf_counter()
            async with client.get(CONFIGMAPS) as response:
                body = await expect(response, 200)
            timings.append((time.perf_counter() - began) * 1000)
        # every namespace of a cluster also holds its kube-root-ca.crt ConfigMap (the naive server's does not)
        count = sum(1 for item in json.loads(body)["items"] if item["metadata"]["name"] != "kube-root-ca.crt")
        if count != expected:
            raise RuntimeError(f"LIST returned {count} items, expected {expected}")
        return statistics.median(timings)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


class Deliveries:
    """Latencies of marked events, and a wait until every watcher saw a mark."""

    def __init__(self, watchers: int) -> None:
        self.watchers = watchers
        self.latencies: list[float] = []
        self._pending: dict[str, int] = {}
        self._done: dict[str, asyncio.Event] = {}

    def expect(self, mark: str) -> asyncio.Event:
        self._pending[mark] = self.watchers
        self._done[mark] = asyncio.Event()
        return self._done[mark]

    def arrived(self, mark: str, sent_ns: int) -> None:
        self.latencies.append((time.monotonic_ns() - sent_ns) / 1e6)
        if mark in self._pending:
            self._pending[mark] -= 1
            if self._pending[mark] == 0:
                self._done[mark].set()


async def watch(client: aiohttp.ClientSession, rv: str, ready: asyncio.Event, deliveries: Deliveries) -> None:
    params = {"watch": "1", "resourceVersion": rv}
    async with client.get(CONFIGMAPS, params=params) as response:
        if response.status != 200:
            raise RuntimeError(f"watch answered {response.status}")
        ready.set()
        async for line in response.content:
            event = json.loads(line)
            data = event["object"].get("data") or {}
            if event["type"] == "MODIFIED" and "mark" in data:
                deliveries.arrived(data["mark"], int(data["sent"]))


async def current_rv(client: aiohttp.ClientSession) -> str:
    async with client.get(CONFIGMAPS, params={"limit": "1"}) as response:
        return str(json.loads(await expect(response, 200))["metadata"]["resourceVersion"])


async def measure_watch(endpoint: Endpoint, watchers: int, writes: int, objects: int) -> list[float]:
    """Delivery latencies (ms) of ``writes`` merge patches to every one of ``watchers`` watchers."""
    deliveries = Deliveries(watchers)
    async with session(endpoint, connections=watchers) as watch_client, session(endpoint) as writer:
        rv = await current_rv(writer)
        readies = [asyncio.Event() for _ in range(watchers)]
        tasks = [asyncio.create_task(watch(watch_client, rv, ready, deliveries)) for ready in readies]
        try:
            await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 60)
            for number in range(writes):
                mark = f"w{number}"
                done = deliveries.expect(mark)
                patch = {"data": {"mark": mark, "sent": str(time.monotonic_ns())}}
                name = f"cm-{number * 7919 % objects:06d}"
                async with writer.patch(f"{CONFIGMAPS}/{name}", data=_dumps(patch),
                                        headers={"Content-Type": MERGE_PATCH}) as response:
                    await expect(response, 200)
                await asyncio.wait_for(done.wait(), 30)
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result
    return deliveries.latencies


async def measure_startup(server: HybridServer) -> tuple[float, float, Endpoint]:
    """Ms from process start to kubeconfig written, and to the first answered GET."""
    started = server.spawn()
    endpoint = await server.wait_kubeconfig()
    to_kubeconfig = time.monotonic() - started
    deadline = time.monotonic() + START_TIMEOUT
    async with session(endpoint) as client:
        while True:
            try:
                await warm_up(client)
                break
            except (aiohttp.ClientConnectionError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.002)
    to_first_get = time.monotonic() - started
    return to_kubeconfig * 1000, to_first_get * 1000, endpoint


async def create_namespace(endpoint: Endpoint) -> None:
    async with session(endpoint) as client:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        async with client.post("/api/v1/namespaces", data=_dumps(body),
                               headers={"Content-Type": "application/json"}) as response:
            await expect(response, 201)


def sqlite_inserts_per_second(path: Path, stored: dict[str, Any], rows: int) -> float:
    """Rows/s of naive inserts, one transaction per row, with the store's pragmas."""
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE objects (skey TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, "
                   "rv INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (skey, namespace, name))")
        began = time.perf_counter()
        for index in range(rows):
            stored["metadata"]["name"] = f"cm-{index:06d}"
            db.execute("BEGIN")
            db.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                       ("/configmaps", NAMESPACE, f"cm-{index:06d}", index, json.dumps(stored)))
            db.execute("COMMIT")
        return rows / (time.perf_counter() - began)
    finally:
        db.close()


# -- phases ------------------------------------------------------------------------------


@dataclass
class Measured:
    """What one server achieved in the shared create/LIST phases."""

    sequential_rate: float = 0.0
    concurrent_rate: float = 0.0
    list_small_ms: float = 0.0
    list_large_ms: float = 0.0
    rss_full: float = 0.0
    stored: dict[str, Any] = field(default_factory=dict)


async def timed(label: str, step: Awaitable[Any]) -> Any:
    began = time.monotonic()
    result = await asyncio.wait_for(step, PHASE_TIMEOUT)
    print(f"  {label}: {time.monotonic() - began:.1f}s", file=sys.stderr, flush=True)
    return result


async def create_and_list(endpoint: Endpoint, sizes: Sizes, pid: int) -> Measured:
    measured = Measured()
    measured.sequential_rate, measured.stored = await timed(
        f"{sizes.sequential} sequential creates", measure_creates(endpoint, 0, sizes.sequential, 1))
    measured.list_small_ms = await timed(
        f"LIST {sizes.sequential}", measure_list(endpoint, sizes.list_runs, sizes.sequential))
    measured.concurrent_rate, _ = await timed(
        f"{sizes.total - sizes.sequential} creates from {sizes.clients} clients",
        measure_creates(endpoint, sizes.sequential, sizes.total, sizes.clients))
    measured.list_large_ms = await timed(
        f"LIST {sizes.total}", measure_list(endpoint, sizes.list_runs, sizes.total))
    measured.rss_full = rss_mib(pid)
    return measured


async def run(sizes: Sizes, workdir: Path) -> Results:
    results = Results()
    server = HybridServer(workdir)
    try:
        empty_kubeconfig_ms, empty_get_ms, endpoint = await timed("startup (empty)", measure_startup(server))
        rss_empty = rss_mib(server.pid)
        await create_namespace(endpoint)
        ours = await create_and_list(endpoint, sizes, server.pid)
        latencies = await timed(f"watch: {sizes.watchers} watchers x {sizes.watch_writes} writes",
                                measure_watch(endpoint, sizes.watchers, sizes.watch_writes, sizes.total))
        server.stop()
        full_kubeconfig_ms, full_get_ms, _ = await timed(f"startup ({sizes.total})", measure_startup(server))
    finally:
        server.stop()

    naive = NaiveServer(server.data_dir / "server.crt", server.data_dir / "server.key", endpoint.token,
                        endpoint.ssl)
    try:
        naive_endpoint = naive.start()
        theirs = await create_and_list(naive_endpoint, sizes, naive.pid)
    finally:
        naive.stop()
    sqlite_rate = sqlite_inserts_per_second(workdir / "naive.db", dict(ours.stored), sizes.sequential)

    seq, total = f"{sizes.sequential:,}", f"{sizes.total:,}"
    results.add("creates/s, 1 client (sequential, keep-alive HTTPS)", ours.sequential_rate,
                theirs.sequential_rate)
    results.add(f"creates/s, {sizes.clients} concurrent clients", ours.concurrent_rate, theirs.concurrent_rate)
    results.add("creates/s, 1 client vs SQLite insert+commit per row", ours.sequential_rate, sqlite_rate)
    results.add(f"LIST latency, {seq} objects (ms, median of {sizes.list_runs})", ours.list_small_ms,
                theirs.list_small_ms)
    results.add(f"LIST latency, {total} objects (ms, median of {sizes.list_runs})", ours.list_large_ms,
                theirs.list_large_ms)
    results.add(f"watch delivery p50 (ms, {sizes.watchers} watchers)", percentile(latencies, 50), digits=2)
    results.add(f"watch delivery p99 (ms, {sizes.watchers} watchers)", percentile(latencies, 99), digits=2)
    results.add("server RSS, empty (MiB)", rss_empty)
    results.add(f"server RSS, {total} objects (MiB)", ours.rss_full, theirs.rss_full)
    results.add("startup to kubeconfig, empty data dir (ms)", empty_kubeconfig_ms, digits=0)
    results.add("startup to first GET, empty data dir (ms)", empty_get_ms, digits=0)
    results.add(f"startup to kubeconfig, {total} objects (ms)", full_kubeconfig_ms, digits=0)
    results.add(f"startup to first GET, {total} objects (ms)", full_get_ms, digits=0)
    return results


# -- report --------------------------------------------------------------------------------


def machine_facts() -> list[str]:
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    return [
        f"- nproc: {os.cpu_count()} (usable: {len(os.sched_getaffinity(0))})",
        f"- Python: {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"- aiohttp {aiohttp.__version__}, SQLite {sqlite3.sqlite_version}",
        f"- load average at start: {load}",
    ]


def number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def table(results: Results) -> list[str]:
    lines = ["| metric | hybrid-operator | baseline | ratio |", "|---|---:|---:|---:|"]
    for row in results.rows:
        baseline = number(row.baseline, row.unit_digits) if row.baseline is not None else "-"
        ratio = f"{row.value / row.baseline:.2f}" if row.baseline else "-"
        lines.append(f"| {row.metric} | {number(row.value, row.unit_digits)} | {baseline} | {ratio} |")
    return lines


FOOTER = """\
Baselines (same run, same client code, same machine load):
- "baseline" in the create/LIST/RSS rows is a naive server: a minimal aiohttp HTTPS app in its own
  process, on the same certificate, checking the same bearer token, keeping ConfigMaps in a dict
  (no validation, persistence, managedFields or watch). It is the ceiling for a Python aiohttp server.
- the "vs SQLite" row compares sequential HTTPS creates with direct SQLite inserts of a stored
  ConfigMap body, one commit per row, WAL + synchronous=NORMAL like the store (no HTTP at all).
- ratio = hybrid-operator / baseline: below 1 is slower for rates, above 1 is slower for latencies/memory.
Notes: the client runs on the same cores as the server; creates/s of 8 clients is measured while the
store grows from the small to the large LIST size; LIST times run until the last byte of the full JSON
list arrived; watch latency is from the writer sending a merge patch (its clock embedded in the data)
to each watcher parsing the event, one write in flight at a time; startup is process start ->
kubeconfig written -> first answered GET ...?limit=1 (TLS handshake included)."""


def report(results: Results, sizes: Sizes, quick: bool, elapsed: float, facts: list[str]) -> str:
    mode = "quick" if quick else "full"
    lines = [f"## Embedded API server benchmark ({mode} mode)", "", *facts, "", *table(results), "",
             FOOTER, "", f"Total benchmark time: {elapsed:.1f}s"]
    return "\n".join(lines)


async def main_async(quick: bool) -> int:
    sizes = QUICK if quick else FULL
    facts = machine_facts()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as temp:
        results = await asyncio.wait_for(run(sizes, Path(temp)), OVERALL_TIMEOUT)
    print(report(results, sizes, quick, time.monotonic() - began, facts), flush=True)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for a CI smoke run")
    parser.add_argument("--naive-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cert", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--key", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.naive_server:
        asyncio.run(serve_naive(args.cert, args.key, args.token))
        return 0
    return asyncio.run(main_async(args.quick))


if __name__ == "__main__":
    sys.exit(main())
