"""Issue 15 items 4 and 5: built-in objects decode, validate and explain as on kube-apiserver.

Through kubectl and raw HTTPS against a real server process:
* ``kubectl explain`` of a built-in field and of a CRD kind's spec (OpenAPI v3 ``components.schemas``);
* ``kubectl apply`` of a ``kind: List`` (kubectl validates Lists against ``/openapi/v2``);
* a kind whose CRD is absent: kubectl's ``no matches for kind``;
* built-in objects are decoded as into Go structs: wrong types are a 400 with Go's message,
  unknown fields are dropped (``Strict``: 400 ``strict decoding error``, ``Warn``: a Warning header),
  absent required fields are a 422;
* explicit nulls are dropped, so re-applying ``initContainers: null`` changes nothing (same generation).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cluster import Cluster, raw_request

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parent / "manifests"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}, **spec}}


def test_kubectl_explain_builtin_and_crd(shared_cluster: Cluster) -> None:
    explained = shared_cluster.kubectl("explain", "deployment.spec.replicas").stdout
    assert "FIELD: replicas <integer>" in explained and "Number of desired pods" in explained
    shared_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd-database.yaml"))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/databases.example.com")
    crd_spec = shared_cluster.kubectl("explain", "database.spec").stdout
    assert "KIND:       Database" in crd_spec and "engine" in crd_spec


def test_kubectl_applies_a_list(shared_cluster: Cluster) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-list"}, "data": {"a": "1"}},
        deployment("list-web")]}
    result = shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(listed))
    assert "configmap/from-list created" in result.stdout and "deployment.apps/list-web created" in result.stdout


def test_kind_without_crd_is_no_matches_for_kind(shared_cluster: Cluster) -> None:
    widget = {"apiVersion": "nothere.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    result = shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(widget), check=False)
    assert result.returncode != 0
    assert 'no matches for kind "Widget" in version "nothere.example.com/v1"' in result.stderr


@pytest.mark.parametrize(("body", "query", "code", "message"), [
    (deployment("typed", replicas="2"), "", 400, 'Deployment in version "v1" cannot be handled as a Deployment: '
     "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
    (deployment("strict", bogus=1), "?fieldValidation=Strict", 400, 'Deployment in version "v1" cannot be handled '
     'as a Deployment: strict decoding error: unknown field "spec.bogus"'),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nosel"},
      "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}, "", 422,
     'Deployment.apps "nosel" is invalid: spec.selector: Required value'),
])
def test_builtin_objects_decode_as_go_structs(shared_cluster: Cluster, body: dict[str, object], query: str,
                                              code: int, message: str) -> None:
    response = raw_request(shared_cluster, "POST", DEPLOYS + query, body)
    assert response.status == code, response.body
    assert response.json()["message"] == message


def test_unknown_fields_are_dropped_with_a_warning(shared_cluster: Cluster) -> None:
    response = raw_request(shared_cluster, "POST", DEPLOYS + "?fieldValidation=Warn", deployment("warned", bogus=1))
    assert response.status == 201, response.body
    assert "bogus" not in response.json()["spec"]
    assert 'unknown field \\"spec.bogus\\"' in response.headers.get("Warning", "")


def test_explicit_nulls_are_dropped_so_reapplying_is_no_change(shared_cluster: Cluster) -> None:
    manifest = deployment("nulls")
    manifest["spec"]["template"]["spec"].update(initContainers=None, nodeSelector=None)  # type: ignore[index]
    manifest["metadata"]["labels"] = None  # type: ignore[index]
    created = raw_request(shared_cluster, "POST", DEPLOYS, manifest)
    assert created.status == 201, created.body
    pod_spec = created.json()["spec"]["template"]["spec"]
    assert "initContainers" not in pod_spec and "nodeSelector" not in pod_spec
    assert "labels" not in created.json()["metadata"]
    first = created.json()["metadata"]["generation"]
    replaced = dict(created.json())
    del replaced["metadata"]["resourceVersion"]  # unconditional: the fake controller writes status meanwhile
    replaced["spec"]["template"]["spec"]["initContainers"] = None
    put = raw_request(shared_cluster, "PUT", f"{DEPLOYS}/nulls", replaced)
    assert put.status == 200, put.body
    assert put.json()["metadata"]["generation"] == first
    shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(manifest))
    assert shared_cluster.get_json("deployment", "nulls")["metadata"]["generation"] == first


@pytest.mark.parametrize(("change", "message"), [
    ({"replicas": -1}, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
    ({"selector": {"matchLabels": {"app": "other"}}},
     'spec.template.metadata.labels: Invalid value: map[string]string{"app":"checked"}: `selector` does not '
     "match template `labels`"),
    ({"template": {"metadata": {"labels": {"app": "checked"}}, "spec": {"containers": [{"name": "Bad_Name"}]}}},
     'spec.template.spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist'),
    ({"template": {"metadata": {"labels": {"app": "checked"}}, "spec": {"containers": [{"name": "c"}]}}},
     "spec.template.spec.containers[0].image: Required value"),
])
def test_kube_validation_of_workloads(shared_cluster: Cluster, change: dict[str, object], message: str) -> None:
    body = deployment("checked")
    body["spec"].update(change)  # type: ignore[attr-defined]
    response = raw_request(shared_cluster, "POST", DEPLOYS, body)
    assert response.status == 422, response.body
    assert message in response.json()["message"], response.json()["message"]
