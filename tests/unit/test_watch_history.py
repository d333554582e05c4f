"""Issue 13 item 5 (embedded cluster): the watch history is bounded by bytes too, and Events expire.

20,000 changes kept by count alone held 1.17 GB for 2.7 MB of live objects; the change feed now
also keeps at most ``max_bytes`` of JSON (the newest change always stays), forgets the rest for
watch resume (410 Expired, as a compacted etcd), and the store persists only what the feed keeps.
Events not written for the TTL are deleted (kube-apiserver's ``--event-ttl``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.localcluster import clock
from hybrid_operator.localcluster.controllers.eventttl import EventExpiry, last_write
from hybrid_operator.localcluster.resources import Registry
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions
from hybrid_operator.localcluster.server import seed
from hybrid_operator.localcluster.storage.store import Store

pytestmark = pytest.mark.unit

BIG = "x" * 100_000


def config_map(name: str, data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"d": data}}


def test_the_history_keeps_at_most_its_bytes() -> None:
    store = Store(None, history=20000, history_bytes=1_000_000)
    old = None
    for index in range(50):
        old = store.write("/configmaps", config_map("big", BIG + str(index)), old).obj
    assert store.changes.bytes <= 1_000_000
    assert len(store.changes.since(store.rv - 1) or []) == 1, "the newest change stays"
    assert store.changes.since(1) is None, "older resourceVersions are compacted: 410 Expired"
    assert store.changes.compacted_rv > 40


def test_the_history_still_keeps_at_most_its_count() -> None:
    store = Store(None, history=10, history_bytes=None)
    old = None
    for index in range(30):
        old = store.write("/configmaps", config_map("small", str(index)), old).obj
    assert store.changes.since(store.changes.compacted_rv) is not None
    assert len(store.changes.since(store.changes.compacted_rv) or []) == 10


def test_a_restarted_store_keeps_the_byte_bound(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db", history=20000, history_bytes=None)
    old = None
    for index in range(1000):  # a compaction point (every 1,000 resourceVersions)
        old = store.write("/configmaps", config_map("big", BIG[:5000] + str(index)), old).obj
    store.close()
    restarted = Store(tmp_path / "state.db", history=20000, history_bytes=200_000)
    assert restarted.changes.bytes <= 200_000
    assert restarted.changes.since(restarted.rv - 1) is not None
    assert restarted.get("/configmaps", "default", "big") is not None


def api() -> ObjectApi:
    objects = ObjectApi(Store(None), Registry.with_builtins())
    seed(objects)
    return objects


def post_event(objects: ObjectApi, name: str) -> None:
    info = objects.registry.lookup("", "v1", "events")
    assert info is not None
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
            "reason": "Tested", "message": "m", "type": "Normal", "count": 1}
    objects.create(info, "default", body, WriteOptions(field_manager="test"))


def test_events_not_written_for_the_ttl_are_deleted() -> None:
    objects = api()
    post_event(objects, "old")
    post_event(objects, "fresh")
    written = clock.now()
    later = written + timedelta(seconds=3700)
    expiry = EventExpiry(objects, ttl=3600, now=lambda: later)
    info = objects.registry.lookup("", "v1", "events")
    assert info is not None
    stored = objects.store.get(info.storage_key, "default", "fresh")
    assert stored is not None
    stored["metadata"]["managedFields"] = [{"manager": "test", "operation": "Update",
                                            "time": clock.rfc3339(later - timedelta(seconds=60))}]
    objects.store.write(info.storage_key, stored, objects.store.peek(info.storage_key, "default", "fresh"))
    assert expiry.sweep() == 1
    assert objects.store.get(info.storage_key, "default", "old") is None
    assert objects.store.get(info.storage_key, "default", "fresh") is not None, "a write renews the TTL"


def test_an_event_updated_through_the_api_is_renewed() -> None:
    objects = api()
    post_event(objects, "counted")
    info = objects.registry.lookup("", "v1", "events")
    assert info is not None
    objects.patch(info, "default", "counted", "application/merge-patch+json", {"count": 2},
                  WriteOptions(field_manager="other"))
    stored = objects.store.get(info.storage_key, "default", "counted")
    assert stored is not None and last_write(stored) is not None
    assert len(stored["metadata"].get("managedFields") or []) >= 1


def test_a_zero_ttl_keeps_events() -> None:
    objects = api()
    post_event(objects, "kept")
    expiry = EventExpiry(objects, ttl=0)
    expiry.start()  # never scheduled
    assert expiry._task is None
