"""Conversion between the served versions of a built-in kind whose versions differ in shape.

Most kinds with several served versions have one shape (the stored object
is only relabelled, see :meth:`.crud.ObjectApi.as_version`).
HorizontalPodAutoscaler does not: ``autoscaling/v1`` has a single
``targetCPUUtilizationPercentage`` where ``autoscaling/v2`` (the storage
version) has a list of ``metrics``.  Objects are stored as v2; a v1 body is
converted on the way in and a stored object on the way out to a v1 client,
as kube-apiserver does (a v2 object's metrics other than CPU utilization
have no v1 form and are not shown to v1 clients).
"""

from __future__ import annotations

import copy
from typing import Any

from hybrid_operator.localcluster.resources import ResourceInfo

HPA_KEY = "autoscaling/horizontalpodautoscalers"
HPA_V1 = "autoscaling/v1"
HPA_V2 = "autoscaling/v2"


def converts(info: ResourceInfo) -> bool:
    """Whether objects seen through ``info`` need more than a new apiVersion."""
    return info.storage_key == HPA_KEY


def to_storage(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """A client's object (already checked) in the storage version."""
    if info.storage_key != HPA_KEY or obj.get("apiVersion") != HPA_V1:
        return obj
    result = copy.deepcopy(obj)
    result["apiVersion"] = HPA_V2
    spec = result.get("spec")
    if isinstance(spec, dict):
        target = spec.pop("targetCPUUtilizationPercentage", None)
        if target is not None:
            spec["metrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}]
    status = result.get("status")
    if isinstance(status, dict):
        current = status.pop("currentCPUUtilizationPercentage", None)
        if current is not None:
            status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": current}}}]
    return result


def _cpu_utilization(entries: Any, side: str) -> Any:
    for entry in entries if isinstance(entries, list) else []:
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if entry.get("type") == "Resource" and isinstance(resource, dict) and resource.get("name") == "cpu":
            value = resource.get(side)
            if isinstance(value, dict) and "averageUtilization" in value:
                return value["averageUtilization"]
    return None


def to_version(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object as the client of ``info``'s version sees it (a new dict)."""
    result = copy.deepcopy(obj)
    result["apiVersion"] = info.group_version
    if info.storage_key != HPA_KEY or info.group_version != HPA_V1:
        return result
    spec = result.get("spec")
    if isinstance(spec, dict):
        target = _cpu_utilization(spec.pop("metrics", None), "target")
        spec.pop("behavior", None)
        if target is not None:
            spec["targetCPUUtilizationPercentage"] = target
    status = result.get("status")
    if isinstance(status, dict):
        current = _cpu_utilization(status.pop("currentMetrics", None), "current")
        status.pop("conditions", None)
        if current is not None:
            status["currentCPUUtilizationPercentage"] = current
    return result
