"""Unit tests for how a sharded follower decides whether the API server applied its shardSelector.

kube.informer.shard_verdict and ShardRequest (the decision, and what it changes), the probe selector of
the ring, and kube.client's reading of kube-apiserver's refusal (a 500 ``invalid shard selector``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator import errors
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from hybrid_operator.controller.controller import Controller
from hybrid_operator.kube import client, informer
from hybrid_operator.kube.client import ResourceRef
from hybrid_operator.manager.sharding import ring
from hybrid_operator.manager.sharding.primaries import ShardedPrimaries
from support.fakes import FakeClock, FakeReconciler

pytestmark = pytest.mark.unit

HELD = frozenset(range(16))


def obj(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid}}


def inside(item: dict[str, Any]) -> bool:
    return ring.bucket_of(ring.key_value(item, "uid")) in HELD


OURS = next(obj(f"{i:08x}-uid") for i in range(1000) if inside(obj(f"{i:08x}-uid")))
THEIRS = next(obj(f"{i:08x}-uid") for i in range(1000) if not inside(obj(f"{i:08x}-uid")))


def test_an_object_outside_the_slice_means_not_filtered_whatever_shard_info_says() -> None:
    assert informer.shard_verdict([OURS, THEIRS], echoed=True, inside=inside) is False
    assert informer.shard_verdict([OURS, THEIRS], echoed=False, inside=inside) is False


def test_echo_means_filtered_and_silence_cannot_tell() -> None:
    assert informer.shard_verdict([OURS], echoed=True, inside=inside) is True
    assert informer.shard_verdict([], echoed=True, inside=inside) is True
    assert informer.shard_verdict([OURS], echoed=False, inside=inside) is None  # a CR list, or luck
    assert informer.shard_verdict([], echoed=False, inside=inside) is None


def test_a_negative_verdict_drops_the_selector_and_is_reported_once() -> None:
    verdicts: list[bool] = []
    shard = informer.ShardRequest(ring.selector(HELD), inside=inside, probe=ring.probe_selector(),
                                  decided=verdicts.append)
    assert shard.outside(THEIRS) and not shard.outside(OURS)
    shard.decide(None)
    assert verdicts == [] and shard.verdict is None
    shard.decide(True)
    shard.decide(True)
    assert verdicts == [True] and shard.selector == ring.selector(HELD)
    shard.decide(False)
    assert verdicts == [True, False] and shard.selector == "" and shard.verdict is False
    assert not shard.outside(THEIRS)  # following everything: nothing is out of place any more


def test_the_probe_selector_is_one_hash_value_wide() -> None:
    assert ring.probe_selector() == "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"
    assert ring.probe_selector("namespace").startswith("shardRange(object.metadata.namespace, ")


def test_a_refused_selector_is_a_configuration_error_and_other_failures_are_not() -> None:
    ref = ResourceRef("shard.hybrid.dev", "v1", "Chore", "chores", True, True)
    refused = json.dumps({"kind": "Status", "code": 500, "message": "invalid shard selector: CEL parse error: x"})
    with pytest.raises(errors.ConfigurationError, match=r"refuses the shard selector for Chore .*CEL parse error"):
        client._refused_selector(ref, "bad", 500, refused)
    with pytest.raises(errors.ConfigurationError):
        client._refused_selector(ref, "bad", 500, refused.encode())
    client._refused_selector(ref, "", 500, refused)  # no selector sent: not about one
    client._refused_selector(ref, "bad", 503, refused)
    client._refused_selector(ref, "bad", 500, json.dumps({"message": "etcdserver: request timed out"}))
    client._refused_selector(ref, "bad", 500, "<html>")


class RefusingCluster:
    """Records what the primaries ask; answers every sharded list as kube-apiserver answers a bad selector."""

    def __init__(self) -> None:
        self.lists = 0

    def resolve(self, group: str, version: str, kind: str) -> ResourceRef:
        return ResourceRef(group, version, kind, "websites", True, True)

    def list_sharded(self, ref: ResourceRef, namespace: str = "", shard_selector: str = "",
                     limit: int = 0) -> tuple[list[dict[str, Any]], str, bool]:
        self.lists += 1
        raise errors.ConfigurationError(f"the API server refuses the shard selector for {ref.kind}")


async def test_a_refused_selector_ends_the_sharded_primaries_instead_of_a_retry_loop() -> None:
    gvk = GroupVersionKind("web.example.com", "v1alpha1", "Website")
    clock = FakeClock(start=0.0)
    controller = Controller(watch=AnsibleWatch(gvk=gvk, playbook=Path("/nowhere.yml")),
                            reconciler=FakeReconciler(clock=clock), workers=1, clock=clock)
    cluster = RefusingCluster()

    async def sink(*_: Any) -> None:
        raise AssertionError("nothing may be delivered")

    primaries = ShardedPrimaries(cluster, [controller], [], sink)  # type: ignore[arg-type]
    stop = asyncio.Event()
    running = asyncio.create_task(primaries.run(stop))
    await primaries.held_changed(HELD)
    with pytest.raises(errors.ConfigurationError, match="refuses the shard selector for Website"):
        await asyncio.wait_for(running, timeout=10)
    assert cluster.lists == 1
