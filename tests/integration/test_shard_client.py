"""The operator's sharded follower (kube.informer with a ShardRequest) against the three server behaviours.

KEP-5866 servers filter and echo the selector (built-in kinds), filter without echoing it (custom
resources on kube-apiserver v1.36), or ignore it (the gate off, or an older server). For each, the
follower must find out which, without trusting ``shardInfo`` alone, and hand its handler exactly the
objects of its slice when the server filtered, or everything (to be filtered by the sharded primaries)
when it did not; a selector the server refuses must stop it with a configuration error, not a retry
loop. Servers: the embedded cluster with the ``ShardedListAndWatch`` behaviour and without it
(``--no-sharded-list-watch``), and the real control plane (`make kube`; skipped without the build).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.kube import informer
from hybrid_operator.kube.client import ClusterClient, ResourceRef
from hybrid_operator.manager.sharding import ring
from support.cluster import Cluster, open_crd, raw_request
from support.realplane import RealCluster, missing_build

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GROUP = "client.hybrid.dev"
CRD = open_crd(GROUP, "Gadget")
KINDS = {"ConfigMap": ("", "v1", "ConfigMap"), "Gadget": (GROUP, "v1", "Gadget")}
NS = "shard-client"
HELD = frozenset(range(16))  # the lower half of the hash space
COUNT = 12
SERVERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("embedded-gate-off", id="embedded-gate-off"),
    pytest.param("real", id="real", marks=[pytest.mark.kube, pytest.mark.skipif(
        missing_build() is not None, reason=missing_build() or "")]),
]


def path(kind: str, namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" if kind == "ConfigMap" else \
        f"/apis/{GROUP}/v1/namespaces/{namespace}/gadgets"


def create(server: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if kind == "Gadget":
        body.update(apiVersion=f"{GROUP}/v1", kind="Gadget")
    answer = raw_request(server, "POST", path(kind, namespace), body)
    assert answer.status == 201, answer.body
    created: dict[str, Any] = answer.json()
    return created


def inside(obj: dict[str, Any]) -> bool:
    return ring.bucket_of(ring.key_value(obj, "uid")) in HELD


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    kind = str(request.param)
    directory = tmp_path_factory.mktemp(kind)
    flags = ("--no-controllers", *(("--no-sharded-list-watch",) if kind.endswith("gate-off") else ()))
    instance = RealCluster(directory, flags) if kind == "real" else Cluster(directory, extra_args=flags)
    instance.start()
    try:
        assert raw_request(instance, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           CRD).status == 201
        deadline = time.monotonic() + 60
        while raw_request(instance, "GET", f"/apis/{GROUP}/v1/gadgets").status != 200:
            assert time.monotonic() < deadline, "the CRD was not served within 60 s"
            time.sleep(0.2)
        assert raw_request(instance, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}}).status == 201
        for kind_name in KINDS:
            for index in range(COUNT):
                create(instance, kind_name, NS, f"listed-{index}")
        yield instance
    finally:
        instance.stop()


def filters(server: Cluster) -> bool:
    return server.extra_args[-1] != "--no-sharded-list-watch"


class Recorder:
    """What the follower hands over: listed objects and events, by name."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}

    def listed(self, ref: ResourceRef, obj: dict[str, Any]) -> None:
        self.seen[obj["metadata"]["name"]] = obj

    def changed(self, ref: ResourceRef, event_type: str, obj: dict[str, Any]) -> None:
        self.events[obj["metadata"]["name"]] = obj


class Following:
    """informer.follow of one kind in one namespace, in the background, with a recorded verdict."""

    def __init__(self, server: Cluster, kind: str, namespace: str, selector: str | None = None) -> None:
        self.client = ClusterClient(server.kubeconfig)
        self.recorder = Recorder()
        self.verdicts: list[bool] = []
        self.shard = informer.ShardRequest(ring.selector(HELD) if selector is None else selector, inside=inside,
                                           probe=ring.probe_selector(), decided=self.verdicts.append)
        self.task = asyncio.create_task(informer.follow(self.client, KINDS[kind], [namespace], self.recorder,
                                                        what=f"test {kind}", shard=self.shard))

    async def until(self, what: str, check: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert not self.task.done(), f"the follower ended: {self.task.exception()!r}"
            assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_follower_knows_whether_the_server_filtered(server: Cluster, kind: str) -> None:
    everything = {item["metadata"]["name"]: item for item in raw_request(server, "GET", path(kind, NS)).json()["items"]}
    ours = {name for name, obj in everything.items() if inside(obj)}
    assert ours and ours != set(everything), "the test needs objects on both sides"
    following = Following(server, kind, NS)
    try:
        await following.until("a verdict", lambda: following.verdicts)
        assert following.verdicts == [filters(server)]
        await following.until("the list handed over", lambda: set(following.recorder.seen) >= ours)
        # filtered: exactly the slice; not filtered: everything (the sharded primaries drop the rest)
        assert set(following.recorder.seen) == (ours if filters(server) else set(everything))
        assert following.shard.selector == (ring.selector(HELD) if filters(server) else "")
        created = [create(server, kind, NS, f"{kind.lower()}-later-{index}") for index in range(8)]
        later = {obj["metadata"]["name"] for obj in created if filters(server) is False or inside(obj)}
        await following.until("the new objects", lambda: set(following.recorder.events) >= later)
        await asyncio.sleep(1)
        assert set(following.recorder.events) == later
        assert following.verdicts == [filters(server)]
    finally:
        await following.stop()


async def test_an_empty_collection_is_decided_by_its_first_object(server: Cluster) -> None:
    namespace = "shard-client-empty"
    assert raw_request(server, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}}).status == 201
    following = Following(server, "Gadget", namespace)
    try:
        await asyncio.sleep(2)  # listed (nothing) and watching
        assert following.verdicts == []  # nothing to tell a filtering server from an ignoring one by
        for index in range(8):
            create(server, "Gadget", namespace, f"first-{index}")
        await following.until("a verdict", lambda: following.verdicts)
        assert following.verdicts == [filters(server)]
    finally:
        await following.stop()


async def test_a_refused_selector_stops_the_follower_with_a_configuration_error(server: Cluster) -> None:
    refused = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"
    following = Following(server, "Gadget", NS, selector=refused)
    if not filters(server):  # ignored, whatever it says: the follower goes on, unfiltered
        try:
            await following.until("a verdict", lambda: following.verdicts)
            assert following.verdicts == [False]
        finally:
            await following.stop()
        return
    done, _ = await asyncio.wait({following.task}, timeout=20)
    assert done, "the follower kept retrying a selector the server refuses"
    failure = following.task.exception()
    assert isinstance(failure, errors.ConfigurationError)
    assert "refuses the shard selector for Gadget" in str(failure)
    assert 'invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got "0x0"' in str(failure)
