"""Issue 12 item 7: the embedded cluster refuses what kube-apiserver refuses, with kube's Status.

Each case goes over raw HTTPS (or through the typed Python client, which is
what broke when a ConfigMap held a number) to a real server process, and
must get a JSON ``Status`` with kube-apiserver's code, reason and wording,
store nothing, and leave the server answering within 100 ms:

* bodies over 3 MiB: 413 ``Request entity too large: limit is 3145728`` (also far over, at 17 MiB);
* objects over 1.5 MiB once decoded: 413 ``etcdserver: request is too large``;
* URLs over 8 KiB: 414 (also far over, where aiohttp's parser refuses the request line, and the server
  reads the rest of the line before it closes);
* label keys and values, annotation keys and their total size: 422 on ``metadata.labels``/``annotations``;
* ConfigMap ``data`` that is not a string map: 400 ``cannot be handled as a ConfigMap`` as kube-apiserver's
  decoder answers (422 on field ``patch`` when a JSON patch produces it);
* patches that rename the object (400), change its uid (422 immutable), a PUT naming another uid (409),
  and JSON patches that break the object's structure (``remove /metadata``, ``replace /metadata`` with a
  scalar): never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from security.cluster_attacks import Probe, status_of
from support.cluster import Cluster, raw_request

pytestmark = [pytest.mark.security, pytest.mark.integration]

NS = "default"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
MIB = 1024 * 1024


def configmap(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **extra.pop("meta", {})}, **extra}


@pytest.fixture(scope="module")
def probe(shared_cluster: Cluster) -> Iterator[Probe]:
    instance = Probe(shared_cluster)
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def existing(shared_cluster: Cluster) -> dict[str, Any]:
    response = raw_request(shared_cluster, "POST", CMS, configmap("existing", data={"a": "1"}))
    assert response.status == 201, response.body
    return dict(response.json())


CASES: list[tuple[str, str, str, Any, str, int, str, str]] = [
    # id, method, path, body, content type, code, reason, message (prefix)
    ("body-over-3mib", "POST", CMS, configmap("big4", data={"k": "x" * (4 * MIB)}), "application/json",
     413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    ("body-over-16mib", "POST", CMS, configmap("big17", data={"k": "x" * (17 * MIB)}), "application/json",
     413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    ("object-over-1.5mib", "POST", CMS, configmap("big2", data={"k": "x" * (2 * MIB)}), "application/json",
     413, "RequestEntityTooLarge", "etcdserver: request is too large"),
    ("label-key-syntax", "POST", CMS, configmap("badkey", meta={"labels": {"bad key!": "v"}}), "application/json",
     422, "Invalid", 'ConfigMap "badkey" is invalid: metadata.labels: Invalid value: "bad key!": name part must '
     "consist of alphanumeric characters"),
    ("label-value-length", "POST", CMS, configmap("longvalue", meta={"labels": {"k": "v" * 64}}),
     "application/json", 422, "Invalid", f'ConfigMap "longvalue" is invalid: metadata.labels: Invalid value: '
     f'"{"v" * 64}": must be no more than 63 characters'),
    ("annotation-total-size", "POST", CMS, configmap("fat", meta={"annotations": {"a": "x" * (300 * 1024)}}),
     "application/json", 422, "Invalid",
     'ConfigMap "fat" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes'),
    ("annotation-key-syntax", "POST", CMS, configmap("badann", meta={"annotations": {"/x": "v"}}),
     "application/json", 422, "Invalid", 'ConfigMap "badann" is invalid: metadata.annotations: Invalid value: "/x": '
     "prefix part must be non-empty"),
    ("configmap-data-number", "POST", CMS, configmap("number", data={"k": 5}), "application/json",
     400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number '
     "into Go struct field ConfigMap.data of type string"),
    ("secret-data-not-base64", "POST", f"/api/v1/namespaces/{NS}/secrets",
     {"metadata": {"name": "s"}, "data": {"k": "not base64!"}}, "application/json",
     400, "BadRequest", 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'),
    ("json-patch-data-number", "PATCH", f"{CMS}/existing", [{"op": "replace", "path": "/data", "value": 5}],
     "application/json-patch+json", 422, "Invalid", ' "" is invalid: patch: Invalid value: '),
    ("json-patch-metadata-scalar", "PATCH", f"{CMS}/existing",
     [{"op": "replace", "path": "/metadata", "value": "x"}], "application/json-patch+json", 422, "Invalid",
     ' "" is invalid: patch: Invalid value: '),
    ("json-patch-remove-metadata", "PATCH", f"{CMS}/existing", [{"op": "remove", "path": "/metadata"}],
     "application/json-patch+json", 400, "BadRequest",
     "the name of the object () does not match the name on the URL (existing)"),
    ("merge-patch-rename", "PATCH", f"{CMS}/existing", {"metadata": {"name": "renamed"}},
     "application/merge-patch+json", 400, "BadRequest",
     "the name of the object (renamed) does not match the name on the URL (existing)"),
    ("merge-patch-namespace", "PATCH", f"{CMS}/existing", {"metadata": {"namespace": "kube-system"}},
     "application/merge-patch+json", 400, "BadRequest",
     "the namespace of the provided object does not match the namespace sent on the request"),
    ("merge-patch-uid", "PATCH", f"{CMS}/existing", {"metadata": {"uid": "00000000-0000-0000-0000-000000000001"}},
     "application/merge-patch+json", 422, "Invalid", 'ConfigMap "existing" is invalid: metadata.uid: Invalid value: '
     '"00000000-0000-0000-0000-000000000001": field is immutable'),
    ("put-other-uid", "PUT", f"{CMS}/existing", configmap("existing", meta={"uid": "someone-else"}),
     "application/json", 409, "Conflict", 'Operation cannot be fulfilled on configmaps "existing": StorageError: '
     "invalid object"),
]


@pytest.mark.parametrize(("case_id", "method", "path", "body", "content_type", "code", "reason", "message"),
                         CASES, ids=[case[0] for case in CASES])
def test_refused_like_kube_apiserver(shared_cluster: Cluster, existing: dict[str, Any], probe: Probe, case_id: str,
                                    method: str, path: str, body: Any, content_type: str, code: int, reason: str,
                                    message: str) -> None:
    before = raw_request(shared_cluster, "GET", f"{CMS}/existing").json()
    payload = json.dumps(body).encode()
    response = raw_request(shared_cluster, method, path, payload, content_type=content_type, timeout=60)
    status = status_of(response, case_id)
    assert (response.status, status["reason"]) == (code, reason), status
    assert status["message"].startswith(message), status["message"][:500]
    after = raw_request(shared_cluster, "GET", f"{CMS}/existing").json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "the object changed"
    probe.assert_alive(case_id)


@pytest.mark.parametrize("length", [9 * 1024, 20 * 1024, 70 * 1024])
def test_long_urls_get_a_414_status(shared_cluster: Cluster, probe: Probe, length: int) -> None:
    # A request line over aiohttp's 16 KiB limit is answered while the client may still be sending the rest:
    # the server reads and drops that rest before it closes (a lingering close, as kube-apiserver reads the
    # whole request first), so the client reads the 414 rather than a reset. test_cluster_connections.py
    # sends the rest after the answer on purpose.
    response = raw_request(shared_cluster, "GET", f"{CMS}?labelSelector={'a' * length}")
    status = status_of(response, f"URL of {length} bytes")
    assert response.status == 414, status
    probe.assert_alive(f"URL of {length} bytes")


def test_the_typed_python_client_still_lists_after_bad_data(shared_cluster: Cluster, existing: dict[str, Any]) -> None:
    api = config.new_client_from_config(config_file=str(shared_cluster.kubeconfig))
    core = client.CoreV1Api(api)
    try:
        # The typed client refuses to send a number itself; any other client can.
        refused = raw_request(shared_cluster, "POST", CMS, {"metadata": {"name": "typed"}, "data": {"k": 5}})
        assert refused.status == 400
        with pytest.raises(ApiException) as patched:
            core.patch_namespaced_config_map("existing", NS, [{"op": "replace", "path": "/data/a", "value": 5}])
        assert patched.value.status == 422
        with pytest.raises(ApiException) as labelled:
            core.patch_namespaced_config_map("existing", NS, {"metadata": {"labels": {"k": "x" * 64}}})
        assert labelled.value.status == 422
        listed = core.list_namespaced_config_map(NS)  # the typed client decodes every item
        assert "existing" in [item.metadata.name for item in listed.items]
    finally:
        api.close()
