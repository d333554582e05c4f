"""Events the embedded cluster's controllers post are aggregated as client-go's recorder does."""

from __future__ import annotations

import pytest

from hybrid_operator.localcluster.controllers.events import EventRecorder
from hybrid_operator.localcluster.controllers.view import ClusterView
from hybrid_operator.localcluster.resources import EVENTS_KEY, Registry
from hybrid_operator.localcluster.semantics.crud import ObjectApi
from hybrid_operator.localcluster.semantics.writes import WriteOptions
from hybrid_operator.localcluster.storage.store import Store

pytestmark = pytest.mark.unit


def test_the_same_event_is_counted_again_and_a_new_one_posted() -> None:
    api = ObjectApi(Store(None), Registry.with_builtins())
    namespaces = api.registry.lookup("", "v1", "namespaces")
    assert namespaces is not None
    api.create(namespaces, "", {"metadata": {"name": "ns"}}, WriteOptions())
    recorder = EventRecorder(ClusterView(api))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}
    for _ in range(3):
        recorder.record(deployment, "deployment-controller", "ScalingReplicaSet", "Scaled up replica set a from 0 to 1")
    recorder.record(deployment, "deployment-controller", "ScalingReplicaSet", "Scaled down replica set a from 1 to 0")
    events = sorted(api.store.list(EVENTS_KEY, "ns"), key=lambda e: str(e["message"]))
    counts = {e["message"]: e["count"] for e in events}
    assert counts == {"Scaled up replica set a from 0 to 1": 3, "Scaled down replica set a from 1 to 0": 1}
    assert {e["involvedObject"]["uid"] for e in events} == {"u1"}
    assert {e["source"]["component"] for e in events} == {"deployment-controller"}
