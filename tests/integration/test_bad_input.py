"""Bad requests against the embedded API server: the right Status, and nothing stored.

Clients branch on kube-apiserver's error answers (kubectl prints the message,
Ansible retries a 415 with merge patch, kopf retries a 422 json-patch ``test``,
client-side apply re-GETs on 409).  Each case sends one malformed or refused
request over HTTPS and checks the whole ``Status`` (kind, code, reason, message)
and that the server wrote nothing: the global resourceVersion and the probed
objects are exactly as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster, raw_request

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parent / "manifests"
NS = "bad"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
EXISTING = f"{CMS}/existing"
ORDERS = f"/apis/example.com/v1/namespaces/{NS}/databases/orders"
NOT_FOUND = "the server could not find the requested resource"
BODY_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
CONFLICT = ('Operation cannot be fulfilled on configmaps "existing": the object has been modified; '
            "please apply your changes to the latest version and try again")
NAME_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
             "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
CR_PATCH_TYPES = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
ALL_PATCH_TYPES = ("application/json-patch+json, application/merge-patch+json, "
                   "application/strategic-merge-patch+json, application/apply-patch+yaml")


@dataclass(frozen=True)
class Case:
    """One bad request, the Status it must get, and the paths that must not change."""

    id: str
    method: str
    path: str
    body: Any  # bytes/str sent as-is, else JSON; a callable gets the setup state first
    code: int
    reason: str
    message: str
    probes: tuple[str, ...] = ()
    content_type: str = "application/json"
    token: str | None = ""  # "": the kubeconfig's token, None: no Authorization header
    prefix: bool = False  # message is a prefix (parser wording varies)
    contains: tuple[str, ...] = field(default=())


def stale_update(state: dict[str, Any]) -> dict[str, Any]:
    body = dict(state["existing"])
    body["metadata"] = dict(body["metadata"], resourceVersion=state["stale_rv"])
    body["data"] = {"k": "overwritten"}
    return body


CASES = [
    Case("malformed-json-create", "POST", CMS, b'{"metadata": {"name": "half"', 400, "BadRequest",
         "couldn't get version/kind; json parse error", (f"{CMS}/half",), prefix=True),
    Case("malformed-json-update", "PUT", EXISTING, b'{"data": ', 400, "BadRequest",
         "couldn't get version/kind; json parse error", (EXISTING,), prefix=True),
    Case("malformed-yaml-apply", "PATCH", f"{EXISTING}?fieldManager=tester",
         b"metadata:\n  name: existing\ndata: [unclosed\n", 400, "BadRequest", "", (EXISTING,),
         content_type="application/apply-patch+yaml", prefix=True, contains=("YAML",)),
    Case("unknown-resource-get", "GET", f"/api/v1/namespaces/{NS}/widgets", None, 404, "NotFound", NOT_FOUND),
    Case("unknown-group-create", "POST", f"/apis/nope.example.com/v1/namespaces/{NS}/things",
         {"metadata": {"name": "t"}}, 404, "NotFound", NOT_FOUND),
    Case("unknown-subresource", "PUT", f"{EXISTING}/scale", {"spec": {"replicas": 2}}, 404, "NotFound",
         NOT_FOUND, (EXISTING,)),
    Case("wrong-content-type-create", "POST", CMS, json.dumps({"metadata": {"name": "typed"}}), 415,
         "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types "
         f"include: {BODY_TYPES}", (f"{CMS}/typed",), content_type="text/plain"),
    Case("wrong-content-type-patch", "PATCH", EXISTING, {"data": {"k": "x"}}, 415, "UnsupportedMediaType",
         f"the body of the request was in an unknown format - accepted media types include: {ALL_PATCH_TYPES}",
         (EXISTING,), content_type="text/plain"),
    Case("missing-token", "POST", CMS, {"metadata": {"name": "anon"}}, 401, "Unauthorized", "Unauthorized",
         (f"{CMS}/anon",), token=None),
    Case("wrong-token", "DELETE", EXISTING, None, 401, "Unauthorized", "Unauthorized", (EXISTING,),
         token="not-the-token"),
    Case("stale-resource-version", "PUT", EXISTING, stale_update, 409, "Conflict", CONFLICT, (EXISTING,)),
    Case("namespace-mismatch", "POST", CMS, {"metadata": {"name": "elsewhere", "namespace": "default"}}, 400,
         "BadRequest", "the namespace of the provided object does not match the namespace sent on the request",
         (f"{CMS}/elsewhere", "/api/v1/namespaces/default/configmaps/elsewhere")),
    Case("api-version-mismatch", "POST", CMS,
         {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "wrong-group"}}, 400, "BadRequest",
         "the API version in the data (apps/v1) does not match the expected API version (v1)",
         (f"{CMS}/wrong-group",)),
    Case("kind-mismatch", "POST", CMS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrong-kind"}},
         400, "BadRequest", "", (f"{CMS}/wrong-kind", f"/api/v1/namespaces/{NS}/secrets/wrong-kind"),
         prefix=True, contains=("Secret", "ConfigMap")),
    Case("missing-name", "POST", CMS, {"data": {"k": "v"}}, 422, "Invalid",
         'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'),
    Case("invalid-name", "POST", CMS, {"metadata": {"name": "Bad_Name"}}, 422, "Invalid",
         f'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {NAME_RULE}',
         (f"{CMS}/Bad_Name",)),
    Case("missing-namespace", "POST", "/api/v1/namespaces/nowhere/configmaps", {"metadata": {"name": "x"}}, 404,
         "NotFound", 'namespaces "nowhere" not found', ("/api/v1/namespaces/nowhere",)),
    Case("strategic-merge-on-custom-resource", "PATCH", ORDERS, {"spec": {"version": "17"}}, 415,
         "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types "
         f"include: {CR_PATCH_TYPES}", (ORDERS,), content_type="application/strategic-merge-patch+json"),
    Case("json-patch-test-fails", "PATCH", EXISTING,
         [{"op": "test", "path": "/data/k", "value": "not-the-value"}, {"op": "add", "path": "/data/x", "value": "y"}],
         422, "Invalid", 'ConfigMap "existing" is invalid: ', (EXISTING,), content_type="application/json-patch+json",
         prefix=True, contains=("/data/k",)),
]


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A quiet cluster: without the simulated node nothing writes in the background (the node's Lease
    renewals would move the global resourceVersion the snapshots compare)."""
    instance = Cluster(tmp_path_factory.mktemp("cluster"), extra_args=("--no-simulated-node",))
    instance.start()
    try:
        yield instance
    finally:
        if instance.process is not None:
            instance.stop()


@pytest.fixture(scope="module")
def state(shared_cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Namespace ``bad`` with ConfigMap ``existing`` (modified once) and the Database ``orders``."""
    c = shared_cluster
    assert raw_request(c, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}}).status == 201
    created = raw_request(c, "POST", CMS, {"metadata": {"name": "existing"}, "data": {"k": "v0"}})
    assert created.status == 201, created.body
    modified = raw_request(c, "PATCH", EXISTING, {"data": {"k": "v1"}}, content_type="application/merge-patch+json")
    assert modified.status == 200, modified.body
    c.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    c.kubectl("wait", "--for=condition=Established", "crd/databases.example.com", "--timeout=30s")
    c.kubectl("apply", "-n", NS, "-f", str(MANIFESTS / "db-sample.yaml"))
    yield {"existing": modified.json(), "stale_rv": created.json()["metadata"]["resourceVersion"]}


def snapshot(c: Cluster, probes: tuple[str, ...]) -> tuple[str, list[tuple[int, bytes]]]:
    """The global resourceVersion and each probe's status and body."""
    listed = raw_request(c, "GET", "/api/v1/namespaces")
    assert listed.status == 200
    answers = [raw_request(c, "GET", probe) for probe in probes]
    return str(listed.json()["metadata"]["resourceVersion"]), [(a.status, a.body) for a in answers]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_request_gets_status_and_stores_nothing(shared_cluster: Cluster, state: dict[str, Any],
                                                    case: Case) -> None:
    before = snapshot(shared_cluster, case.probes)
    body = case.body(state) if callable(case.body) else case.body
    answer = raw_request(shared_cluster, case.method, case.path, body, content_type=case.content_type,
                         token=case.token)
    assert answer.status == case.code, answer.body
    assert answer.headers.get("Content-Type", "").startswith("application/json")
    status = answer.json()
    assert (status["kind"], status["apiVersion"], status["status"]) == ("Status", "v1", "Failure")
    assert (status["code"], status["reason"]) == (case.code, case.reason)
    if case.prefix:
        assert status["message"].startswith(case.message), status["message"]
    else:
        assert status["message"] == case.message
    for word in case.contains:
        assert word in status["message"], status["message"]
    assert snapshot(shared_cluster, case.probes) == before, "a refused request changed stored state"


def test_probes_see_real_objects(state: dict[str, Any], shared_cluster: Cluster) -> None:
    """Guards the snapshot check: the unchanged objects exist, the refused ones do not."""
    assert raw_request(shared_cluster, "GET", EXISTING).json()["data"] == {"k": "v1"}
    assert raw_request(shared_cluster, "GET", ORDERS).json()["spec"]["version"] == "16"
    assert raw_request(shared_cluster, "GET", f"{CMS}/half").status == 404
