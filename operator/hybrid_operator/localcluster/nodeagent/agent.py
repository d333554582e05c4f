"""The node agent: the simulated node as a plain API client of any API server, as kwok runs fake nodes.

One asyncio task set per agent: five caches (Pods everywhere, its Node, claims, volumes, classes) kept
by LIST and WATCH, whose changes queue syncs; a few workers that run them (:mod:`.pods`,
:mod:`.storage`, :mod:`.node`); the Lease renewal and the status heartbeat. It registers the Node and
ensures the default StorageClass before anything else, so a server it cannot use (unreachable, the
credentials refused, not allowed to register a Node) is reported at once; once running, failed writes
are retried and broken watches restarted.

:func:`serve` runs it until an event is set (the ``node`` command); :class:`AgentThread` runs it in a
thread of its own beside the real control plane's launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.nodeagent.client import ApiClient, ApiError
from hybrid_operator.localcluster.nodeagent.context import AgentContext
from hybrid_operator.localcluster.nodeagent.informer import Informer
from hybrid_operator.localcluster.nodeagent.kubeconfig import Endpoint
from hybrid_operator.localcluster.nodeagent.node import NodeKeeper
from hybrid_operator.localcluster.nodeagent.pods import PodRunner
from hybrid_operator.localcluster.nodeagent.storage import Provisioner
from hybrid_operator.localcluster.nodeagent.workqueue import Key, WorkQueue
from hybrid_operator.localcluster.simnode.node import NODE_NAME

log = logging.getLogger(__name__)

USER_AGENT = "hybrid-operator-node/v1"
WORKERS = 4
STOP_SECONDS = 10.0
Obj = dict[str, Any]


class AgentError(Exception):
    """The agent cannot serve this API server; the message says why and what to do."""


def _start_error(server: str, failed: ApiError) -> AgentError:
    if failed.status == 0:
        return AgentError(f"cannot reach the API server {server}: {failed.message}")
    if failed.status == 401:
        return AgentError(f"the API server {server} refused the kubeconfig's credentials (401 Unauthorized)")
    if failed.status == 403:
        return AgentError(f"the API server {server} does not let this user register a Node ({failed.message}): "
                          "the node agent needs to manage Nodes, Leases, Pods, PersistentVolumes and "
                          "StorageClasses (a cluster-admin kubeconfig)")
    return AgentError(f"the API server {server} refused the node agent: {failed}")


class NodeAgent:
    """The simulated node, its scheduler, its kubelet and its provisioner, over HTTP."""

    def __init__(self, client: ApiClient) -> None:
        self.queue = WorkQueue()
        self.context = AgentContext(
            client=client, queue=self.queue,
            pods=Informer(client, "/api/v1/pods", self._pod_changed),
            nodes=Informer(client, "/api/v1/nodes", self._node_changed,
                           {"fieldSelector": f"metadata.name={NODE_NAME}"}),
            claims=Informer(client, "/api/v1/persistentvolumeclaims", self._claim_changed),
            volumes=Informer(client, "/api/v1/persistentvolumes", self._volume_changed),
            classes=Informer(client, "/apis/storage.k8s.io/v1/storageclasses", lambda *_: None))
        self.node = NodeKeeper(self.context)
        self.storage = Provisioner(self.context)
        self.pods = PodRunner(self.context, self.storage)
        self.ready = asyncio.Event()

    # -- reactions to the caches ---------------------------------------------------------------

    def _pod_changed(self, kind: str, pod: Obj, _old: Obj | None) -> None:
        if kind == "DELETED":
            self.pods.gone(pod)
            return
        self.pods.seen(pod)
        self.queue.add(("pod", objects.namespace(pod), objects.name(pod)))

    def _node_changed(self, kind: str, node: Obj, old: Obj | None) -> None:
        self.queue.add(("node", "", NODE_NAME))
        if kind != "DELETED" and (old is None or objects.labels(old) != objects.labels(node)):
            for pod in self.pods.unscheduled():  # the labels a nodeSelector reads changed
                self.queue.add(("pod", objects.namespace(pod), objects.name(pod)))

    def _claim_changed(self, _kind: str, claim: Obj, _old: Obj | None) -> None:
        self.queue.add(("claim", objects.namespace(claim), objects.name(claim)))
        for pod in self.storage.pods_using(claim):
            self.queue.add(("pod", objects.namespace(pod), objects.name(pod)))

    def _volume_changed(self, _kind: str, volume: Obj, _old: Obj | None) -> None:
        self.queue.add(("volume", "", objects.name(volume)))

    # -- running -------------------------------------------------------------------------------

    async def _sync(self, key: Key) -> None:
        kind, namespace, name = key
        if kind == "pod":
            await self.pods.sync(namespace, name)
        elif kind == "finish":
            await self.pods.finish(namespace, name)
        elif kind == "claim":
            await self.storage.sync_claim(namespace, name)
        elif kind == "volume":
            await self.storage.sync_volume(name)
        elif kind == "node":
            await self.node.sync()

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            failed = False
            try:
                await self._sync(key)
            except ApiError as refused:
                failed = True
                log.info("node agent sync retried", extra={"key": "/".join(key), "error": str(refused)})
            except Exception:  # a bug must not stop the node: logged, retried
                failed = True
                log.exception("node agent sync failed", extra={"key": "/".join(key)})
            self.queue.done(key, failed)

    async def run(self) -> None:
        """Register the Node, then keep it, its Pods and its volumes until cancelled."""
        server = self.context.client.endpoint.server
        try:
            await self.node.register()
            await self.storage.ensure_class()
        except ApiError as failed:
            raise _start_error(server, failed) from failed
        caches = [self.context.pods, self.context.nodes, self.context.claims, self.context.volumes,
                  self.context.classes]
        async with asyncio.TaskGroup() as tasks:
            for cache in caches:
                tasks.create_task(cache.run())
            for cache in caches:  # every Pod's IP noted, every claim and class known, before any sync
                await cache.synced.wait()
            for _ in range(WORKERS):
                tasks.create_task(self._work())
            tasks.create_task(self.node.keep_lease())
            tasks.create_task(self.node.heartbeat())
            log.info("node agent serving", extra={"node": NODE_NAME, "server": server})
            self.ready.set()


async def serve(endpoint: Endpoint, stop: asyncio.Event, on_ready: Callable[[], None] = lambda: None) -> None:
    """Run a node agent against ``endpoint`` until ``stop`` is set; :class:`AgentError` when it cannot serve."""
    async with ApiClient(endpoint, USER_AGENT) as client:
        agent = NodeAgent(client)
        running = asyncio.create_task(agent.run())
        ready = asyncio.create_task(agent.ready.wait())
        stopping = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({running, ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if ready in done and stopping not in done:
            on_ready()
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (running, ready, stopping):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running  # its error, when it ended on its own
        log.info("node agent stopped", extra={"node": NODE_NAME})


class AgentThread:
    """A node agent in a thread of its own (beside the real control plane's launcher, which is not asyncio)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="hybrid-node-agent", daemon=True)

    def start(self, timeout: float) -> None:
        """Start it and wait until it serves; :class:`AgentError` when it could not start."""
        self._thread.start()
        if not self._started.wait(timeout) and self.error is None:
            raise AgentError(f"the node agent did not register the Node within {timeout:.0f} s")
        if self.error is not None:
            raise AgentError(str(self.error))

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as failed:  # reported to the launcher's thread, which raises it
            self.error = failed
        finally:
            self._started.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await serve(self.endpoint, self._stop, self._started.set)

    def failed(self) -> str | None:
        """Why the agent ended on its own, or None while it runs (or after a requested stop)."""
        if self._thread.is_alive() or (self._stop is not None and self._stop.is_set()):
            return None
        return str(self.error or "the node agent stopped")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            log.info("node agent stopping", extra={"node": NODE_NAME})
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(STOP_SECONDS)
