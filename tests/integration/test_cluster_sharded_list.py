"""KEP-5866 sharded LIST and WATCH in the embedded API server, checked over HTTPS.

Two halves of the hash space must partition a collection exactly, the list must echo the selector
in ``metadata.shardInfo`` (and the watch in its initial-events-end bookmark), ``||`` must join
ranges, a namespace-keyed selector must keep a namespace together, a malformed selector must be a
400, and a server started with ``--no-sharded-list-watch`` must ignore the parameter the way an
older kube-apiserver does (everything, no shardInfo, no 400).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from hybrid_operator.localcluster.semantics.shardselectors import fnv1a64
from support.cluster import Cluster, RawWatch, raw_request

pytestmark = pytest.mark.integration

LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
NS = "sharded"
COUNT = 24


def _start(directory: Path, *args: str) -> Cluster:
    instance = Cluster(directory, extra_args=("--bookmark-interval", "1", *args))
    instance.start()
    answer = raw_request(instance, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    assert answer.status == 201, answer.body
    for index in range(COUNT):
        body = {"metadata": {"name": f"cm-{index}", "labels": {"set": "test"}}, "data": {"i": str(index)}}
        created = raw_request(instance, "POST", f"/api/v1/namespaces/{NS}/configmaps", body)
        assert created.status == 201, created.body
    return instance


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    instance = _start(Path(tmp_path_factory.mktemp("sharded")))
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    instance = _start(Path(tmp_path_factory.mktemp("unsharded")), "--no-sharded-list-watch")
    try:
        yield instance
    finally:
        instance.stop()


def _list(c: Cluster, selector: str, path: str = f"/api/v1/namespaces/{NS}/configmaps",
          **extra: str) -> tuple[int, dict[str, Any]]:
    query = urlencode({"shardSelector": selector, "labelSelector": "set=test", **extra})
    answer = raw_request(c, "GET", f"{path}?{query}")
    return answer.status, answer.json()


def _names(listed: dict[str, Any]) -> set[str]:
    return {item["metadata"]["name"] for item in listed["items"]}


def test_two_halves_partition_the_collection_by_uid_hash(sharded: Cluster) -> None:
    status, low = _list(sharded, LOW)
    assert status == 200
    status, high = _list(sharded, HIGH)
    assert status == 200
    assert _names(low) | _names(high) == {f"cm-{i}" for i in range(COUNT)}
    assert not _names(low) & _names(high)
    assert low["metadata"]["shardInfo"] == {"selector": LOW}
    assert high["metadata"]["shardInfo"] == {"selector": HIGH}
    for item in low["items"]:
        assert fnv1a64(item["metadata"]["uid"]) < 1 << 63
    for item in high["items"]:
        assert fnv1a64(item["metadata"]["uid"]) >= 1 << 63


def test_ranges_joined_with_or_and_paging(sharded: Cluster) -> None:
    status, both = _list(sharded, f"{LOW} || {HIGH}")
    assert status == 200
    assert len(both["items"]) == COUNT
    status, first = _list(sharded, LOW, limit="2")
    assert status == 200 and len(first["items"]) == 2
    assert first["metadata"]["shardInfo"] == {"selector": LOW}
    _, whole = _list(sharded, LOW)
    assert set(_names(first)) <= _names(whole)


def test_namespace_key_keeps_a_namespace_together(sharded: Cluster) -> None:
    value = fnv1a64(NS)
    inside = f"shardRange(object.metadata.namespace, '{hex(value)}', '{hex(value + 1)}')"
    outside = f"shardRange(object.metadata.namespace, '{hex(value + 1)}', '0x10000000000000000')"
    status, got = _list(sharded, inside)
    assert status == 200 and len(got["items"]) == COUNT
    status, none = _list(sharded, outside)
    assert status == 200 and none["items"] == []


@pytest.mark.parametrize("selector", [
    "shardRange(object.metadata.name, '0x0', '0x8')",
    "shardRange(object.metadata.uid, '0', '0x8')",
    "shardRange(object.metadata.uid, '0x8', '0x0')",
    "shardRange(object.metadata.uid, '0x0', '0x20000000000000000')",
    "shardRange(object.metadata.uid, '0x0')",
    f"{LOW} ||",
    f"{LOW} && {HIGH}",
])
def test_malformed_selector_is_a_400(sharded: Cluster, selector: str) -> None:
    status, body = _list(sharded, selector)
    assert status == 400, body
    assert body["reason"] == "BadRequest" and "shardSelector" in body["message"]
    watch = raw_request(sharded, "GET", f"/api/v1/namespaces/{NS}/configmaps?"
                        + urlencode({"watch": "true", "shardSelector": selector}))
    assert watch.status == 400


def test_watch_filters_events_and_echoes_shard_info(sharded: Cluster) -> None:
    _, low = _list(sharded, LOW)
    query = urlencode({"watch": "true", "shardSelector": LOW, "sendInitialEvents": "true",
                       "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
                       "labelSelector": "set=test", "timeoutSeconds": "20"})
    with RawWatch(sharded, f"/api/v1/namespaces/{NS}/configmaps?{query}") as stream:
        initial: set[str] = set()
        while True:
            event = stream.next_event()
            assert event is not None
            if event["type"] == "BOOKMARK":
                break
            initial.add(event["object"]["metadata"]["name"])
        assert initial == _names(low)
        assert event["object"]["metadata"]["shardInfo"] == {"selector": LOW}
        created = []
        for index in range(8):
            body = {"metadata": {"name": f"later-{index}", "labels": {"set": "test"}}}
            answer = raw_request(sharded, "POST", f"/api/v1/namespaces/{NS}/configmaps", body)
            assert answer.status == 201
            created.append(answer.json())
        expected = {c["metadata"]["name"] for c in created if fnv1a64(c["metadata"]["uid"]) < 1 << 63}
        seen: set[str] = set()
        deadline = time.monotonic() + 10
        while seen != expected and time.monotonic() < deadline:
            event = stream.next_event()
            assert event is not None
            if event["type"] == "ADDED":
                name = event["object"]["metadata"]["name"]
                assert name in expected, f"{name} is outside the shard"
                seen.add(name)
        assert seen == expected
    for c in created:
        raw_request(sharded, "DELETE", f"/api/v1/namespaces/{NS}/configmaps/{c['metadata']['name']}")


def test_server_without_the_feature_ignores_the_selector(unsharded: Cluster) -> None:
    status, low = _list(unsharded, LOW)
    assert status == 200
    assert len(low["items"]) == COUNT
    assert "shardInfo" not in low["metadata"]
    status, _ = _list(unsharded, "not a selector")
    assert status == 200
