"""Issue 12 items 6 and 7, fuzzed: malformed requests always get a Status, and the server keeps serving.

A seeded generator (reproducible: the seed is in the test id) sends bodies a
hostile client could send -- random bytes, truncated and mutated JSON,
YAML with tags, anchors and odd scalars, JSON patches with random
operations and paths, numbers out of range, NaN, deep nesting, protobuf
noise -- with every body Content-Type to every verb of a ConfigMap, a
Deployment and a custom resource.  Every answer must be a JSON ``Status``
carrying the HTTP code (never a 500 or a plain-text error) unless the request
was accepted, and after each request a GET must be answered within 100 ms.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from security.cluster_attacks import Probe, status_of
from support.cluster import Cluster, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

MANIFESTS = Path(__file__).parent.parent / "integration" / "manifests"
NS = "fuzz"
TARGETS = (
    f"/api/v1/namespaces/{NS}/configmaps",
    "/apis/apps/v1/namespaces/fuzz/deployments",
    f"/apis/example.com/v1/namespaces/{NS}/databases",
)
CONTENT_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
                 "application/json-patch+json", "application/merge-patch+json",
                 "application/strategic-merge-patch+json", "application/apply-patch+yaml", "text/plain", "")
REQUESTS_PER_SEED = 60
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def fuzz_cluster(shared_cluster: Cluster) -> Iterator[Cluster]:
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com")
    shared_cluster.kubectl("create", "namespace", NS)
    for path, body in (
        (TARGETS[0], {"metadata": {"name": "target"}, "data": {"a": "1"}}),
        (TARGETS[1], {"metadata": {"name": "target"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                      "template": {"metadata": {"labels": {"app": "x"}},
                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        (TARGETS[2], {"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": "target"},
                      "spec": {"engine": "postgres", "version": "16", "replicas": 1}}),
    ):
        assert raw_request(shared_cluster, "POST", path, body).status == 201
    yield shared_cluster


def random_json(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9 if depth < 4 else 5)
    scalars: list[Any] = [None, True, rng.randint(-2**70, 2**70), rng.random() * 1e300, "".join(
        rng.choices(string.printable + "é\u2028\x00", k=rng.randrange(12)))]
    if choice < 5:
        return scalars[choice]
    if choice < 7:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["metadata", "name", "labels", "annotations", "data", "spec", "status", "uid", "finalizers",
            "ownerReferences", "managedFields", "replicas", "template", "kind", "apiVersion", "$patch",
            "$setElementOrder/containers", "generateName", "resourceVersion", "namespace", "x"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(5))}


def random_object(rng: random.Random) -> Any:
    obj: dict[str, Any] = {"metadata": {"name": rng.choice(["target", "fuzzed", "", "UPPER", "a" * 300])}}
    for _ in range(rng.randrange(4)):
        path = obj
        for key in rng.sample(["metadata", "spec", "data", "labels", "template", "containers", "status"], 2):
            path = path.setdefault(key, {}) if isinstance(path.get(key, {}), dict) else path
        path[rng.choice(["name", "labels", "annotations", "x", "finalizers", "replicas"])] = random_json(rng, 2)
    return obj


def random_json_patch(rng: random.Random) -> Any:
    paths = ["/metadata", "/metadata/name", "/metadata/uid", "/metadata/labels", "/metadata/labels/a",
             "/data", "/data/a", "/spec", "/spec/replicas", "/spec/template/spec/containers/0", "/status",
             "", "/", "/-", "/metadata/finalizers/-", "/metadata/managedFields/0/fieldsV1", "~1bad", "/x/y/z"]
    ops = ["add", "remove", "replace", "move", "copy", "test", "bogus", None]
    return [{"op": rng.choice(ops), "path": rng.choice(paths), "from": rng.choice(paths),
             "value": random_json(rng, 2)} for _ in range(rng.randrange(1, 4))]


def random_body(rng: random.Random) -> bytes:
    kind = rng.randrange(10)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 300))
    if kind == 1:
        text = json.dumps(random_object(rng))
        cut = rng.randrange(len(text))
        return (text[:cut] + rng.choice(["", "\x00", "}", "]]]", '"'])).encode()
    if kind == 2:
        return json.dumps(random_json_patch(rng)).encode()
    if kind == 3:
        return rng.choice([b"NaN", b'{"metadata":{"name":"n"},"data":{"k":Infinity}}', b"1e999", b"9" * 5000,
                           b'{"metadata":{"name":"n","labels":{"a":1e400}}}'])
    if kind == 4:
        depth = rng.choice([200, 2000, 100_000])
        return (b"[" * depth) + (b"]" * depth) if rng.random() < 0.5 else (b'{"a":' * depth) + b"1" + b"}" * depth
    if kind == 5:
        return rng.choice([
            b"metadata: {name: y}\ndata: {d: 2024-01-01, b: !!binary aGk=, f: .nan}\n",
            b"metadata: {name: y}\ndata: !!python/object:os.system [id]\n",
            b"a: &a [*a]\n",
            b"metadata: {name: y}\n? [complex, key]\n: v\n",
            b"---\na: 1\n---\nb: 2\n",
            b"metadata: {name: y, labels: {1: 2, true: false, null: ~}}\n",
        ])
    if kind == 6:
        return b"k8s\x00" + rng.randbytes(rng.randrange(60))
    if kind == 7:
        return json.dumps(random_json(rng)).encode()
    return json.dumps(random_object(rng)).encode()


def random_request(rng: random.Random) -> tuple[str, str, bytes, str]:
    base = rng.choice(TARGETS)
    method = rng.choice(["POST", "PUT", "PATCH", "PATCH", "PATCH", "DELETE", "GET"])
    path = base if method == "POST" else f"{base}/{rng.choice(['target', 'target', 'nothere'])}"
    if rng.random() < 0.2:
        path += rng.choice(["?fieldManager=fuzz", "?fieldValidation=Strict", "?dryRun=All", "?force=maybe",
                            "/status", "/scale", "?fieldManager=fuzz&force=true"])
    return method, path, random_body(rng), rng.choice(CONTENT_TYPES)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_malformed_requests_get_a_status(fuzz_cluster: Cluster, seed: int) -> None:
    rng = random.Random(seed)
    probe = Probe(fuzz_cluster)
    try:
        for number in range(REQUESTS_PER_SEED):
            method, path, body, content_type = random_request(rng)
            what = f"seed {seed} request {number}: {method} {path} {content_type or '(none)'} {body[:80]!r}"
            response = raw_request(fuzz_cluster, method, path, body, content_type=content_type, timeout=30)
            if response.status >= 400:
                status_of(response, what)
            probe.assert_alive(what)
    finally:
        probe.close()
