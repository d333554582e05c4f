"""KEP-5866 sharded LIST and WATCH in the embedded API server, checked over HTTPS.

Two halves of the hash space must partition a collection exactly, the list of a built-in kind must
echo the normalised selector in ``metadata.shardInfo`` (a custom resource's list and the watch's
initial-events-end bookmark do not, as kube-apiserver v1.36.3), ``||`` must join ranges, a
namespace-keyed selector must keep a namespace together, a malformed selector must be a 500 without
a reason and with the real server's message on LIST, WATCH and DELETECOLLECTION, and a server started
with ``--no-sharded-list-watch`` must ignore the parameter the way kube-apiserver with the gate off
does (everything, no shardInfo, no error; a DELETECOLLECTION deletes the whole collection).
test_kep5866_differential.py compares these answers with the real server's, when it is built.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from hybrid_operator.localcluster.semantics.shardselectors import fnv1a64
from support.cluster import Cluster, RawWatch, open_crd, raw_request

pytestmark = pytest.mark.integration

LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
NS = "sharded"
COUNT = 24
GROUP = "shard.hybrid.dev"
CRD = open_crd(GROUP, "Widget")


def _start(directory: Path, *args: str) -> Cluster:
    instance = Cluster(directory, extra_args=("--bookmark-interval", "1", *args))
    instance.start()
    answer = raw_request(instance, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    assert answer.status == 201, answer.body
    for index in range(COUNT):
        body = {"metadata": {"name": f"cm-{index}", "labels": {"set": "test"}}, "data": {"i": str(index)}}
        created = raw_request(instance, "POST", f"/api/v1/namespaces/{NS}/configmaps", body)
        assert created.status == 201, created.body
    assert raw_request(instance, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD).status == 201
    for index in range(COUNT):
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": f"w-{index}"}}
        created = raw_request(instance, "POST", f"/apis/{GROUP}/v1/namespaces/{NS}/widgets", body)
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


@pytest.mark.parametrize(("selector", "message"), [
    ("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
     'unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace'),
    ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
     'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)'),
    ("shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')",
     'hexStart must have \'0x\' prefix, got "0X0000000000000000"'),
    ("shardRange(object.metadata.uid, '0x0000000000000000', '0x800000000000000A')",
     'hexEnd: invalid hex character "A" in "0x800000000000000A"'),
    ("shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
     "shard range start 0x8000000000000000 must be less than end 0x0000000000000000"),
    ("shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
     "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\""),
    ("shardRange(object.metadata.uid, '0x0000000000000000')", "shardRange() requires exactly 3 arguments, got 2"),
    (f"{LOW} || shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
     'all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"'),
    (f"{LOW} && {HIGH}", 'unsupported function "_&&_"; only shardRange() and || are allowed'),
    ("not a selector", "CEL parse error: Syntax error: mismatched input 'a' expecting <EOF>"),
    ("  ", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
])
def test_malformed_selector_is_a_500_as_from_kube_apiserver(sharded: Cluster, selector: str, message: str) -> None:
    status, body = _list(sharded, selector)
    assert status == 500, body
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": f"invalid shard selector: {message}", "code": 500}
    watch = raw_request(sharded, "GET", f"/api/v1/namespaces/{NS}/configmaps?"
                        + urlencode({"watch": "true", "shardSelector": selector}))
    assert (watch.status, watch.json()) == (500, body)
    deleted = raw_request(sharded, "DELETE", f"/api/v1/namespaces/{NS}/configmaps?"
                          + urlencode({"shardSelector": selector}))
    assert (deleted.status, deleted.json()) == (500, body)
    assert len(_list(sharded, HIGH)[1]["items"]) + len(_list(sharded, LOW)[1]["items"]) == COUNT


def test_selector_is_echoed_normalised_for_built_in_kinds_only(sharded: Cluster) -> None:
    loose = '  ( shardRange( object.metadata.uid , "0x0000000000000000" , "0x8000000000000000" ) )  '
    status, listed = _list(sharded, loose)
    assert status == 200
    assert listed["metadata"]["shardInfo"] == {"selector": LOW}
    widgets = f"/apis/{GROUP}/v1/namespaces/{NS}/widgets"
    answer = raw_request(sharded, "GET", f"{widgets}?{urlencode({'shardSelector': LOW})}")
    low = answer.json()
    assert answer.status == 200 and "shardInfo" not in low["metadata"]
    high = raw_request(sharded, "GET", f"{widgets}?{urlencode({'shardSelector': HIGH})}").json()
    assert _names(low) | _names(high) == {f"w-{i}" for i in range(COUNT)} and not _names(low) & _names(high)
    for item in low["items"]:
        assert fnv1a64(item["metadata"]["uid"]) < 1 << 63


def test_pages_count_the_unfiltered_rest(sharded: Cluster) -> None:
    """remainingItemCount = stored objects after the continue key - limit, whatever the shard filtered out."""
    everything = raw_request(sharded, "GET", f"/api/v1/namespaces/{NS}/configmaps").json()["items"]
    order = [item["metadata"]["name"] for item in everything]
    low = {item["metadata"]["name"] for item in everything if fnv1a64(item["metadata"]["uid"]) < 1 << 63}
    seen: list[str] = []
    start, token = 0, ""
    while True:
        query = urlencode({"shardSelector": LOW, "limit": "3", **({"continue": token} if token else {})})
        page = raw_request(sharded, "GET", f"/api/v1/namespaces/{NS}/configmaps?{query}").json()
        names = [item["metadata"]["name"] for item in page["items"]]
        seen += names
        token = page["metadata"].get("continue", "")
        if not token:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert len(names) == 3
        assert page["metadata"]["remainingItemCount"] == len(order) - start - 3
        start = order.index(names[-1]) + 1
    assert seen == [name for name in order if name in low]


def test_delete_collection_deletes_the_shard_only(sharded: Cluster) -> None:
    ns = "sharded-delete"
    assert raw_request(sharded, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}}).status == 201
    uids = {}
    for index in range(12):
        created = raw_request(sharded, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                              {"metadata": {"name": f"d-{index}"}}).json()
        uids[created["metadata"]["name"]] = created["metadata"]["uid"]
    answer = raw_request(sharded, "DELETE", f"/api/v1/namespaces/{ns}/configmaps?" + urlencode({"shardSelector": LOW}))
    assert answer.status == 200
    low = {name for name, uid in uids.items() if fnv1a64(uid) < 1 << 63}
    # (kube-root-ca.crt, the namespace's own, is in one half or the other too)
    assert _names(answer.json()) & set(uids) == low and answer.json()["metadata"]["shardInfo"] == {"selector": LOW}
    left = raw_request(sharded, "GET", f"/api/v1/namespaces/{ns}/configmaps").json()
    assert _names(left) & set(uids) == set(uids) - low


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
        assert event["object"]["metadata"] == {"resourceVersion": event["object"]["metadata"]["resourceVersion"],
                                               "annotations": {"k8s.io/initial-events-end": "true"}}
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
    watch = raw_request(unsharded, "GET", f"/api/v1/namespaces/{NS}/configmaps?"
                        + urlencode({"watch": "true", "shardSelector": "not a selector", "timeoutSeconds": "1"}))
    assert watch.status == 200
    deleted = raw_request(unsharded, "DELETE", f"/api/v1/namespaces/{NS}/configmaps?"
                          + urlencode({"shardSelector": LOW, "labelSelector": "set=test"}))
    assert deleted.status == 200 and len(deleted.json()["items"]) == COUNT
    assert _list(unsharded, "")[1]["items"] == []
