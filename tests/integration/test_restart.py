"""Durability of the embedded API server across restarts (SIGTERM and kill -9).

The operator's users stop and start ``hybrid-operator cluster`` at will, and
crash it: objects, resourceVersions, uids, CRDs, the token and the CA must all
come back from the data dir so kubectl, helm and watchers carry on.  Every write
the server acknowledged must survive a SIGKILL.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cluster import Cluster, RawWatch, raw_request

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parent / "manifests"
NS = "keep"
DB = f"/apis/example.com/v1/namespaces/{NS}/databases"
CM = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture
def cluster(own_cluster: Cluster) -> Cluster:
    """A server of each test's own: they stop, kill and restart it."""
    return own_cluster


def post(c: Cluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = raw_request(c, "POST", path, body)
    assert answer.status == 201, answer.body
    created: dict[str, Any] = answer.json()
    return created


def get(c: Cluster, path: str) -> dict[str, Any]:
    answer = raw_request(c, "GET", path)
    assert answer.status == 200, (path, answer.body)
    found: dict[str, Any] = answer.json()
    return found


def populate(c: Cluster) -> dict[str, dict[str, Any]]:
    """A namespace, ConfigMaps, the Database CRD and two Databases; returns them by path."""
    c.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    c.kubectl("wait", "--for=condition=Established", "crd/databases.example.com", "--timeout=30s")
    post(c, "/api/v1/namespaces", {"metadata": {"name": NS}})
    for index in range(3):
        post(c, CM, {"metadata": {"name": f"cm-{index}", "labels": {"n": str(index)}}, "data": {"i": str(index)}})
    c.kubectl("apply", "-n", NS, "-f", str(MANIFESTS / "db-sample.yaml"))
    post(c, DB, {"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": "users"},
                 "spec": {"engine": "mysql", "version": "8"}})
    paths = [f"{CM}/cm-{i}" for i in range(3)] + [f"{DB}/orders", f"{DB}/users",
                                                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                                   "databases.example.com", f"/api/v1/namespaces/{NS}"]
    return {path: get(c, path) for path in paths}


def credentials(c: Cluster) -> tuple[str, str, str]:
    config = yaml.safe_load(c.kubeconfig.read_text())
    return (config["clusters"][0]["cluster"]["server"], config["clusters"][0]["cluster"]["certificate-authority-data"],
            config["users"][0]["user"]["token"])


def assert_all_back(c: Cluster, before: dict[str, dict[str, Any]]) -> None:
    for path, obj in before.items():
        now = get(c, path)
        meta = now["metadata"]
        assert (meta["resourceVersion"], meta["uid"]) == (obj["metadata"]["resourceVersion"], obj["metadata"]["uid"])
        assert now == obj, path


def assert_crd_served(c: Cluster) -> None:
    listed = get(c, "/apis/example.com/v1")
    assert {r["name"]: r["kind"] for r in listed["resources"]}.get("databases") == "Database"
    names = c.kubectl("get", "db", "-n", NS, "-o", "name").stdout.split()
    assert names == ["database.example.com/orders", "database.example.com/users"]


def test_sigterm_restart_keeps_objects_versions_crds_and_credentials(cluster: Cluster) -> None:
    before = populate(cluster)
    last_rv = int(get(cluster, CM)["metadata"]["resourceVersion"])
    creds = credentials(cluster)
    assert cluster.stop(signal.SIGTERM) == 0
    cluster.start()
    assert credentials(cluster) == creds, "same server URL, CA and token after a restart"
    assert_all_back(cluster, before)
    assert_crd_served(cluster)
    out = cluster.kubectl("get", "configmaps", "-n", NS, "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert out.split() == ["cm-0", "cm-1", "cm-2", "kube-root-ca.crt"]
    cluster.kubectl("create", "configmap", "after", "-n", NS, "--from-literal=a=b")
    fresh = get(cluster, f"{CM}/after")
    assert int(fresh["metadata"]["resourceVersion"]) > last_rv
    assert int(get(cluster, CM)["metadata"]["resourceVersion"]) >= int(fresh["metadata"]["resourceVersion"])


def test_sigkill_keeps_every_acknowledged_write(cluster: Cluster) -> None:
    raw_request(cluster, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})

    def burst(index: int) -> tuple[str, dict[str, Any] | None]:
        name = f"burst-{index}"
        created = post(cluster, CM, {"metadata": {"name": name}, "data": {"v": "0"}})
        if index % 3 == 1:
            answer = raw_request(cluster, "PATCH", f"{CM}/{name}", {"data": {"v": "1"}},
                                 content_type="application/merge-patch+json")
            assert answer.status == 200, answer.body
            return name, answer.json()
        if index % 3 == 2:
            answer = raw_request(cluster, "DELETE", f"{CM}/{name}")
            assert answer.status == 200, answer.body
            return name, None
        return name, created

    with ThreadPoolExecutor(max_workers=4) as pool:
        acknowledged = dict(pool.map(burst, range(60)))
    assert cluster.stop(signal.SIGKILL) == -signal.SIGKILL
    cluster.start()
    highest = 0
    for name, obj in acknowledged.items():
        answer = raw_request(cluster, "GET", f"{CM}/{name}")
        if obj is None:
            assert answer.status == 404, f"{name} was deleted before the crash: {answer.body!r}"
            continue
        assert answer.status == 200, f"acknowledged {name} lost: {answer.body!r}"
        assert answer.json() == obj
        highest = max(highest, int(obj["metadata"]["resourceVersion"]))
    after = post(cluster, CM, {"metadata": {"name": "after-crash"}})
    assert int(after["metadata"]["resourceVersion"]) > highest


def test_watch_resumed_after_restart_from_an_older_rv_is_never_silent(cluster: Cluster) -> None:
    post(cluster, "/api/v1/namespaces", {"metadata": {"name": NS}})
    start_rv = get(cluster, CM)["metadata"]["resourceVersion"]
    post(cluster, CM, {"metadata": {"name": "before-restart"}})
    assert cluster.stop(signal.SIGTERM) == 0
    cluster.start()
    post(cluster, CM, {"metadata": {"name": "after-restart"}})
    with RawWatch(cluster, f"{CM}?watch=true&resourceVersion={start_rv}") as stream:
        first = stream.next_event(timeout=10)
        assert first is not None
        if first["type"] == "ERROR":
            assert first["object"]["code"] == 410
            return
        second = stream.next_event(timeout=10)
        assert second is not None
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in (first, second)] == [
            ("ADDED", "before-restart"), ("ADDED", "after-restart")]


def test_history_reloaded_after_restart_is_bounded_by_watch_history(cluster: Cluster) -> None:
    post(cluster, "/api/v1/namespaces", {"metadata": {"name": NS}})
    made = [post(cluster, CM, {"metadata": {"name": f"h-{i}"}}) for i in range(8)]
    assert cluster.stop(signal.SIGTERM) == 0
    cluster.extra_args = ("--watch-history", "5")
    cluster.start()
    with RawWatch(cluster, f"{CM}?watch=true&resourceVersion={made[0]['metadata']['resourceVersion']}") as aged:
        event = aged.next_event()
        assert event is not None and event["type"] == "ERROR", event
        assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    with RawWatch(cluster, f"{CM}?watch=true&resourceVersion={made[4]['metadata']['resourceVersion']}") as kept:
        replayed = [kept.next_event() for _ in range(3)]
        assert [e["object"]["metadata"]["name"] for e in replayed if e is not None] == ["h-5", "h-6", "h-7"]
