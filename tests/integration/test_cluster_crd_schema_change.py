"""Issue 15 item 9: changing a CRD's schema never breaks its existing objects.

A field is removed from the CRD's schema while an object still stores it:
kube-apiserver prunes what it reads and validates only what a request sends,
so the object reads without the field, and ``kubectl apply`` (fieldValidation
Strict) of the object keeps working.  Through kubectl against a real server.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from support.cluster import Cluster

pytestmark = pytest.mark.integration


def crd(with_observed: bool) -> dict[str, Any]:
    status: dict[str, Any] = {"type": "object", "properties": {"phase": {"type": "string"}}}
    if with_observed:
        status["properties"]["observedGeneration"] = {"type": "integer"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                       "status": status}}}}]}}


def test_removing_a_schema_field_keeps_objects_usable(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(crd(with_observed=True)))
    cluster.kubectl("wait", "--for=condition=Established", "crd/gadgets.example.com")
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
              "spec": {"size": 1}, "status": {"phase": "Ready", "observedGeneration": 1}}
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(gadget))
    assert cluster.get_json("gadget", "g")["status"]["observedGeneration"] == 1

    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(crd(with_observed=False)))
    read = cluster.get_json("gadget", "g")
    assert "observedGeneration" not in read["status"]  # pruned on read

    changed = copy.deepcopy(gadget)
    changed["spec"]["size"] = 2
    del changed["status"]["observedGeneration"]
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(changed))  # Strict: only the request is validated
    cluster.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(changed))
    assert cluster.get_json("gadget", "g")["spec"]["size"] == 2

    strict = cluster.kubectl("apply", "-f", "-", check=False, input_text=json.dumps(
        {**changed, "spec": {"size": 3, "bogus": True}}))
    assert strict.returncode != 0 and 'unknown field "spec.bogus"' in strict.stderr
