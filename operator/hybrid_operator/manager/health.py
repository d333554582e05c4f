"""Liveness and readiness of the operator process: ``/healthz`` and ``/readyz``.

Why this module exists: a kubelet must restart an operator whose event loop is stuck and stop
routing to (or alert on) one whose watches are dead; kopf's own liveness endpoint only shows the
loop is alive.  Decisions:

* ``/healthz`` answers 200 whenever the event loop runs (the handler itself runs on it).
* ``/readyz`` answers 200 when kopf has started, the process is not shutting down, leader election
  (when on) can reach its Lease (a leader or a standby ready to take over), no background task
  (a dependent or related watch, the probes, the election) is down after a crash, and every watched kind is
  *fresh*: its last sign of life -- a watch event, or a successful ``LIST ?limit=1`` of the kind,
  which :func:`probe_watches` sends every few seconds -- is at most ``window`` seconds old and newer
  than its last failed probe.  kopf does not hand watch bookmarks to handlers, so an idle but healthy
  watch shows no events; the cheap LIST stands in for them.  A stalled stream is kopf's to re-open
  (``watching.inactivity_timeout`` in :mod:`hybrid_operator.handlers`).

Otherwise it answers 503 and lists what is wrong, one line per check (as kube-apiserver's
``/readyz?verbose`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiohttp import web

from hybrid_operator import errors, listeners
from hybrid_operator.config.model import Watch
from hybrid_operator.kube.client import ClusterClient

log = logging.getLogger(__name__)

PROBE_INTERVAL = 5.0
PROBE_TIMEOUT = 5.0
DEFAULT_WINDOW = 15.0


@dataclass
class _Signs:
    """Signs of life of one watched kind (monotonic times)."""

    alive: float | None = None
    failed: float | None = None
    error: str = "not listed yet"


@dataclass
class Readiness:
    """Everything ``/readyz`` looks at, updated by the operator as things happen."""

    controllers: Sequence[str]
    window: float = DEFAULT_WINDOW
    clock: Callable[[], float] = time.monotonic
    #: kopf's ready flag: startup done, watching begun
    started: bool = False
    stopping: bool = False
    #: leader election: True when this replica leads or can reach the Lease (None: no election)
    election: Callable[[], bool] | None = None
    #: sharding: True while this replica's Lease in the ring is renewed (None: no sharding)
    sharding: Callable[[], bool] | None = None
    _signs: dict[str, _Signs] = field(default_factory=dict)
    #: background tasks that reported: their error while down after a crash, "" once working again
    _tasks: dict[str, str] = field(default_factory=dict)

    def task_failed(self, name: str, error: str) -> None:
        """A background task crashed (it is restarted with a backoff)."""
        self._tasks[name] = error or "crashed"

    def task_ok(self, name: str) -> None:
        """A background task works (again)."""
        if name in self._tasks:
            self._tasks[name] = ""

    def _of(self, controller: str) -> _Signs:
        return self._signs.setdefault(controller, _Signs())

    def alive(self, controller: str) -> None:
        """A watch event arrived or a probe of the kind succeeded."""
        signs = self._of(controller)
        signs.alive, signs.error = self.clock(), ""

    def failed(self, controller: str, error: str) -> None:
        signs = self._of(controller)
        signs.failed, signs.error = self.clock(), error

    def fresh(self, controller: str) -> bool:
        signs = self._of(controller)
        if signs.alive is None or self.clock() - signs.alive > self.window:
            return False
        return signs.failed is None or signs.alive > signs.failed

    def checks(self) -> list[tuple[str, bool, str]]:
        """(check, passed, detail) for every check, in a stable order."""
        found = [("started", self.started, "" if self.started else "the watches are not started yet"),
                 ("shutdown", not self.stopping, "the operator is shutting down" if self.stopping else "")]
        if self.election is not None:
            ok = self.election()
            found.append(("leader-election", ok, "" if ok else "the leader election lease cannot be reached"))
        if self.sharding is not None:
            ok = self.sharding()
            found.append(("shard-ring", ok, "" if ok else "this replica's Lease in the shard ring is not renewed"))
        for controller in self.controllers:
            ok = self.fresh(controller)
            signs = self._of(controller)
            detail = "" if ok else signs.error or f"no sign of life for more than {self.window:g}s"
            found.append((f"watch-{controller}", ok, detail))
        for name, error in sorted(self._tasks.items()):
            found.append((f"task-{name}", not error, error))
        return found

    def ready(self) -> bool:
        return all(ok for _, ok, _ in self.checks())


def _report(checks: list[tuple[str, bool, str]]) -> str:
    lines = [f"[+]{name} ok" if ok else f"[-]{name} failed: {detail}" for name, ok, detail in checks]
    passed = all(ok for _, ok, _ in checks)
    return "\n".join([*lines, "readyz check passed" if passed else "readyz check failed"]) + "\n"


def health_app(readiness: Readiness) -> web.Application:
    """``GET /healthz`` (the event loop answers) and ``GET /readyz`` (see the module docstring)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        checks = readiness.checks()
        passed = all(ok for _, ok, _ in checks)
        return web.Response(status=200 if passed else 503, text=_report(checks))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def probe_watches(cluster: ClusterClient, targets: Sequence[tuple[str, Watch]], namespaces: Sequence[str],
                        readiness: Readiness, interval: float = PROBE_INTERVAL) -> None:
    """Every ``interval`` seconds, LIST each watched kind with ``limit=1``; runs until cancelled."""
    while True:
        for controller, watch in targets:
            gvk = watch.gvk
            try:
                ref = await asyncio.to_thread(cluster.resolve, gvk.group, gvk.version, gvk.kind)
                scope = namespaces[0] if ref.namespaced and namespaces else ""
                await asyncio.to_thread(cluster.probe, ref, scope, PROBE_TIMEOUT)
            except errors.TemporaryError as exc:
                if readiness.fresh(controller):
                    log.warning("watched kind not reachable", extra={"controller": controller, "error": str(exc)})
                readiness.failed(controller, str(exc))
            else:
                readiness.alive(controller)
        await asyncio.sleep(interval)


#: the bounds of the metrics, health and playbook-metrics endpoints: kube-apiserver's header deadline, a short
#: keep-alive (an idle scraper connection must not hold the shutdown up), and few connections (scrapers and probes)
ENDPOINT_LIMITS = listeners.ConnectionLimits(idle_timeout=2.0, max_connections=64)


async def serve(app: web.Application, address: str, what: str, flag: str = "",
                ssl_context: ssl.SSLContext | None = None) -> web.AppRunner | None:
    """Serve ``app`` on ``address`` (``host:port``, ``:port`` for every interface, ``0`` for not at all),
    over HTTPS with ``ssl_context``, with the connections bounded by :data:`ENDPOINT_LIMITS`.

    ``flag`` is the command-line flag that set ``address``: a refusal names it, with the way out.
    """
    host, port = parse_address(address)
    if port is None:
        return None
    runner = listeners.GuardedRunner(app, name=what, limits=ENDPOINT_LIMITS, access_log=None, shutdown_timeout=0.5,
                                     handle_signals=False)
    await runner.setup()
    try:
        await listeners.serve(runner, host or None, port, ssl_context=ssl_context)
    except OSError as exc:
        await runner.cleanup()
        hint = (f"; choose another {flag} (host:0 takes a free port, 0 turns it off) or stop what is using "
                f"{address}") if flag else ""
        raise errors.ConfigurationError(f"cannot serve {what} on {address}: {exc.strerror}{hint}") from exc
    bound = ",".join(f"{a[0]}:{a[1]}" for a in runner.addresses if isinstance(a, tuple))
    log.info("serving", extra={"endpoint": what, "address": bound, "scheme": "https" if ssl_context else "http"})
    return runner


async def stop(runner: web.AppRunner | None) -> None:
    if runner is not None:
        with contextlib.suppress(Exception):
            await runner.cleanup()


def parse_address(address: str) -> tuple[str, int | None]:
    """``":8080"`` -> ("", 8080); ``"127.0.0.1:0"`` -> ("127.0.0.1", 0) (any free port); ``"0"`` -> off."""
    text = address.strip()
    if text in ("0", ""):
        return "", None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise errors.ConfigurationError(f"bind address {address!r} is not host:port, :port or 0")
    return host.strip("[]"), int(port)
