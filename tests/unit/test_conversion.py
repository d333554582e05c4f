"""autoscaling/v1 <-> v2 HorizontalPodAutoscaler conversion (semantics/conversion.py)."""

from __future__ import annotations

import pytest

from hybrid_operator.localcluster.resources import Registry
from hybrid_operator.localcluster.semantics import conversion

pytestmark = pytest.mark.unit

REGISTRY = Registry.with_builtins()
V1 = REGISTRY.lookup("autoscaling", "v1", "horizontalpodautoscalers")
V2 = REGISTRY.lookup("autoscaling", "v2", "horizontalpodautoscalers")
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
CPU_70 = [{"type": "Resource",
           "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]


def test_v1_is_stored_as_v2_and_read_back_as_v1() -> None:
    assert V1 is not None and V2 is not None
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
          "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "targetCPUUtilizationPercentage": 70},
          "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 12}}
    stored = conversion.to_storage(V1, v1)
    assert stored["apiVersion"] == "autoscaling/v2"
    assert stored["spec"] == {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": CPU_70}
    assert stored["status"]["currentMetrics"][0]["resource"]["current"] == {"averageUtilization": 12}
    assert conversion.to_version(V1, stored) == v1
    assert conversion.to_version(V2, stored) == stored


def test_v2_metrics_v1_cannot_express_are_not_shown_to_v1() -> None:
    assert V1 is not None
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                           "averageValue": "1Gi"}}}
    stored = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
              "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3, "metrics": [memory]}}
    assert conversion.to_version(V1, stored)["spec"] == {"scaleTargetRef": TARGET, "maxReplicas": 3}
