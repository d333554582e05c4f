"""KEP-5866 ``shardSelector``: the embedded cluster answers exactly as the real kube-apiserver v1.36.3 does.

Every case of ``differential/kep5866.yaml`` (valid and malformed selectors; LIST, paged LIST, WATCH,
a watch's initial events, DELETECOLLECTION; a built-in kind and a custom resource; the feature gate
on and off) is sent over HTTPS to an embedded cluster and to the real control plane (`make kube`),
both started here with ``--no-controllers`` (nothing but the test writes objects). Generated values
are taken out of the comparison: uids by pinning each object's uid hash to a quarter of the hash
space on both servers (re-created until it lands there), resourceVersions by leaving them out.
What is compared: status code, the Status message, reason and code, the item names page by page
(with ``continue`` present or not and ``remainingItemCount``), ``metadata.shardInfo``, and for
watches the names reported. Skipped, with one line, when the cache holds no real control plane.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from hybrid_operator.localcluster.semantics.shardselectors import fnv1a64
from support.cluster import Cluster, RawWatch, open_crd, raw_request
from support.realplane import RealCluster, needs_build

pytestmark = [pytest.mark.integration, pytest.mark.kube, pytest.mark.slow, needs_build]

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "differential" / "kep5866.yaml").read_text())["cases"]
GROUP = "diff.hybrid.dev"
CRD = open_crd(GROUP, "Widget")
NS, OTHER = "kep-diff", "kep-diff-other"
RESOURCES = ("configmaps", "widgets")
OBJECTS = 12
QUARTER = 1 << 62


def collection(resource: str, namespace: str | None) -> str:
    base = "/api/v1" if resource == "configmaps" else f"/apis/{GROUP}/v1"
    return f"{base}/namespaces/{namespace}/{resource}" if namespace else f"{base}/{resource}"


def call(server: Cluster, method: str, path: str, query: dict[str, str] | None = None,
         body: Any = None) -> tuple[int, Any]:
    answer = raw_request(server, method, path + ("?" + urlencode(query) if query else ""), body)
    return answer.status, answer.json()


def pin(server: Cluster, resource: str, namespace: str, name: str, quarter: int) -> None:
    """Create ``name`` until its uid's FNV-1a hash lies in ``quarter`` (0-3) of the hash space."""
    body: dict[str, Any] = {"metadata": {"name": name}}
    if resource == "widgets":
        body.update(apiVersion=f"{GROUP}/v1", kind="Widget")
    for _ in range(64):
        status, created = call(server, "POST", collection(resource, namespace), body=body)
        assert status == 201, created
        if fnv1a64(created["metadata"]["uid"]) // QUARTER == quarter:
            return
        status, gone = call(server, "DELETE", f"{collection(resource, namespace)}/{name}")
        assert status == 200, gone
    pytest.fail(f"{resource} {namespace}/{name}: no uid in quarter {quarter} in 64 tries")


def fill(server: Cluster, namespace: str, resource: str, prefix: str = "obj", count: int = OBJECTS) -> None:
    for index in range(count):
        pin(server, resource, namespace, f"{prefix}-{index:02d}", index % 4)


def namespace(server: Cluster, name: str) -> None:
    status, body = call(server, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    assert status == 201, body


def prepare(server: Cluster) -> Cluster:
    """The CRD, both namespaces and the pinned objects."""
    status, body = call(server, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CRD)
    assert status == 201, body
    deadline = time.monotonic() + 60
    while call(server, "GET", collection("widgets", None))[0] != 200:
        assert time.monotonic() < deadline, "the CRD was not served within 60 s"
        time.sleep(0.2)
    for name in (NS, OTHER):
        namespace(server, name)
    for resource in RESOURCES:
        fill(server, NS, resource)
    fill(server, OTHER, "widgets", count=3)
    return server


def start(directory: Path, real: bool, gate: str) -> Cluster:
    flags = ("--no-controllers", *(("--no-sharded-list-watch",) if gate == "off" else ()))
    server = RealCluster(directory, flags) if real else Cluster(directory, extra_args=flags)
    server.start()
    return server


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Cluster]]:
    """Embedded and real servers per gate, started (and filled) when a case first needs them."""
    started: dict[tuple[str, str], Cluster] = {}

    class Lazy(dict[tuple[str, str], Cluster]):
        def __missing__(self, key: tuple[str, str]) -> Cluster:
            kind, gate = key
            server = start(tmp_path_factory.mktemp(f"{kind}-gate-{gate}"), kind == "real", gate)
            started[key] = server
            self[key] = prepare(server)
            return self[key]

    try:
        yield Lazy()
    finally:
        for server in started.values():
            if server.process is not None:
                server.stop()


def refusal(status: int, body: Any) -> dict[str, Any]:
    """A refused request as compared: the code and the Status as sent (no reason is a difference too)."""
    shown = {key: body.get(key) for key in ("kind", "apiVersion", "status", "message", "reason", "code", "details")} \
        if isinstance(body, dict) else body
    return {"status": status, "body": shown}


def names(items: list[dict[str, Any]], cluster_scope: bool) -> list[str]:
    meta = [item["metadata"] for item in items]
    return [f"{m['namespace']}/{m['name']}" if cluster_scope else m["name"] for m in meta]


def list_meta(listed: dict[str, Any]) -> dict[str, Any]:
    """A list's metadata with its generated values replaced: resourceVersion, a non-empty continue token."""
    meta = dict(listed["metadata"])
    for key in ("resourceVersion", "continue"):
        if meta.get(key):
            meta[key] = f"<{key}>"
    return meta


def selector_query(case: dict[str, Any]) -> dict[str, str]:
    return {"shardSelector": case["selector"]} if "selector" in case else {}


def observe_list(server: Cluster, case: dict[str, Any], resource: str) -> dict[str, Any]:
    cluster_scope = case.get("scope") == "cluster"
    path = collection(resource, None if cluster_scope else NS)
    limit = case.get("limit")
    pages: list[dict[str, Any]] = []
    token = ""
    while True:
        query = {**selector_query(case), **({"limit": str(limit)} if limit else {}),
                 **({"continue": token} if token else {})}
        status, body = call(server, "GET", path, query)
        if status != 200:
            return refusal(status, body) | {"after_pages": len(pages)}
        pages.append({"items": names(body["items"], cluster_scope), "metadata": list_meta(body)})
        token = body["metadata"].get("continue") or ""
        if not (limit and token):
            return {"status": 200, "pages": pages}


def live_names(events: list[dict[str, Any]]) -> list[str]:
    """Names of the objects a watch reported ADDED and not DELETED (rejected pins come and go)."""
    live: dict[str, str] = {}
    for event in events:
        meta = event["object"]["metadata"]
        if event["type"] == "ADDED":
            live[meta["uid"]] = meta["name"]
        elif event["type"] == "DELETED":
            live.pop(meta["uid"], None)
    return sorted(live.values())


def observe_watch(server: Cluster, case: dict[str, Any], resource: str, own: str) -> dict[str, Any]:
    """A watch from the list's resourceVersion of an empty namespace while 8 pinned objects are created there."""
    namespace(server, own)
    path = collection(resource, own)
    _, listed = call(server, "GET", path)
    query = {**selector_query(case), "watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"],
             "timeoutSeconds": "60"}
    with RawWatch(server, f"{path}?{urlencode(query)}") as stream:
        if stream.response.status != 200:
            return refusal(stream.response.status, yaml.safe_load(stream.response.read()))
        fill(server, own, resource, prefix="new", count=8)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stream.silent_for(2):
            continue  # every line read is kept in stream.lines
        events = [json.loads(line) for line in stream.lines]
    return {"status": 200, "live": live_names(events),
            "types": sorted({e["type"] for e in events} - {"DELETED", "BOOKMARK"})}


def observe_initial(server: Cluster, case: dict[str, Any], resource: str) -> dict[str, Any]:
    query = {**selector_query(case), "watch": "true", "sendInitialEvents": "true", "allowWatchBookmarks": "true",
             "resourceVersionMatch": "NotOlderThan", "resourceVersion": "", "timeoutSeconds": "30"}
    with RawWatch(server, f"{collection(resource, NS)}?{urlencode(query)}") as stream:
        if stream.response.status != 200:
            return refusal(stream.response.status, yaml.safe_load(stream.response.read()))
        initial = []
        while (event := stream.next_event(timeout=20)) is not None:
            if event["type"] == "BOOKMARK":
                bookmark = dict(event["object"]["metadata"])
                bookmark["resourceVersion"] = "<rv>" if bookmark.get("resourceVersion") else None
                return {"status": 200, "initial": sorted(initial), "bookmark": bookmark}
            initial.append(event["object"]["metadata"]["name"])
    pytest.fail(f"the watch ended before its initial-events-end bookmark (got {initial})")


def observe_delete_collection(server: Cluster, case: dict[str, Any], resource: str, own: str) -> dict[str, Any]:
    namespace(server, own)
    fill(server, own, resource, count=8)
    path = collection(resource, own)
    status, body = call(server, "DELETE", path, selector_query(case))
    _, left = call(server, "GET", path)
    remaining = sorted(names(left["items"], False))
    if status != 200:
        return refusal(status, body) | {"remaining": remaining}
    return {"status": 200, "deleted": sorted(names(body["items"], False)), "metadata": list_meta(body),
            "remaining": remaining}


def observe(server: Cluster, case: dict[str, Any], resource: str, index: int) -> dict[str, Any]:
    own = f"kep-diff-{index}-{resource}"
    verb = case["verb"]
    if verb == "list":
        return observe_list(server, case, resource)
    if verb == "watch":
        return observe_watch(server, case, resource, own)
    if verb == "initial":
        return observe_initial(server, case, resource)
    assert verb == "deletecollection", f"unknown verb {verb!r} in {case}"
    return observe_delete_collection(server, case, resource, own)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case["name"] for case in CASES])
def test_embedded_answers_as_the_real_server(servers: dict[tuple[str, str], Cluster], index: int) -> None:
    case = CASES[index]
    gate = str(case.get("gate", "on"))
    resources = [case["resource"]] if "resource" in case else list(RESOURCES)
    for resource in resources:
        real = observe(servers["real", gate], case, resource, index)
        embedded = observe(servers["embedded", gate], case, resource, index)
        assert embedded == real, f"{resource}: the embedded cluster (left) differs from kube-apiserver (right)"
